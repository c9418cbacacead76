/**
 * The qemu-vtpm variant: nodes of the qemu provider, QEMU VMs on this machine that boot the node image under OVMF
 * with swtpm as their TPM (docs/workflows/mini.md#vm-nodes-mini-up---vm). The AK is trusted exactly as local-vtpm trusts it: only
 * when it is, byte for byte, the AK the provider registered for that instance when it created the VM (the metadata
 * server's AK registry; upstream's QEMU variant trusts any AK). instanceInfo is `{"instance":"<node name>"}`.
 * The PCRs are a real boot's: PCR 4 (boot chain), 9 (kernel command line and initrd) and 11 (the UKI) come from the
 * image's signed measurements.json, 8, 12 and 13 are zero; the generic validator refuses a config that lacks any of
 * them (lib/attestation/measurements.ts, IMAGE_PCRS).
 */
import type { Validator, ValidatorDeps, VariantConfig } from '../types.js';
import { registeredAkValidator } from './local-vtpm.js';

export const VARIANT = 'qemu-vtpm';

/** The instanceInfo of a qemu node: the same shape as a local node's. */
export { localInstanceInfo as qemuInstanceInfo } from './local-vtpm.js';

export function createValidator(config: VariantConfig, deps: ValidatorDeps): Validator {
  return registeredAkValidator(VARIANT, config, deps, 'qemu');
}
