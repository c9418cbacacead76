/**
 * Attested channels (docs/design.md#attested-channels): a verifier seals secrets only to a peer whose attestation document, bound to
 * a fresh nonce, the exchange's purpose and an ephemeral key, passed validation. grpc-js and jose load lazily.
 */
export * from './admission.js';
export * from './channel.js';
export * from './credentials.js';
export * from './document.js';
export * from './exchange.js';
export * from './keys.js';
export * from './seal.js';
export * from './server.js';
export * from './services.js';
export * from './user-data.js';
export * from './verify-service.js';
