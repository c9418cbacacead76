/** Logging: the Logger interface, the JSON-lines debug log, secret redaction and collapsing of repeated lines. */
export * from './logger.js';
export * from './rate-limit.js';
