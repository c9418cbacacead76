/**
 * `config migrate`: turns a config of upstream Constellation (Go, v2.x releases: layouts `version: v2`, `v3` and `v4`)
 * into ours (docs/workflows/migrate-from-upstream.md), carrying every value that means the same here and naming every
 * key it does not carry, with the reason. Upstream's own formats are the reference: `internal/config/config.go` (v4)
 * and `internal/config/migration/migration.go` (v3, and how upstream itself moved v3 to v4); v2 is the layout of
 * upstream's test files `internal/config/testdata/*V2.yaml` (measurements under the provider, one instance and disk
 * type for all nodes).
 *
 * Upstream's `qemu` provider (MiniConstellation: libvirt, upstream's metadata-server container) maps to ours
 * (`provider.qemu`: QEMU run directly, docs/workflows/mini.md#vm-nodes-mini-up---vm) where a key means the same:
 * `vcpus`, `memory` (MiB) → `memoryMiB`, `firmware` (a path; empty is upstream's auto selection, Debian's OVMF here)
 * and `nvram` (a template path) → `firmwareVars`. Its libvirt and container keys, `imageFormat`, and the `nvram`
 * sentinels `production`/`testing` (upstream's own secure-boot variable stores) have no counterpart and are named.
 *
 * What never carries, by design: upstream's `image` (a release of upstream's node images, which this CLI does not
 * run) and the measurements of those images (our nodes boot our own images, whose PCRs differ: carried, they would
 * refuse every node). `--image` and `--measurements` (the measurements.json that `constellation image build` writes)
 * fill them; without them the migrated config keeps the placeholders `config validate` names.
 *
 * The migration is pure: text in, config and report out. The command writes the file.
 */
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { Measurements } from '../attestation/types.js';
import { UserError } from '../errors.js';
import { writeFileAtomic } from '../workspace/atomic-file.js';
import { pathExists } from '../workspace/files.js';
import { readRegularFile, SIZE_LIMITS } from '../workspace/regular-file.js';
import { defaultConfig } from './defaults.js';
import { isConfigError, type ConfigIssue } from './errors.js';
import { parseConfig } from './parse.js';
import { DISK_TYPES, isAllowedInstanceType, MIN_STATE_DISK_GB } from './instance-types.js';
import { renderConfig, type RenderOptions } from './render.js';
import type { Config } from './schema.js';
import { measurementsSchema } from './schema.js';
import { resolveKubernetesVersion, SUPPORTED_KUBERNETES_VERSIONS } from './versions.js';
import {
  PROVIDER_VARIANTS,
  variantConfigKey,
  variantOfConfigKey,
  type AttestationVariant,
  type Provider,
} from './variants.js';

/** A key of the upstream file that the migrated config does not carry, and why. */
export interface DroppedKey {
  path: string;
  reason: string;
}

export interface MigrateOptions extends RenderOptions {
  /** The node image to put in `image` (ours: an AMI id, Azure image id or GCE image URL). */
  image?: string;
  /** Measurements of that image (the `measurements` of a measurements.json, or the map itself). */
  measurements?: unknown;
  /** `path=value` settings applied last, e.g. provider.gcp.IAMServiceAccountVM=nodes@p.iam.gserviceaccount.com. */
  set?: string[];
}

