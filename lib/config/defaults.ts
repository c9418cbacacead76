/**
 * `defaultConfig(provider, ...)`: the config `config generate` writes, with strong defaults per provider
 * (node groups, instance and disk types, attestation variant and its measurements and TCB minimums). Cloud
 * fields only `iam create` can know are left empty; validation names them until they are filled.
 */
import { variantSpec } from '../attestation/variant.js';
import { UserError } from '../errors.js';
import { DEFAULT_INSTANCE_TYPES, DEFAULT_STATE_DISK_GB, DISK_TYPES } from './instance-types.js';
import { defaultMeasurements } from './measurements.js';
import { cliVersion } from './package-info.js';
import type { Config, NodeGroup } from './schema.js';
import { DEFAULT_KUBERNETES_VERSION, resolveKubernetesVersion, SUPPORTED_KUBERNETES_VERSIONS } from './versions.js';
import {
  ATTESTATION_VARIANTS,
  defaultVariantOf,
  isAttestationVariant,
  PROVIDER_VARIANTS,
  PROVIDERS,
  isProvider,
  variantConfigKey,
  type AttestationVariant,
  type Provider,
} from './variants.js';

export interface DefaultConfigOptions {
  /** "v1.32", "1.32" or an exact supported version. */
  kubernetesVersion?: string;
  /** CLI variant name, e.g. "azure-tdx"; the provider's default when omitted. */
  attestationVariant?: string;
  tags?: Record<string, string>;
  name?: string;
  /** Node counts of the default groups (control_plane_default, worker_default), in place of the defaults. */
  initialCounts?: Record<string, number>;
  /** The image, in place of the provider's default. */
  image?: string;
}

/** Region and zone defaults, and zones of the node groups. */
const LOCATIONS = {
  aws: { region: 'us-east-2', zone: 'us-east-2a' },
  azure: { location: 'westus', zone: '' },
  gcp: { region: 'europe-west3', zone: 'europe-west3-a' },
} as const;

/**
 * A qemu node's VM: what one node program with its etcd member needs; KVM where it works; Debian's OVMF build with the
 * 2 MB flash layout (128 KB variable store): under TCG it reaches its boot manager in 3–6 fewer CPU seconds than
 * the 4 MB one, and it measures the node image into PCR 4, 9 and 11 alike (only PCR 0, the firmware itself, differs;
 * docs/workflows/node-images.md#boot-time). Nodes boot without Secure Boot, so the larger store's room for keys is not
 * needed.
 */
export const QEMU_DEFAULTS = {
  vcpus: 2,
  memoryMiB: 2048,
  firmware: '/usr/share/OVMF/OVMF_CODE.fd',
  firmwareVars: '/usr/share/OVMF/OVMF_VARS.fd',
  accel: 'auto',
} as const;

/** Minimum launch TCB of SEV-SNP variants: the TCB of the reference evidence in our tests. Raise it to your fleet's. */
const SNP_TCB = { bootloaderVersion: 2, teeVersion: 0, snpVersion: 6, microcodeVersion: 93 };

/**
 * TDX: zero SVN minimums accept any host; the all-zero mrSeam matches no real TDX module, so a user sets it to the
 * module their hosts run (like the measurements of the image).
 */
const TDX_DEFAULTS = { qeSVN: 0, pceSVN: 0, teeTCBSVN: '0'.repeat(32), mrSeam: '0'.repeat(96) };

export function defaultConfig(provider: string, options: DefaultConfigOptions = {}): Config {
  if (!isProvider(provider)) {
    throw new UserError(`Unknown provider "${provider}".`, { hint: `Choose one of ${PROVIDERS.join(', ')}.` });
  }
  const variant = chooseVariant(provider, options.attestationVariant);
  const kubernetesVersion = chooseKubernetesVersion(options.kubernetesVersion);
  const zone = provider === 'local' || provider === 'qemu' ? provider : LOCATIONS[provider].zone;
  const group = (role: NodeGroup['role'], initialCount: number): NodeGroup => ({
    role,
    zone,
    instanceType: DEFAULT_INSTANCE_TYPES[variant],
    stateDiskSizeGB: DEFAULT_STATE_DISK_GB[provider],
    stateDiskType: DISK_TYPES[provider][0]!,
    initialCount,
  });
  return {
    version: 'v4',
    name: options.name ?? 'constell',
    kubernetesVersion,
    image: options.image ?? (provider === 'local' ? 'local' : ''),
    microserviceVersion: `v${cliVersion()}`,
    serviceCIDR: '10.96.0.0/12',
    tags: options.tags ?? {},
    provider: { [provider]: providerSection(provider) },
    nodeGroups: {
      control_plane_default: group(
        'control-plane',
        options.initialCounts?.control_plane_default ?? (provider === 'local' || provider === 'qemu' ? 1 : 3),
      ),
      worker_default: group('worker', options.initialCounts?.worker_default ?? 1),
    },
    attestation: { [variantConfigKey(variant)]: attestationSection(variant) },
  };
}

function chooseVariant(provider: Provider, wanted: string | undefined): AttestationVariant {
  if (wanted === undefined) return defaultVariantOf(provider);
  if (!isAttestationVariant(wanted)) {
    throw new UserError(`Unknown attestation variant "${wanted}".`, {
      hint: `Variants: ${ATTESTATION_VARIANTS.join(', ')}.`,
    });
  }
  if (!PROVIDER_VARIANTS[provider].includes(wanted)) {
    throw new UserError(`Attestation variant ${wanted} does not run on provider ${provider}.`, {
      hint: `${provider} allows ${PROVIDER_VARIANTS[provider].join(', ')}.`,
    });
  }
  return wanted;
}

function chooseKubernetesVersion(wanted: string | undefined): Config['kubernetesVersion'] {
  if (wanted === undefined) return DEFAULT_KUBERNETES_VERSION;
  const version = resolveKubernetesVersion(wanted);
  if (!version) {
    throw new UserError(`Kubernetes version "${wanted}" is not supported.`, {
      hint: `Supported: ${SUPPORTED_KUBERNETES_VERSIONS.join(', ')} (see \`constellation config kubernetes-versions\`).`,
    });
  }
  return version;
}

function providerSection(provider: Provider): Record<string, unknown> {
  switch (provider) {
    case 'local':
      return { kubernetesBackend: 'none' };
    case 'qemu':
      return { ...QEMU_DEFAULTS };
    case 'aws':
      return { ...LOCATIONS.aws, iamProfileControlPlane: '', iamProfileWorkerNodes: '', deployCSIDriver: false };
    case 'azure':
      return {
        subscription: '',
        tenant: '',
        location: LOCATIONS.azure.location,
        resourceGroup: '',
        userAssignedIdentity: '',
        deployCSIDriver: false,
        secureBoot: false,
      };
    case 'gcp':
      return {
        project: '',
        ...LOCATIONS.gcp,
        serviceAccountKeyPath: '',
        IAMServiceAccountVM: '',
        deployCSIDriver: false,
      };
  }
}

function attestationSection(variant: AttestationVariant): Record<string, unknown> {
  const measurements = defaultMeasurements(variant);
  switch (variantSpec(variant).configFields) {
    case 'snp-tcb':
    case 'snp-tcb-firmware-signer':
      return { measurements, ...SNP_TCB };
    case 'tdx-tcb':
      return { measurements, ...TDX_DEFAULTS };
    case 'none':
      return { measurements };
  }
}
