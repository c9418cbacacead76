/**
 * Which instance types may run which attestation variant (confidential VMs only, docs/design.md#providers), which state-disk
 * types each provider offers, and the defaults `config generate` writes. The instance types are the variant
 * table's (lib/attestation/variant-table.ts): lists of types, not patterns, so that `config instance-types` can
 * print them and a typo gets a "did you mean".
 */
import { VARIANTS } from '../attestation/variant.js';
import type { AttestationVariant, Provider } from './variants.js';

/** Instance types per variant, from the variant table. `local` nodes are processes: their only type is `local`. */
export const INSTANCE_TYPES = Object.fromEntries(VARIANTS.map((v) => [v.name, v.instanceTypes])) as Record<
  AttestationVariant,
  readonly string[]
>;

/** What `config generate` writes per variant (control plane and workers alike). */
export const DEFAULT_INSTANCE_TYPES = Object.fromEntries(
  VARIANTS.map((v) => [v.name, v.defaultInstanceType]),
) as Record<AttestationVariant, string>;

/** State-disk types per provider; the first is the default. `file`: the local provider's disk is a file; `raw`: a qemu VM's sparse raw disk file. */
export const DISK_TYPES: Record<Provider, readonly string[]> = {
  local: ['file'],
  qemu: ['raw'],
  aws: ['gp3', 'gp2', 'io2'],
  azure: ['Premium_LRS', 'StandardSSD_LRS', 'Standard_LRS'],
  gcp: ['pd-ssd', 'pd-balanced', 'pd-standard'],
};

/** Smallest state disk per provider in GB: a local disk may be tiny, a cloud node needs room for images. */
export const MIN_STATE_DISK_GB: Record<Provider, number> = { local: 1, qemu: 1, aws: 10, azure: 10, gcp: 10 };
export const DEFAULT_STATE_DISK_GB: Record<Provider, number> = { local: 1, qemu: 1, aws: 30, azure: 30, gcp: 30 };

export function isAllowedInstanceType(variant: AttestationVariant, instanceType: string): boolean {
  return INSTANCE_TYPES[variant].includes(instanceType);
}
