/**
 * The config schema (constellation-conf.yaml, Constellation's v4 layout, docs/design.md#config) in zod: the one definition the
 * CLI validates with and the published JSON Schema is generated from (./json-schema.ts). Objects are strict so
 * that an unknown key is an error. Rules that span sections (instance type allowed for the attestation variant,
 * variant allowed for the provider, disk types and sizes per provider) are refinements on the root.
 */
import { z } from 'zod';
import type { UserError } from '../errors.js';
import { trustedKeyFromPem } from '../signing-keys.js';
import { isImageVersion, LOCAL_BUILD_IMAGE } from './image-version.js';
import { DISK_TYPES, isAllowedInstanceType, MIN_STATE_DISK_GB } from './instance-types.js';
import { MAX_PCR_INDEX } from './measurements.js';
import { CONFIG_VERSION, SUPPORTED_KUBERNETES_VERSIONS } from './versions.js';
import { VARIANTS, type VariantSpec } from '../attestation/variant.js';
import type { VariantConfigFields } from '../attestation/variant-table.js';
import {
  PROVIDERS,
  PROVIDER_VARIANTS,
  VARIANT_CONFIG_KEY_LIST,
  variantOfConfigKey,
  type Provider,
  type VariantConfigKey,
} from './variants.js';

export interface ConfigSchemaOptions {
  /**
   * Accept the fields `config generate` leaves empty for a cloud (the identities `iam create --update-config`
   * fills, and `image`). Only for commands that complete a config, such as `iam create`.
   */
  allowIncomplete?: boolean;
}

/** A schema-level message for a value that is there; a missing key falls through to the "is missing" message. */
function present(message: string | ((input: unknown) => string)) {
  return (iss: { input?: unknown }) =>
    iss.input === undefined ? undefined : typeof message === 'string' ? message : message(iss.input);
}

const hex = (lengths: number[], what: string) => {
  const alternatives = lengths.map((n) => `[0-9a-fA-F]{${n}}`).join('|');
  return z
    .string()
    .regex(new RegExp(`^(?:${alternatives})$`), {
      error: present(
        (input) => `${JSON.stringify(input)} is not ${what}: expected ${lengths.join(' or ')} hex characters`,
      ),
    })
    .toLowerCase();
};

const measurementSchema = z
  .strictObject({
    expected: hex([64, 96], 'a PCR value').describe('Expected PCR value: 64 (SHA-256) or 96 (SHA-384) hex characters.'),
    warnOnly: z.boolean().describe('true: a mismatch only warns; false: a mismatch rejects the node.'),
  })
  .describe('The expected value of one PCR.');

const pcrIndex = z.string().regex(/^(?:1?[0-9]|2[0-3])$/, {
  error: present(
    (input) => `PCR index ${JSON.stringify(input)} is out of range: PCR indexes are 0 to ${MAX_PCR_INDEX}`,
  ),
});

/** The measurements of an attestation variant; also the shape of a signed measurements file's `measurements`. */
export const measurementsSchema = z
  .record(pcrIndex, measurementSchema)
  .refine((m) => Object.keys(m).length > 0, {
    error:
      'no measurements: without any, nothing about a node would be checked. Regenerate the config or copy them from your image.',
  })
  .describe('Expected PCR values, by PCR index (0–23).');

const tcbPart = (what: string) =>
  z.number().int().min(0).max(255).describe(`Minimum ${what} security version of the launch TCB (0–255).`);

const snpTcb = {
  bootloaderVersion: tcbPart('bootloader'),
  teeVersion: tcbPart('TEE (PSP OS)'),
  snpVersion: tcbPart('SNP firmware'),
  microcodeVersion: tcbPart('CPU microcode'),
};

