/** The config editor moved to lib/config/edit.ts (cli/images uses it too); re-exported for the existing imports. */
export { editConfig, type ConfigEdits } from '../../lib/config/edit.js';
