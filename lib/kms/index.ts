/** Key generation and derivation (docs/design.md#keys-and-identities). See ./keys.ts. */
export * from './keys.js';
export * from './join-service-key.js';
