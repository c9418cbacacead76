/**
 * The one table of attestation variants (docs/design.md#attestation), like upstream's internal/attestation/variant: every fact
 * about a variant that more than one part needs stands here once, and everything else derives from it:
 *
 *   VARIANT_TABLE ─┬─ ./variant.ts        lookups: names, provider lists (default first), CVM checks
 *                  ├─ ./registry.ts       createValidator(name): the row's validator factory
 *                  ├─ lib/config/         config keys and sections, default measurements, instance types
 *                  └─ providers/*         attestationVariants, confidential-VM settings and size checks
 *
 * Data only (no logic that reads the table: that lives in ./variant.ts), so that adding a row is the whole
 * change for a variant whose trust rule already has a module in ./variants/. The instance-type lists are built
 * here because they are data too: what `config generate` may write and `config instance-types` prints.
 */
import type { Validator, ValidatorDeps, VariantConfig } from './types.js';

export const PROVIDERS = ['local', 'qemu', 'aws', 'azure', 'gcp'] as const;
export type Provider = (typeof PROVIDERS)[number];

/** How the node's VM is isolated from its host: the CVM technology, none for a VM with a vTPM only. */
export type CvmTechnology = 'sev-snp' | 'sev-es' | 'tdx';

/**
 * Why a validator trusts the node's attestation key (docs/design.md#attestation):
 * - provider-registry: the provider registered the AK when it made the node; the validator asks its registry;
 * - cloud-api: the cloud's API vouches for the instance (its registered AK, or its image);
 * - snp-report / tdx-quote: the TEE's signed report binds the AK (directly or through the paravisor's runtime data);
 * - ak-certificate: the AK's certificate chains to the cloud's root.
 */
export type AkTrustKind = 'provider-registry' | 'cloud-api' | 'snp-report' | 'tdx-quote' | 'ak-certificate';

/** The config fields a variant's `attestation.<configKey>` section has besides `measurements`. */
export type VariantConfigFields = 'none' | 'snp-tcb' | 'snp-tcb-firmware-signer' | 'tdx-tcb';

/** A variant's module in ./variants/: the generic vTPM validator plus its AK trust rule. */
export interface ValidatorModule {
  createValidator(config: VariantConfig, deps: ValidatorDeps): Validator;
}

export interface VariantSpec {
  /** The CLI name, also the document's `variant`. */
  name: string;
  /** The key under the config's `attestation` (Constellation's config layout). */
  configKey: string;
  provider: Provider;
  /** The provider's default variant (`config generate` without -a); exactly one per provider. */
  isDefault?: boolean;
  /** One line for the config's JSON Schema. */
  summary: string;
  configFields: VariantConfigFields;
  /** Default measurements: which PCRs are enforced and which only warn (values are the image's). */
  measurements: { enforced: readonly number[]; warnOnly: readonly number[] };
  /** Present for confidential VMs: the technology and the instance families the provider may run it on. */
  cvm?: { technology: CvmTechnology; families: readonly string[] };
  /** Every instance type the config accepts (what `config instance-types` lists); the default is one of them. */
  instanceTypes: readonly string[];
  defaultInstanceType: string;
  akTrust: AkTrustKind;
  /** What the node runs to make documents: every variant today sends a vTPM quote (lib/attestation/vtpm-issuer.ts). */
  issuer: 'vtpm';
  /** Loads the validator on first use, so a process loads only the verifier (and certificates) it needs. */
  validator: () => Promise<ValidatorModule>;
}

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

const N2D = {
  standard: [2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224],
  highmem: [2, 4, 8, 16, 32, 48, 64, 80, 96],
  highcpu: [2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224],
};
const C2D = {
  standard: [2, 4, 8, 16, 32, 56, 112],
  highmem: [2, 4, 8, 16, 32, 56, 112],
  highcpu: [2, 4, 8, 16, 32, 56, 112],
};

/** PCR policy of our cloud node images (docs/design.md#attestation): boot chain, zeros, initramfs, UKI enforced; firmware and 15 warn. */
const CLOUD_PCRS = { enforced: [4, 8, 9, 11, 12, 13], warnOnly: [0, 1, 2, 3, 6, 7, 15] } as const;

