/**
 * Which instance types may run which attestation variant (confidential VMs only, DESIGN §9), which state-disk
 * types each provider offers, and the defaults `config generate` writes. Lists of types, not patterns, so that
 * `config instance-types` can print them and a typo gets a "did you mean".
 */
import type { AttestationVariant, Provider } from './variants.js';

function sizes(prefixes: string[], suffixes: string[]): string[] {
  return prefixes.flatMap((p) => suffixes.map((s) => `${p}${s}`));
}

const AWS_SIZES = ['.large', '.xlarge', '.2xlarge', '.4xlarge', '.8xlarge', '.12xlarge', '.16xlarge'];
const AZURE_SIZES = [2, 4, 8, 16, 32, 48, 64, 96];
const AZURE_EC_SIZES = [2, 4, 8, 16, 20, 32, 48, 64, 96];

function azure(series: string, sizesList: (number | string)[], suffix: string): string[] {
  return sizesList.map((n) => `Standard_${series}${n}${suffix}`);
}

function gcp(families: string[], shapes: Record<string, number[]>): string[] {
  return families.flatMap((family) =>
    Object.entries(shapes).flatMap(([shape, cpus]) => cpus.map((n) => `${family}-${shape}-${n}`)),
  );
}

const N2D = { standard: [2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224], highmem: [2, 4, 8, 16, 32, 48, 64, 80, 96], highcpu: [2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224] };
const C2D = { standard: [2, 4, 8, 16, 32, 56, 112], highmem: [2, 4, 8, 16, 32, 56, 112], highcpu: [2, 4, 8, 16, 32, 56, 112] };

/** Instance types per variant. `local` nodes are processes on this machine: their only type is `local`. */
export const INSTANCE_TYPES: Record<AttestationVariant, readonly string[]> = {
  'local-vtpm': ['local'],
  // AWS runs SEV-SNP on the 3rd-generation EPYC families only.
  'aws-sev-snp': sizes(['m6a', 'c6a', 'r6a'], AWS_SIZES),
  // NitroTPM: Nitro-based families with UEFI boot.
  'aws-nitro-tpm': sizes(['m5', 'm5a', 'm6a', 'm6i', 'c5', 'c5a', 'c6a', 'c6i', 'r5', 'r5a', 'r6a', 'r6i'], AWS_SIZES),
  'azure-sev-snp': [
    ...azure('DC', AZURE_SIZES, 'as_v5'),
    ...azure('DC', AZURE_SIZES, 'ads_v5'),
    ...azure('EC', AZURE_EC_SIZES, 'as_v5'),
    ...azure('EC', AZURE_EC_SIZES, 'ads_v5'),
  ],
  'azure-tdx': [...azure('DC', AZURE_SIZES, 'es_v5'), ...azure('EC', [...AZURE_SIZES, 128], 'es_v5')],
  // Trusted launch is not a CVM; these are the AMD families Constellation supports it on.
  'azure-trustedlaunch': [
    ...azure('D', AZURE_SIZES.slice(1), 'as_v4'),
    ...azure('D', AZURE_SIZES.slice(1), 'as_v5'),
    ...azure('E', AZURE_SIZES.slice(1), 'as_v4'),
    ...azure('E', AZURE_SIZES.slice(1), 'as_v5'),
  ],
  'gcp-sev-snp': gcp(['n2d'], N2D),
  'gcp-sev-es': [...gcp(['n2d'], N2D), ...gcp(['c2d'], C2D)],
};

/** What `config generate` writes per variant (control plane and workers alike). */
export const DEFAULT_INSTANCE_TYPES: Record<AttestationVariant, string> = {
  'local-vtpm': 'local',
  'aws-sev-snp': 'm6a.xlarge',
  'aws-nitro-tpm': 'm6a.xlarge',
  'azure-sev-snp': 'Standard_DC4as_v5',
  'azure-tdx': 'Standard_DC4es_v5',
  'azure-trustedlaunch': 'Standard_D4as_v5',
  'gcp-sev-snp': 'n2d-standard-4',
  'gcp-sev-es': 'n2d-standard-4',
};

/** State-disk types per provider; the first is the default. `file`: the local provider's disk is a file. */
export const DISK_TYPES: Record<Provider, readonly string[]> = {
  local: ['file'],
  aws: ['gp3', 'gp2', 'io2'],
  azure: ['Premium_LRS', 'StandardSSD_LRS', 'Standard_LRS'],
  gcp: ['pd-ssd', 'pd-balanced', 'pd-standard'],
};

/** Smallest state disk per provider in GB: a local disk may be tiny, a cloud node needs room for images. */
export const MIN_STATE_DISK_GB: Record<Provider, number> = { local: 1, aws: 10, azure: 10, gcp: 10 };
export const DEFAULT_STATE_DISK_GB: Record<Provider, number> = { local: 1, aws: 30, azure: 30, gcp: 30 };

export function isAllowedInstanceType(variant: AttestationVariant, instanceType: string): boolean {
  return INSTANCE_TYPES[variant].includes(instanceType);
}
