/**
 * The node's encrypted state disk (DESIGN §7): the StateDisk interface, the gocryptfs directory of local process
 * nodes and the LUKS disk of cloud node images. Format, keys and guarantees: docs/state-disk.md.
 */
export { StateDiskError, type StateDisk } from './state-disk/types.js';
export { openGocryptfsStateDisk, GocryptfsStateDisk, type GocryptfsStateDiskOptions } from './state-disk/gocryptfs.js';
export { cryptsetupStateDisk } from './state-disk/cryptsetup.js';
