/** Key generation and derivation (DESIGN §4). See ./keys.ts. */
export * from './keys.js';
export * from './join-service-key.js';