/** The fields each kind of variant section has besides `measurements` (the variant table names the kind). */
const variantFields = {
  none: {},
  'snp-tcb': snpTcb,
  'snp-tcb-firmware-signer': {
    ...snpTcb,
    firmwareSignerConfig: z
      .strictObject({
        acceptedKeyDigests: z
          .array(hex([96], 'a SHA-384 key digest'))
          .describe('Digests of the keys allowed to sign the paravisor firmware.'),
        enforcementPolicy: z
          .enum(['Equal', 'MAAFallback', 'WarnOnly'])
          .describe('What happens when the firmware signer is not accepted.'),
        maaURL: z.string().optional().describe('Microsoft Azure Attestation URL, for MAAFallback.'),
      })
      .optional()
      .describe('Which keys may sign the Azure paravisor firmware (optional).'),
  },
  'tdx-tcb': {
    qeSVN: z.number().int().min(0).max(65535).describe('Minimum security version of the quoting enclave.'),
    pceSVN: z
      .number()
      .int()
      .min(0)
      .max(65535)
      .describe('Minimum security version of the provisioning certification enclave.'),
    teeTCBSVN: hex([32], 'a TEE TCB SVN').describe('Minimum TEE TCB security versions: 16 bytes, hex.'),
    mrSeam: hex([96], 'an MRSEAM').describe('Expected measurement of the TDX module: 48 bytes, hex.'),
  },
} satisfies Record<VariantConfigFields, z.ZodRawShape>;

function variantSection(variant: VariantSpec) {
  return z
    .strictObject({ measurements: measurementsSchema, ...variantFields[variant.configFields] })
    .describe(variant.summary);
}

/** One section per row of the variant table, under its config key. */
const variantSchemas = Object.fromEntries(VARIANTS.map((v) => [v.configKey, variantSection(v)])) as Record<
  VariantConfigKey,
  ReturnType<typeof variantSection>
>;

function iamField(provider: Provider, allowIncomplete: boolean, description: string) {
  const field = allowIncomplete
    ? z.string()
    : z.string().min(1, {
        error: present(
          `is empty: run \`constellation iam create ${provider} --update-config\` to fill it, or set it yourself`,
        ),
      });
  return field.describe(`${description} Filled by \`constellation iam create ${provider} --update-config\`.`);
}

const userField = (what: string, description: string) =>
  z
    .string()
    .min(1, { error: present(`is empty: set the ${what}`) })
    .describe(description);

/**
 * Upstream deploys each cloud's CSI driver with encrypted volumes (its own forks that dm-crypt every volume). Nothing
 * here deploys one yet, so `true` is refused instead of silently giving a cluster without persistent volumes.
 */
const deployCSIDriver = z
  .boolean()
  .refine((v) => v === false, {
    error:
      'is true, but this CLI deploys no CSI driver yet (encrypted persistent volumes are not built): set it to false',
  })
  .describe(
    "Deploy the cloud's CSI driver for persistent volumes. Must be false: no CSI driver is deployed yet (encrypted volumes are not built).",
  );

function providerSchemas(allowIncomplete: boolean) {
  return {
    local: z
      .strictObject({
        kubernetesBackend: z
          .enum(['none', 'kubeadm'])
          .default('none')
          .describe(
            'none: nodes run everything except Kubernetes; kubeadm: nodes run kubeadm (needs the Kubernetes binaries).',
          ),
      })
      .describe('Nodes are processes on this machine with software TPMs.'),
    qemu: z
      .strictObject({
        vcpus: z.number().int().min(1).max(64).describe('Virtual CPUs of each node VM.'),
        memoryMiB: z.number().int().min(512).describe('Memory of each node VM in MiB (the node image runs from RAM).'),
        firmware: z
          .string()
          .min(1)
          .describe("The UEFI firmware's code (OVMF), e.g. Debian's /usr/share/OVMF/OVMF_CODE.fd."),
        firmwareVars: z
          .string()
          .min(1)
          .describe("The firmware's variable store template; every node gets its own copy."),
        accel: z
          .enum(['auto', 'kvm', 'tcg'])
          .describe(
            'auto: KVM where a probe boot of the image works, else TCG (software emulation); kvm or tcg: that one.',
          ),
      })
      .describe(
        'Nodes are QEMU VMs on this machine that boot the node image under UEFI firmware, with swtpm as their TPM.',
      ),
    aws: z
      .strictObject({
        region: userField('AWS region', 'AWS region, e.g. us-east-2.'),
        zone: userField('AWS availability zone', 'AWS availability zone of the nodes, e.g. us-east-2a.'),
        iamProfileControlPlane: iamField('aws', allowIncomplete, 'IAM instance profile of the control-plane nodes.'),
        iamProfileWorkerNodes: iamField('aws', allowIncomplete, 'IAM instance profile of the worker nodes.'),
        deployCSIDriver,
      })
      .describe('Amazon Web Services.'),
    azure: z
      .strictObject({
        subscription: iamField('azure', allowIncomplete, 'Azure subscription ID.'),
        tenant: iamField('azure', allowIncomplete, 'Azure tenant (directory) ID.'),
        location: userField('Azure location', 'Azure location (region), e.g. westus.'),
        resourceGroup: iamField('azure', allowIncomplete, 'Resource group the cluster is created in.'),
        userAssignedIdentity: iamField(
          'azure',
          allowIncomplete,
          'Resource ID of the user-assigned identity of the nodes.',
        ),
        deployCSIDriver,
        secureBoot: z.boolean().describe('Enable UEFI secure boot on the nodes.'),
      })
      .describe('Microsoft Azure.'),
    gcp: z
      .strictObject({
        project: iamField('gcp', allowIncomplete, 'GCP project ID.'),
        region: userField('GCP region', 'GCP region, e.g. europe-west3.'),
        zone: userField('GCP zone', 'GCP zone of the nodes, e.g. europe-west3-a.'),
        serviceAccountKeyPath: iamField(
          'gcp',
          allowIncomplete,
          'Path of the service-account key file the CLI uses, relative to the workspace.',
        ),
        IAMServiceAccountVM: iamField('gcp', allowIncomplete, 'E-mail of the service account the nodes run as.'),
        deployCSIDriver,
      })
      .describe('Google Cloud Platform.'),
  };
}

