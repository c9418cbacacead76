/** The workspace (docs/architecture.md#workspace-files): file names, atomic writes, required reads, state file, master secret, lock, resource journal. */
export * from './files.js';
export * from './atomic-file.js';
export * from './regular-file.js';
export * from './required-file.js';
export * from './state.js';
export * from './master-secret.js';
export * from './lock.js';
export * from './resource-journal.js';
export * from './access.js';