/** Rows in the order of Constellation's config layout (the JSON Schema and `config generate -a` list them so). */
export const VARIANT_TABLE = [
  {
    // The local provider registered the node's AK when it created the node (like GCP's shielded identity).
    name: 'local-vtpm',
    configKey: 'localVTPM',
    provider: 'local',
    isDefault: true,
    summary: 'Local nodes with a software TPM (swtpm).',
    configFields: 'none',
    // The launcher adds PCRs 4, 9 and 11 of the image it measured at `create`.
    measurements: { enforced: [8, 12, 13], warnOnly: [15] },
    // Local nodes are processes on this machine: their only type is `local`.
    instanceTypes: ['local'],
    defaultInstanceType: 'local',
    akTrust: 'provider-registry',
    issuer: 'vtpm',
    validator: () => import('./variants/local-vtpm.js'),
  },
  {
    // The qemu provider registered the VM's AK (its swtpm's) when it created the node, as local-vtpm; the VM boots
    // the node image under OVMF, so PCR 4, 9 and 11 are the image's signed ones (create writes them into the config).
    name: 'qemu-vtpm',
    configKey: 'qemuVTPM',
    provider: 'qemu',
    isDefault: true,
    summary: 'QEMU VMs on this machine booting the node image, with swtpm as their TPM.',
    configFields: 'none',
    // 4, 9 and 11 come from the image's signed measurements at `create` (the validator requires them).
    measurements: { enforced: [8, 12, 13], warnOnly: [0, 1, 2, 3, 6, 7, 15] },
    // The VM's size is provider.qemu's vcpus and memoryMiB: the only type is `qemu`.
    instanceTypes: ['qemu'],
    defaultInstanceType: 'qemu',
    akTrust: 'provider-registry',
    issuer: 'vtpm',
    validator: () => import('./variants/qemu-vtpm.js'),
  },
  {
    // The SNP report's REPORT_DATA is SHA-512 of the AK (VLEK-signed).
    name: 'aws-sev-snp',
    configKey: 'awsSEVSNP',
    provider: 'aws',
    isDefault: true,
    summary: 'AWS EC2 with AMD SEV-SNP.',
    configFields: 'snp-tcb',
    measurements: CLOUD_PCRS,
    // AWS runs SEV-SNP on the 3rd-generation EPYC families only.
    cvm: { technology: 'sev-snp', families: ['m6a', 'c6a', 'r6a'] },
    instanceTypes: sizes(['m6a', 'c6a', 'r6a'], AWS_SIZES),
    defaultInstanceType: 'm6a.xlarge',
    akTrust: 'snp-report',
    issuer: 'vtpm',
    validator: () => import('./variants/aws-sev-snp.js'),
  },
  {
    // Not a CVM: EC2's API confirms the instance's image has NitroTPM; the AK is taken as presented.
    name: 'aws-nitro-tpm',
    configKey: 'awsNitroTPM',
    provider: 'aws',
    summary: 'AWS EC2 with NitroTPM (not a CVM).',
    configFields: 'none',
    measurements: CLOUD_PCRS,
    // NitroTPM: Nitro-based families with UEFI boot.
    instanceTypes: sizes(['m5', 'm5a', 'm6a', 'm6i', 'c5', 'c5a', 'c6a', 'c6i', 'r5', 'r5a', 'r6a', 'r6i'], AWS_SIZES),
    defaultInstanceType: 'm6a.xlarge',
    akTrust: 'cloud-api',
    issuer: 'vtpm',
    validator: () => import('./variants/aws-nitro-tpm.js'),
  },
  {
    // The SNP report (VCEK) binds the paravisor's runtime data, which holds the AK.
    name: 'azure-sev-snp',
    configKey: 'azureSEVSNP',
    provider: 'azure',
    isDefault: true,
    summary: 'Azure confidential VMs with AMD SEV-SNP.',
    configFields: 'snp-tcb-firmware-signer',
    measurements: CLOUD_PCRS,
    cvm: { technology: 'sev-snp', families: ['DCas_v5', 'DCads_v5', 'ECas_v5', 'ECads_v5'] },
    instanceTypes: [
      ...azure('DC', AZURE_SIZES, 'as_v5'),
      ...azure('DC', AZURE_SIZES, 'ads_v5'),
      ...azure('EC', AZURE_EC_SIZES, 'as_v5'),
      ...azure('EC', AZURE_EC_SIZES, 'ads_v5'),
    ],
    defaultInstanceType: 'Standard_DC4as_v5',
    akTrust: 'snp-report',
    issuer: 'vtpm',
    validator: () => import('./variants/azure-sev-snp.js'),
  },
  {
    // The TDX quote binds the paravisor's runtime data, which holds the AK.
    name: 'azure-tdx',
    configKey: 'azureTDX',
    provider: 'azure',
    summary: 'Azure confidential VMs with Intel TDX.',
    configFields: 'tdx-tcb',
    measurements: CLOUD_PCRS,
    cvm: { technology: 'tdx', families: ['DCes_v5', 'DCeds_v5', 'ECes_v5', 'ECeds_v5'] },
    instanceTypes: [...azure('DC', AZURE_SIZES, 'es_v5'), ...azure('EC', [...AZURE_SIZES, 128], 'es_v5')],
    defaultInstanceType: 'Standard_DC4es_v5',
    akTrust: 'tdx-quote',
    issuer: 'vtpm',
    validator: () => import('./variants/azure-tdx.js'),
  },
  {
    // Not a CVM: the AK certificate chains to Microsoft's vTPM root.
    name: 'azure-trustedlaunch',
    configKey: 'azureTrustedLaunch',
    provider: 'azure',
    summary: 'Azure trusted launch VMs (not a CVM).',
    configFields: 'none',
    measurements: CLOUD_PCRS,
    // The AMD families Constellation supports trusted launch on.
    instanceTypes: [
      ...azure('D', AZURE_SIZES.slice(1), 'as_v4'),
      ...azure('D', AZURE_SIZES.slice(1), 'as_v5'),
      ...azure('E', AZURE_SIZES.slice(1), 'as_v4'),
      ...azure('E', AZURE_SIZES.slice(1), 'as_v5'),
    ],
    defaultInstanceType: 'Standard_D4as_v5',
    akTrust: 'ak-certificate',
    issuer: 'vtpm',
    validator: () => import('./variants/azure-trustedlaunch.js'),
  },
  {
    // SEV-ES has no report: GCP's getShieldedInstanceIdentity returns the instance's AK.
    name: 'gcp-sev-es',
    configKey: 'gcpSEVES',
    provider: 'gcp',
    summary: 'GCP confidential VMs with AMD SEV-ES.',
    configFields: 'none',
    measurements: CLOUD_PCRS,
    cvm: { technology: 'sev-es', families: ['n2d', 'c2d'] },
    instanceTypes: [...gcp(['n2d'], N2D), ...gcp(['c2d'], C2D)],
    defaultInstanceType: 'n2d-standard-4',
    akTrust: 'cloud-api',
    issuer: 'vtpm',
    validator: () => import('./variants/gcp-sev-es.js'),
  },
  {
    // GCP's shielded identity returns the AK and the SNP report binds it (REPORT_DATA = SHA-512 of the AK).
    name: 'gcp-sev-snp',
    configKey: 'gcpSEVSNP',
    provider: 'gcp',
    isDefault: true,
    summary: 'GCP confidential VMs with AMD SEV-SNP.',
    configFields: 'snp-tcb',
    measurements: CLOUD_PCRS,
    // SEV-SNP needs 3rd-generation EPYC (Milan) hosts, which GCP has in n2d only.
    cvm: { technology: 'sev-snp', families: ['n2d'] },
    instanceTypes: gcp(['n2d'], N2D),
    defaultInstanceType: 'n2d-standard-4',
    akTrust: 'snp-report',
    issuer: 'vtpm',
    validator: () => import('./variants/gcp-sev-snp.js'),
  },
] as const satisfies readonly VariantSpec[];

export type VariantName = (typeof VARIANT_TABLE)[number]['name'];
export type VariantConfigKey = (typeof VARIANT_TABLE)[number]['configKey'];
