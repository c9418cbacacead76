/**
 * The node's encrypted state disk (DESIGN §7): the StateDisk interface, the file-backed disk of local process nodes
 * and the (unavailable) LUKS disk of cloud node images. Format, keys and guarantees: docs/state-disk.md.
 */
export { StateDiskError, type StateDisk } from './state-disk/types.js';
export { openFileStateDisk, FileStateDisk, type FileStateDiskOptions } from './state-disk/file-disk.js';
export { cryptsetupStateDisk } from './state-disk/cryptsetup.js';
export { SECTOR_SIZE } from './state-disk/layout.js';