const nodeGroupSchema = z
  .strictObject({
    role: z.enum(['control-plane', 'worker']).describe('control-plane or worker.'),
    zone: z.string().describe('Zone of the nodes (empty where the provider has no zones).'),
    instanceType: z.string().min(1).describe('Instance type; see `constellation config instance-types`.'),
    stateDiskSizeGB: z.number().int().positive().describe("Size of each node's encrypted state disk in GB."),
    stateDiskType: z.string().min(1).describe('Disk type of the state disk (file for local, gp3 for AWS, ...).'),
    initialCount: z.number().int().min(0).describe('Number of nodes created by `constellation create`.'),
  })
  .describe('A group of nodes with the same role and instance type.');

/** Refuses an object section with no key or more than one key ("exactly one provider"). */
function exactlyOne(section: string, choices: readonly string[]) {
  return (value: Record<string, unknown>, ctx: z.RefinementCtx) => {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined);
    if (keys.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: [],
        message: `no ${section} is set: set exactly one of ${choices.join(', ')}`,
      });
    } else if (keys.length > 1) {
      ctx.addIssue({
        code: 'custom',
        path: [keys[1]!],
        message: `more than one ${section} is set (${keys.join(', ')}): keep exactly one`,
      });
    }
  };
}

const NODE_GROUP_NAME = /^[a-z0-9_]{1,32}$/;

/** measurementsSigningKey must be a P-256 public key in PEM. */
function validSigningKey(pem: string, ctx: z.RefinementCtx): void {
  try {
    trustedKeyFromPem(pem, 'the key');
  } catch (err) {
    ctx.addIssue({
      code: 'custom',
      message: `is not usable: ${(err as Error).message} ${(err as UserError).hint ?? ''}`.trim(),
    });
  }
}

/**
 * An enforced PCR that every boot extends (firmware 0–7, the kernel command line and initrd 9, the unified kernel
 * image 11) can never read all zeros: an all-zero expected value there is a placeholder (what `config generate`
 * writes for clouds), not a measurement, and would refuse every node. 8, 12, 13 are zero on our images by design.
 */
export const PCRS_EXTENDED_AT_BOOT: readonly number[] = [0, 1, 2, 3, 4, 5, 6, 7, 9, 11];
export const ZERO_MEASUREMENT_HINT =
  'fill in the measurements of your node image: `constellation image build` writes them (measurements.json beside the image), `constellation config fetch-measurements` fetches the signed ones of a published image';