export interface MigrationResult {
  /** The upstream layout read: v2, v3 or v4. */
  fromVersion: 'v2' | 'v3' | 'v4';
  provider: Provider;
  variant: AttestationVariant;
  config: Config;
  /** The config as YAML, with comments, ready to write. */
  text: string;
  dropped: DroppedKey[];
  /** What was carried to a new place or filled with our default, for the report. */
  notes: string[];
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const UPSTREAM_IMAGE =
  "names a release of upstream's node images, which this CLI does not run: set `image` to your node image (--image, or edit the file)";
const UPSTREAM_MEASUREMENTS =
  "measurements of upstream's node images: our nodes boot our own images, whose PCRs differ (carried, they would refuse every node); give your image's with --measurements (measurements.json of `constellation image build`) or `constellation config fetch-measurements`";

/** Upstream v2 put measurements under the provider; which variant those nodes ran. */
function v2Variant(provider: Provider, section: Obj): AttestationVariant {
  if (provider === 'azure') return section.confidentialVM === false ? 'azure-trustedlaunch' : 'azure-sev-snp';
  if (provider === 'aws') return 'aws-nitro-tpm';
  if (provider === 'qemu') return 'qemu-vtpm';
  return 'gcp-sev-es';
}

/** Keys of upstream's QEMUConfig (internal/config/config.go) and, for those that never carry, why. */
const QEMU_KEYS: Record<string, string | undefined> = {
  vcpus: undefined,
  memory: undefined,
  firmware: undefined,
  nvram: undefined,
  imageFormat:
    'the qemu provider here boots the raw image of `constellation image build` through a copy-on-write overlay per node that it makes itself',
  metadataAPIServer:
    "a container image of upstream's metadata server; the CLI here runs its own metadata server, no container",
  libvirtSocket: 'this CLI runs QEMU directly, not through libvirt',
  libvirtContainerImage: 'this CLI runs QEMU directly, not through libvirt (no containerized libvirt daemon)',
};

const QEMU_GROUP_KEYS = {
  instanceType: 'qemu nodes have no instance types here: every node VM has provider.qemu.vcpus and memoryMiB',
  stateDiskType: "a qemu node's state disk here is always a sparse raw file",
  zone: 'qemu nodes run on this machine: there are no zones',
} as const;

const UPSTREAM_PROVIDERS: Record<string, Provider | undefined> = {
  aws: 'aws',
  azure: 'azure',
  gcp: 'gcp',
  openstack: undefined,
  qemu: 'qemu',
};

/** Reads an upstream config and returns ours, with what was dropped and why. Throws a UserError for what is not one. */
export function migrateUpstreamConfig(text: string, options: MigrateOptions = {}): MigrationResult {
  let doc: unknown;
  try {
    doc = parseYaml(text, { maxAliasCount: 100 });
  } catch (err) {
    throw new UserError(`The file is not valid YAML: ${(err as Error).message.split('\n')[0]}`, {
      hint: 'Give the constellation-conf.yaml of an upstream Constellation workspace.',
    });
  }
  if (!isObj(doc))
    throw new UserError('The file is not a Constellation config: its top level is not a mapping of keys.', {
      hint: 'Give the constellation-conf.yaml of an upstream Constellation workspace.',
    });
  const fromVersion = doc.version as MigrationResult['fromVersion'];
  if (fromVersion !== 'v2' && fromVersion !== 'v3' && fromVersion !== 'v4') {
    throw new UserError(
      `The config's version is ${JSON.stringify(fromVersion ?? null)}; config migrate reads upstream Constellation's v2, v3 and v4 layouts.`,
      {
        hint:
          fromVersion === undefined
            ? 'Is this a Constellation config? Its first key is `version`.'
            : 'A config of this CLI needs no migration: `constellation config validate` checks it.',
      },
    );
  }

  const dropped: DroppedKey[] = [];
  const notes: string[] = [];
  const drop = (path: string, reason: string) => dropped.push({ path, reason });
  /** Keys of `obj` not in `known` are dropped as unknown to upstream's layout. */
  const unknownKeys = (obj: Obj, prefix: string, known: string[]) => {
    for (const key of Object.keys(obj))
      if (!known.includes(key)) drop(`${prefix}${key}`, `not a key of upstream's ${fromVersion} layout`);
  };

  // Provider: exactly one we run.
  const providers = isObj(doc.provider) ? doc.provider : {};
  const providerKeys = Object.keys(providers).filter((k) => providers[k] !== null && providers[k] !== undefined);
  if (providerKeys.length !== 1) {
    throw new UserError(
      `The config sets ${providerKeys.length === 0 ? 'no provider' : `${providerKeys.length} providers (${providerKeys.join(', ')})`}; it needs exactly one.`,
      {
        hint: 'Keep one of provider.aws, provider.azure, provider.gcp, provider.qemu and run config migrate again.',
      },
    );
  }
  const upstreamProvider = providerKeys[0]!;
  const provider = UPSTREAM_PROVIDERS[upstreamProvider];
  if (!provider) {
    throw new UserError(
      `Upstream's provider ${upstreamProvider} has no counterpart here: this CLI runs aws, azure, gcp, qemu and local.`,
      {
        hint: 'For a cluster on this machine start afresh: `constellation config generate local` (or `constellation mini up`).',
      },
    );
  }
  const section = isObj(providers[upstreamProvider]) ? (providers[upstreamProvider] as Obj) : {};

  // Attestation variant: v2 from the provider section, v3/v4 from the attestation section.
  let variant: AttestationVariant;
  let attestation: Obj = {};
  if (fromVersion === 'v2') {
    variant = v2Variant(provider, section);
  } else {
    const sections = isObj(doc.attestation) ? doc.attestation : {};
    const keys = Object.keys(sections).filter((k) => sections[k] !== null && sections[k] !== undefined);
    const known = keys
      .map((k) => ({ key: k, variant: variantOfConfigKey(k) }))
      .filter((k) => k.variant && PROVIDER_VARIANTS[provider].includes(k.variant));
    for (const k of keys)
      if (!known.some((x) => x.key === k))
        drop(
          `attestation.${k}`,
          `attestation variant ${k} does not run on ${provider} here (variants: ${PROVIDER_VARIANTS[provider].join(', ')})`,
        );
    if (known.length !== 1) {
      throw new UserError(
        `The config has ${known.length === 0 ? 'no attestation variant' : `${known.length} attestation variants`} this CLI runs on ${provider}; it needs exactly one.`,
        {
          hint: `Keep one of ${PROVIDER_VARIANTS[provider].map(variantConfigKey).join(', ')} under attestation and run config migrate again.`,
        },
      );
    }
    variant = known[0]!.variant!;
    attestation = isObj(sections[known[0]!.key]) ? (sections[known[0]!.key] as Obj) : {};
  }
  const variantKey = variantConfigKey(variant);
  const config = defaultConfig(provider, { attestationVariant: variant }) as Config & {
    provider: Obj;
    attestation: Obj;
  };
  const ourProvider = config.provider[provider] as Obj;
  const ourAttestation = config.attestation[variantKey as keyof Config['attestation']] as unknown as Obj;

  // Top level.
  const topKnown = [
    'version',
    'image',
    'name',
    'kubernetesVersion',
    'microserviceVersion',
    'debugCluster',
    'provider',
    'attestation',
    'stateDiskSizeGB',
    'customEndpoint',
    'internalLoadBalancer',
    'serviceCIDR',
    'tags',
    'nodeGroups',
  ];
  unknownKeys(doc, '', topKnown);
  if (doc.image !== undefined) drop('image', UPSTREAM_IMAGE);
  if (doc.name !== undefined) {
    if (typeof doc.name === 'string' && /^[a-z][a-z0-9-]{0,19}$/.test(doc.name)) config.name = doc.name;
    else
      drop(
        'name',
        `${JSON.stringify(doc.name)} is not a name here (a lowercase letter, then at most 19 lowercase letters, digits and hyphens); kept ${config.name}`,
      );
  } else notes.push(`name: upstream's ${fromVersion} layout has none; set to ${config.name}`);
  if (doc.kubernetesVersion !== undefined) {
    const given = String(doc.kubernetesVersion);
    // Same minor version: our supported patch release of it (a patch upgrade, as kubeadm allows).
    const version =
      resolveKubernetesVersion(given) ?? resolveKubernetesVersion(given.replace(/^(v?\d+\.\d+)\.\d+$/, '$1'));
    if (version) {
      config.kubernetesVersion = version;
      if (version !== given && `v${given}` !== version)
        notes.push(`kubernetesVersion: ${given} → ${version}, the patch release of that minor version supported here`);
    } else
      drop(
        'kubernetesVersion',
        `Kubernetes ${String(doc.kubernetesVersion)} is not supported here (${SUPPORTED_KUBERNETES_VERSIONS.join(', ')}); set to ${config.kubernetesVersion}: upgrade the cluster one minor version at a time first`,
      );
  }
  if (doc.microserviceVersion !== undefined)
    drop('microserviceVersion', `the version of upstream's cluster services; ours are ${config.microserviceVersion}`);
  if (doc.debugCluster !== undefined) drop('debugCluster', 'there are no debug images here');
  if (doc.customEndpoint !== undefined)
    drop(
      'customEndpoint',
      'a custom API endpoint name is not supported here; the API server certificate names the load balancer',
    );
  if (doc.internalLoadBalancer !== undefined)
    drop(
      'internalLoadBalancer',
      'an internal load balancer is not supported here: the CLI reaches the cluster through a public one',
    );
  if (doc.serviceCIDR !== undefined) config.serviceCIDR = String(doc.serviceCIDR);
  if (doc.tags !== undefined) {
    if (isObj(doc.tags)) config.tags = Object.fromEntries(Object.entries(doc.tags).map(([k, v]) => [k, String(v)]));
    else drop('tags', 'not a mapping of tag keys to values');
  }

  // Provider fields that mean the same here.
  const providerFields: Record<Provider, string[]> = {
    local: [],
    qemu: [],
    aws: ['region', 'zone', 'iamProfileControlPlane', 'iamProfileWorkerNodes', 'deployCSIDriver'],
    azure: [
      'subscription',
      'tenant',
      'location',
      'resourceGroup',
      'userAssignedIdentity',
      'deployCSIDriver',
      'secureBoot',
    ],
    gcp: ['project', 'region', 'zone', 'serviceAccountKeyPath', 'IAMServiceAccountVM', 'deployCSIDriver'],
  };
  const at = `provider.${upstreamProvider}.`;
  for (const [key, value] of Object.entries(section)) {
    if (key === 'deployCSIDriver' && provider !== 'local' && provider !== 'qemu') {
      if (value === true)
        drop(
          `${at}${key}`,
          'no CSI driver is deployed here yet (encrypted persistent volumes are not built); set to false',
        );
      else if (value === false) ourProvider[key] = false;
    } else if (providerFields[provider].includes(key)) {
      if (value !== undefined && value !== null) ourProvider[key] = value;
    } else if (key === 'instanceType' || key === 'stateDiskType') {
      // v2/v3: one instance and disk type for every node; v4 and ours have them per node group (below).
    } else if (key === 'measurements' && fromVersion === 'v2') {
      drop(`${at}measurements`, UPSTREAM_MEASUREMENTS);
    } else if (key === 'useMarketplaceImage') {
      drop(`${at}${key}`, 'there are no marketplace images of this CLI');
    } else if (key === 'confidentialVM' && fromVersion === 'v2' && provider === 'azure') {
      notes.push(
        `${at}confidentialVM: ${value === false ? 'false: attestation variant azure-trustedlaunch' : 'true: attestation variant azure-sev-snp'}`,
      );
    } else if (
      (key === 'idKeyDigest' || key === 'enforceIdKeyDigest') &&
      fromVersion === 'v2' &&
      variant === 'azure-sev-snp'
    ) {
      // Carried into firmwareSignerConfig (below).
    } else if (provider === 'qemu' && key in QEMU_KEYS) {
      carryQemuField(key, value);
    } else {
      drop(`${at}${key}`, `no counterpart in this CLI's ${provider} section`);
    }
  }
  if (provider === 'gcp' && fromVersion !== 'v4')
    notes.push(
      "provider.gcp.IAMServiceAccountVM: upstream's v2 and v3 layouts have none; fill it (`constellation iam create gcp --update-config`, or --set)",
    );
  if (provider === 'azure' && 'zone' in section) drop(`${at}zone`, 'Azure nodes are placed by location here');
  if (provider === 'qemu')
    notes.push(
      `${at}accel: upstream's layout has none; set to ${String(ourProvider.accel)} (KVM where a probe boot works, else TCG)`,
    );

  /** One key of upstream's QEMUConfig: carried to provider.qemu where it means the same, else named with the reason. */
  function carryQemuField(key: string, value: unknown): void {
    const path = `${at}${key}`;
    const kept = (ours: string) => `kept ${ours} ${String(ourProvider[ours])}`;
    switch (key) {
      case 'vcpus':
        if (Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 64) ourProvider.vcpus = value;
        else drop(path, `${JSON.stringify(value)} is not a vCPU count of 1–64; ${kept('vcpus')}`);
        return;
      case 'memory':
        if (Number.isInteger(value) && (value as number) >= 512) {
          ourProvider.memoryMiB = value;
          notes.push(`${path}: carried to provider.qemu.memoryMiB (MiB, as upstream's)`);
        } else
          drop(
            path,
            `${JSON.stringify(value)} is below the 512 MiB a node VM needs here (its image runs from RAM); ${kept('memoryMiB')}`,
          );
        return;
      case 'firmware':
        if (value === '' || value === null)
          notes.push(`${path}: empty (upstream's auto selection): Debian's OVMF, ${String(ourProvider.firmware)}`);
        else if (typeof value === 'string' && value.startsWith('/')) ourProvider.firmware = value;
        else
          drop(path, `${JSON.stringify(value)} is not an absolute path of an OVMF firmware file; ${kept('firmware')}`);
        return;
      case 'nvram':
        if (value === 'production' || value === 'testing')
          drop(
            path,
            `${JSON.stringify(value)} names one of upstream's own UEFI variable stores (with its secure-boot keys), which do not exist here; ${kept('firmwareVars')}`,
          );
        else if (typeof value === 'string' && value.startsWith('/')) {
          ourProvider.firmwareVars = value;
          notes.push(
            `${path}: carried to provider.qemu.firmwareVars (the template every node's variable store is copied from)`,
          );
        } else
          drop(
            path,
            `${JSON.stringify(value)} is not an absolute path of a UEFI variable store template; ${kept('firmwareVars')}`,
          );
        return;
      default:
        drop(path, QEMU_KEYS[key]!);
    }
  }

  // Node groups: v4's carry; v2/v3's one instance and disk type (and top-level disk size) apply to both default groups.
  const groupDefaults = { ...config.nodeGroups.control_plane_default };
  const carryGroupField = (
    path: string,
    key: 'instanceType' | 'stateDiskType' | 'stateDiskSizeGB' | 'zone' | 'initialCount',
    value: unknown,
    group: Obj,
  ) => {
    if (value === undefined || value === null) return;
    if (provider === 'qemu' && (key === 'instanceType' || key === 'stateDiskType' || key === 'zone')) {
      // Upstream's qemu node groups leave these empty; a value would mean nothing to a VM on this machine.
      if (value !== '') drop(path, QEMU_GROUP_KEYS[key]);
      return;
    }
    const fits =
      key === 'instanceType'
        ? typeof value === 'string' && isAllowedInstanceType(variant, value)
        : key === 'stateDiskType'
          ? typeof value === 'string' && DISK_TYPES[provider].includes(value)
          : key === 'stateDiskSizeGB'
            ? Number.isInteger(value) && (value as number) >= MIN_STATE_DISK_GB[provider]
            : key === 'initialCount'
              ? Number.isInteger(value) && (value as number) >= 0
              : typeof value === 'string';
    if (fits) group[key] = value;
    else {
      const why =
        key === 'instanceType'
          ? `${JSON.stringify(value)} cannot run attestation variant ${variant} (not a confidential VM of that kind; see \`constellation config instance-types\`); kept ${String(group[key] ?? groupDefaults.instanceType)}`
          : key === 'stateDiskType'
            ? `${JSON.stringify(value)} is not a state-disk type here (${DISK_TYPES[provider].join(', ')}); kept ${String(group[key] ?? groupDefaults.stateDiskType)}`
            : key === 'stateDiskSizeGB'
              ? `${JSON.stringify(value)} is below the ${MIN_STATE_DISK_GB[provider]} GB a ${provider} node needs; kept ${String(group[key] ?? groupDefaults.stateDiskSizeGB)}`
              : `${JSON.stringify(value)} is not valid here`;
      drop(path, why);
    }
  };
  const groups = config.nodeGroups as Record<string, Obj>;
  if (fromVersion === 'v4' && isObj(doc.nodeGroups)) {
    for (const [name, raw] of Object.entries(doc.nodeGroups)) {
      if (!isObj(raw)) continue;
      const role = raw.role === 'control-plane' || raw.role === 'worker' ? raw.role : undefined;
      if (!role || !/^[a-z0-9_]{1,32}$/.test(name)) {
        drop(
          `nodeGroups.${name}`,
          role
            ? 'node group names are 1–32 lowercase letters, digits and underscores here'
            : 'role is neither control-plane nor worker',
        );
        continue;
      }
      const group: Obj = groups[name] ?? { ...groupDefaults, role, initialCount: role === 'worker' ? 1 : 3 };
      if (groups[name] && groups[name].role !== role) {
        drop(`nodeGroups.${name}.role`, `must be ${String(groups[name].role)} in node group ${name}`);
      }
      for (const key of ['zone', 'instanceType', 'stateDiskSizeGB', 'stateDiskType', 'initialCount'] as const)
        carryGroupField(`nodeGroups.${name}.${key}`, key, raw[key], group);
      unknownKeys(raw, `nodeGroups.${name}.`, [
        'role',
        'zone',
        'instanceType',
        'stateDiskSizeGB',
        'stateDiskType',
        'initialCount',
      ]);
      groups[name] = group;
    }
  } else {
    for (const group of [groups.control_plane_default, groups.worker_default]) {
      carryGroupField(`${at}instanceType`, 'instanceType', section.instanceType, group);
      carryGroupField(`${at}stateDiskType`, 'stateDiskType', section.stateDiskType, group);
      carryGroupField('stateDiskSizeGB', 'stateDiskSizeGB', doc.stateDiskSizeGB, group);
      if (typeof section.zone === 'string' && provider !== 'azure') group.zone = section.zone;
    }
    // Each field was tried on both groups with the same outcome: name a drop once.
    const seen = new Set<string>();
    for (let i = dropped.length - 1; i >= 0; i--) {
      const key = `${dropped[i]!.path}\0${dropped[i]!.reason}`;
      if (seen.has(key)) dropped.splice(i, 1);
      seen.add(key);
    }
    if (doc.stateDiskSizeGB !== undefined || section.instanceType !== undefined)
      notes.push(
        `${fromVersion} had one instance type and disk for every node: carried to both node groups (counts are ours: ${String(groups.control_plane_default!.initialCount)} control planes, ${String(groups.worker_default!.initialCount)} worker; change them in nodeGroups)`,
      );
  }

  // Attestation: measurements never carry; the TCB minimums and the firmware signer do where valid.
  if (fromVersion !== 'v2') {
    const at2 = `attestation.${variantKey}.`;
    for (const [key, value] of Object.entries(attestation)) {
      if (key === 'measurements') drop(`${at2}measurements`, UPSTREAM_MEASUREMENTS);
      else if (
        ['bootloaderVersion', 'teeVersion', 'snpVersion', 'microcodeVersion'].includes(key) &&
        key in ourAttestation
      ) {
        if (Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 255) ourAttestation[key] = value;
        else
          drop(
            `${at2}${key}`,
            `${JSON.stringify(value)}: upstream resolves "latest" from its own API; a minimum here is a number 0–255: kept ${String(ourAttestation[key])}, raise it to your fleet's`,
          );
      } else if (['qeSVN', 'pceSVN', 'teeTCBSVN', 'mrSeam'].includes(key) && key in ourAttestation) {
        const ok =
          key === 'qeSVN' || key === 'pceSVN'
            ? Number.isInteger(value)
            : typeof value === 'string' &&
              /^[0-9a-fA-F]+$/.test(value) &&
              value.length === String(ourAttestation[key]).length;
        if (ok) ourAttestation[key] = value;
        else
          drop(
            `${at2}${key}`,
            `${JSON.stringify(value)} is not a fixed value here ("latest" is resolved by upstream's API); kept ${String(ourAttestation[key])}`,
          );
      } else if (key === 'firmwareSignerConfig' && variant === 'azure-sev-snp' && isObj(value)) {
        carryFirmwareSigner(
          value.acceptedKeyDigests,
          value.enforcementPolicy,
          value.maaURL,
          `${at2}firmwareSignerConfig`,
        );
      } else if (key === 'amdRootKey' || key === 'amdSigningKey') {
        drop(`${at2}${key}`, "this CLI pins AMD's root keys itself and checks the chain to them");
      } else if (key === 'intelRootKey') {
        drop(`${at2}${key}`, "this CLI pins Intel's root key itself");
      } else {
        drop(`${at2}${key}`, `no counterpart in this CLI's ${variantKey} section`);
      }
    }
  } else if (variant === 'azure-sev-snp' && section.idKeyDigest !== undefined) {
    carryFirmwareSigner(
      section.idKeyDigest,
      section.enforceIdKeyDigest === true ? 'Equal' : 'WarnOnly',
      undefined,
      `${at}idKeyDigest`,
    );
    notes.push(
      `${at}idKeyDigest, enforceIdKeyDigest: carried to attestation.azureSEVSNP.firmwareSignerConfig (enforcementPolicy ${section.enforceIdKeyDigest === true ? 'Equal' : 'WarnOnly'}, as upstream's own migration did)`,
    );
  }

  function carryFirmwareSigner(digests: unknown, policy: unknown, maaURL: unknown, path: string): void {
    const list = (Array.isArray(digests) ? digests : [digests]).filter((d): d is string => typeof d === 'string');
    const valid = list.filter((d) => /^[0-9a-fA-F]{96}$/.test(d)).map((d) => d.toLowerCase());
    if (valid.length !== list.length)
      drop(path, `${list.length - valid.length} key digest(s) are not SHA-384 digests (96 hex characters)`);
    const policies = { equal: 'Equal', maafallback: 'MAAFallback', warnonly: 'WarnOnly' } as const;
    const enforcementPolicy =
      typeof policy === 'string' ? policies[policy.toLowerCase() as keyof typeof policies] : undefined;
    if (!enforcementPolicy) {
      drop(
        `${path}.enforcementPolicy`,
        `${JSON.stringify(policy)} is not Equal, MAAFallback or WarnOnly; the firmware signer is not checked`,
      );
      return;
    }
    ourAttestation.firmwareSignerConfig = {
      acceptedKeyDigests: valid,
      enforcementPolicy,
      ...(typeof maaURL === 'string' && maaURL !== '' ? { maaURL } : {}),
    };
  }

  // What the user gives that upstream's file cannot.
  if (options.image !== undefined) config.image = options.image;
  if (options.measurements !== undefined)
    ourAttestation.measurements = parseGivenMeasurements(options.measurements, variant);
  for (const setting of options.set ?? []) applySetting(config as unknown as Obj, setting);

  const result = { fromVersion, provider, variant, config, dropped, notes };
  return { ...result, text: renderConfig(config, options) };
}

/** The measurements given with --measurements: a measurements.json ({version, variant, measurements}) or the bare map. */
function parseGivenMeasurements(value: unknown, variant: AttestationVariant): Measurements {
  const file = isObj(value) && isObj(value.measurements) ? value : { measurements: value };
  if (file.variant !== undefined && file.variant !== variant) {
    throw new UserError(
      `The measurements given are for attestation variant ${String(file.variant)}; the migrated config's is ${variant}.`,
      {
        hint: 'Give the measurements.json of an image built for this provider (constellation image build --provider ...).',
      },
    );
  }
  const parsed = measurementsSchema.safeParse(file.measurements);
  if (!parsed.success) {
    throw new UserError(
      `The measurements given are not a map of PCR index to {expected, warnOnly}: ${parsed.error.issues[0]?.message ?? 'invalid'}.`,
      {
        hint: 'Give the measurements.json that `constellation image build` writes beside the image.',
      },
    );
  }
  return parsed.data;
}

/** Applies one `path=value` (value: true/false, an integer, else a string) to the config. */
function applySetting(config: Obj, setting: string): void {
  const eq = setting.indexOf('=');
  if (eq <= 0)
    throw new UserError(`--set ${setting}: expected key.path=value.`, {
      hint: 'For example --set provider.gcp.IAMServiceAccountVM=nodes@my-project.iam.gserviceaccount.com',
    });
  const keys = setting.slice(0, eq).split('.');
  const raw = setting.slice(eq + 1);
  const value: unknown = raw === 'true' ? true : raw === 'false' ? false : /^-?\d+$/.test(raw) ? Number(raw) : raw;
  let target: Obj = config;
  for (const key of keys.slice(0, -1)) {
    if (['__proto__', 'constructor', 'prototype'].includes(key))
      throw new UserError(`--set ${setting}: "${key}" is not a config key.`);
    if (!isObj(target[key])) target[key] = {};
    target = target[key] as Obj;
  }
  const last = keys[keys.length - 1]!;
  if (['__proto__', 'constructor', 'prototype'].includes(last))
    throw new UserError(`--set ${setting}: "${last}" is not a config key.`);
  target[last] = value;
}

export interface MigrateFileRequest extends MigrateOptions {
  /** The upstream config. */
  input: string;
  /** Where our config goes. */
  output: string;
  /** May an existing output be replaced? Asked by the caller (the command); false refuses. */
  replace: (file: string) => Promise<boolean>;
}

export interface MigratedFile extends Omit<MigrationResult, 'config' | 'text'> {
  output: string;
  /** Where the upstream file was kept when the output replaced it. */
  backup?: string;
  /** What `config validate` still says about the written file (empty: it is valid). */
  problems: ConfigIssue[];
}

/**
 * Migrates `input` into `output`. An existing output is replaced only when `replace` says so; when the output is the
 * input itself, the upstream file is kept beside it first (`<name>.upstream-<version>`, never overwritten).
 */
export async function migrateConfigFile(request: MigrateFileRequest): Promise<MigratedFile> {
  const input = path.resolve(request.input);
  const output = path.resolve(request.output);
  const text = (
    await readRegularFile(input, { what: 'the upstream config', maxBytes: SIZE_LIMITS.config }).catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT')
          throw new UserError(`There is no config at ${input}.`, {
            hint: 'Name the upstream constellation-conf.yaml to migrate: `constellation config migrate <file>`.',
          });
        throw err;
      },
    )
  ).toString('utf8');
  const result = migrateUpstreamConfig(text, request);
  const exists = await pathExists(output);
  if (exists && !(await request.replace(output))) {
    throw new UserError(`${output} exists; config migrate does not overwrite it.`, {
      hint: 'Write the migrated config elsewhere with --out <file>, or pass -y to replace it (an upstream file is kept beside it).',
    });
  }
  let backup: string | undefined;
  if (exists && output === input) {
    backup = `${input}.upstream-${result.fromVersion}`;
    await writeFileAtomic(backup, text, { exclusive: true, what: 'the copy of the upstream config' });
  }
  await writeFileAtomic(output, result.text, { what: 'the config' });
  let problems: ConfigIssue[] = [];
  try {
    parseConfig(result.text, path.basename(output));
  } catch (err) {
    if (!isConfigError(err)) throw err;
    problems = err.issues;
  }
  const { fromVersion, provider, variant, dropped, notes } = result;
  return { fromVersion, provider, variant, dropped, notes, output, backup, problems };
}
