/** Logging: the Logger interface, the JSON-lines debug log and secret redaction. */
export * from './logger.js';