function refuseZeroMeasurements(config: ConfigShape, ctx: z.RefinementCtx): void {
  const sections = Object.entries(config.attestation).filter(([, section]) => section !== undefined);
  if (sections.length !== 1) return; // "exactly one variant" is the problem to name first
  for (const [key, section] of sections) {
    if (!section) continue;
    for (const [index, m] of Object.entries(section.measurements)) {
      if (m.warnOnly || !PCRS_EXTENDED_AT_BOOT.includes(Number(index)) || !/^0+$/.test(m.expected)) continue;
      ctx.addIssue({
        code: 'custom',
        path: ['attestation', key, 'measurements', index, 'expected'],
        message: `PCR ${index} is enforced but expected all zeros, a value no boot produces (a placeholder): ${ZERO_MEASUREMENT_HINT}`,
      });
    }
  }
}

/** Cross-section rules; run only when every section parsed on its own. */
function crossCheck(config: ConfigShape, ctx: z.RefinementCtx): void {
  const provider = PROVIDERS.find((p) => config.provider[p] !== undefined);
  const variantKey = VARIANT_CONFIG_KEY_LIST.find((k) => config.attestation[k] !== undefined);
  if (!provider || !variantKey) return;
  const variant = variantOfConfigKey(variantKey)!;
  if (!PROVIDER_VARIANTS[provider].includes(variant)) {
    ctx.addIssue({
      code: 'custom',
      path: ['attestation', variantKey],
      message: `attestation variant ${variant} does not run on provider ${provider}; ${provider} allows ${PROVIDER_VARIANTS[provider].join(', ')}`,
    });
    return;
  }
  if (provider === 'qemu' && config.image === LOCAL_BUILD_IMAGE) {
    ctx.addIssue({
      code: 'custom',
      path: ['image'],
      message:
        'a qemu image is the folder of a built image (`constellation image build --provider qemu --out <dir>`) or a version in your image store; `mini up --vm` builds one',
    });
  }
  if (provider === 'local' && config.image !== LOCAL_BUILD_IMAGE && !isImageVersion(config.image)) {
    ctx.addIssue({
      code: 'custom',
      path: ['image'],
      message: `a local image is \`${LOCAL_BUILD_IMAGE}\` (the current build) or a version made by \`constellation mini image create\` (letters, digits, '.', '_', '-')`,
    });
  }
  let controlPlaneGroups = 0;
  for (const [name, group] of Object.entries(config.nodeGroups)) {
    const at = (key: string) => ['nodeGroups', name, key];
    if (!NODE_GROUP_NAME.test(name)) {
      ctx.addIssue({
        code: 'custom',
        path: ['nodeGroups', name],
        message: 'node group names are 1–32 lowercase letters, digits and underscores',
      });
    }
    const expectedRole =
      name === 'control_plane_default' ? 'control-plane' : name === 'worker_default' ? 'worker' : undefined;
    if (expectedRole && group.role !== expectedRole) {
      ctx.addIssue({ code: 'custom', path: at('role'), message: `must be ${expectedRole} in node group ${name}` });
    }
    if (group.role === 'control-plane') {
      controlPlaneGroups++;
      if (group.initialCount < 1) {
        ctx.addIssue({
          code: 'custom',
          path: at('initialCount'),
          message: 'a control-plane node group needs at least 1 node',
        });
      }
    }
    if (!isAllowedInstanceType(variant, group.instanceType)) {
      ctx.addIssue({
        code: 'custom',
        path: at('instanceType'),
        message: `instance type ${JSON.stringify(group.instanceType)} cannot run attestation variant ${variant}${
          provider === 'local' || provider === 'qemu' ? '' : ' (not a confidential VM of that kind)'
        }; see \`constellation config instance-types\` for the allowed types`,
      });
    }
    if (!DISK_TYPES[provider].includes(group.stateDiskType)) {
      ctx.addIssue({
        code: 'custom',
        path: at('stateDiskType'),
        message: `disk type ${JSON.stringify(group.stateDiskType)} is not available on ${provider}; use one of ${DISK_TYPES[provider].join(', ')}`,
      });
    }
    if (group.stateDiskSizeGB < MIN_STATE_DISK_GB[provider]) {
      ctx.addIssue({
        code: 'custom',
        path: at('stateDiskSizeGB'),
        message: `must be at least ${MIN_STATE_DISK_GB[provider]} on ${provider}`,
      });
    }
  }
  if (controlPlaneGroups === 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['nodeGroups'],
      message: 'no node group has role control-plane: a cluster needs one',
    });
  }
}

