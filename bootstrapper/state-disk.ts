/**
 * The node's encrypted state disk (docs/design.md#state-disk): the StateDisk interface, the gocryptfs directory of local process
 * nodes and the LUKS2 disk of cloud nodes, and the one place that opens the disk a node platform names. Format,
 * keys and guarantees: docs/state-disk.md.
 */
import type { StateDiskSpec } from '../providers/contract.js';
import { openGocryptfsStateDisk } from './state-disk/gocryptfs.js';
import { openLuksStateDisk, type LuksStateDiskOptions } from './state-disk/cryptsetup.js';
import type { StateDisk } from './state-disk/types.js';

export { StateDiskError, type StateDisk } from './state-disk/types.js';
export { openGocryptfsStateDisk, GocryptfsStateDisk, type GocryptfsStateDiskOptions } from './state-disk/gocryptfs.js';
export {
  openLuksStateDisk,
  LuksStateDisk,
  deviceMapperActivator,
  testPassphraseActivator,
  type LuksActivator,
  type LuksStateDiskOptions,
  type RunCommand,
} from './state-disk/cryptsetup.js';

/** Opens the disk a platform describes. */
export function openStateDisk(
  spec: StateDiskSpec,
  options: { luks?: Omit<LuksStateDiskOptions, 'mountPoint'> } = {},
): Promise<StateDisk> {
  switch (spec.kind) {
    case 'gocryptfs':
      return openGocryptfsStateDisk({ diskDir: spec.diskDir, mountPoint: spec.mountPoint });
    case 'luks':
      return openLuksStateDisk(spec.device, { ...options.luks, mountPoint: spec.mountPoint });
  }
}