function sectionsSchema(options: ConfigSchemaOptions) {
  const allowIncomplete = options.allowIncomplete ?? false;
  const providers = providerSchemas(allowIncomplete);
  const image = z.string();
  return z.strictObject({
    version: z
      .literal(CONFIG_VERSION, {
        error: present(
          (input) => `config version ${JSON.stringify(input)} is not supported: this CLI reads ${CONFIG_VERSION}`,
        ),
      })
      .describe(`Layout version of this file: ${CONFIG_VERSION}.`),
    name: z
      .string()
      .regex(/^[a-z][a-z0-9-]{0,19}$/, {
        error: present('must start with a lowercase letter and have at most 20 lowercase letters, digits and hyphens'),
      })
      .describe('Name of the cluster; part of every resource name.'),
    kubernetesVersion: z
      .enum(SUPPORTED_KUBERNETES_VERSIONS, {
        error: present(
          (input) =>
            `Kubernetes version ${JSON.stringify(input)} is not supported; supported: ${SUPPORTED_KUBERNETES_VERSIONS.join(', ')}`,
        ),
      })
      .describe('Kubernetes version of the cluster; see `constellation config kubernetes-versions`.'),
    image: (allowIncomplete
      ? image
      : image.min(1, { error: present('is empty: set the node image (AMI id, Azure image id or GCE image URL)') })
    ).describe(
      'Node image: for the local provider `local` (the current build) or a version made by `constellation mini image create`; for qemu the folder of a built qemu image or a version in your image store; else an AMI id, Azure image id or GCE image URL.',
    ),
    measurementsSigningKey: z
      .string()
      .superRefine(validSigningKey)
      .optional()
      .describe(
        "PEM public key (ECDSA P-256, as cosign.pub) that signed measurements must verify with, for images you sign yourself. Unset: this CLI's release key (clouds), or your local image key (the local provider's versioned images).",
      ),
    microserviceVersion: z
      .string()
      .regex(/^v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/, { error: present('must be a version like v1.2.3') })
      .describe('Version of the cluster services (join service, verify service).'),
    serviceCIDR: z
      .cidrv4({ error: present('must be an IPv4 CIDR like 10.96.0.0/12') })
      .describe('IP range of Kubernetes services.'),
    tags: z
      .record(
        z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,62}$/, {
          error: present('tag keys are 1–63 letters, digits and _.:/-'),
        }),
        z.string().max(256),
      )
      .default({})
      .describe('Tags (AWS), tags (Azure) or labels (GCP) added to every cloud resource.'),
    provider: z
      .strictObject(providers)
      .partial()
      .superRefine(exactlyOne('provider', PROVIDERS))
      .meta({ minProperties: 1, maxProperties: 1 })
      .describe('Where the cluster runs: exactly one of local, aws, azure, gcp.'),
    nodeGroups: z
      .object({ control_plane_default: nodeGroupSchema, worker_default: nodeGroupSchema })
      .catchall(nodeGroupSchema)
      .describe('Node groups by name; control_plane_default and worker_default are required.'),
    attestation: z
      .strictObject(variantSchemas)
      .partial()
      .superRefine(exactlyOne('attestation variant', VARIANT_CONFIG_KEY_LIST))
      .meta({ minProperties: 1, maxProperties: 1 })
      .describe('How nodes prove what they run: exactly one attestation variant with its measurements.'),
  });
}
type ConfigShape = z.output<ReturnType<typeof sectionsSchema>>;

export function buildConfigSchema(options: ConfigSchemaOptions = {}) {
  return sectionsSchema(options)
    .superRefine(crossCheck)
    .superRefine((config, ctx) => {
      if (!options.allowIncomplete) refuseZeroMeasurements(config, ctx);
    })
    .describe('Constellation cluster configuration (constellation-conf.yaml).');
}

/** The schema every command validates with. */
export const configSchema = buildConfigSchema();
/** A parsed, valid config. */
export type Config = z.output<typeof configSchema>;
export type NodeGroup = z.output<typeof nodeGroupSchema>;
export type ProviderSections = Config['provider'];
export type AttestationSections = Config['attestation'];
