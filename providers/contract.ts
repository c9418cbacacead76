/**
 * The provider contract (docs/design.md#providers): what every provider (local, aws, azure, gcp, or a third-party package)
 * implements. The CLI side creates and manages infrastructure; the node side answers metadata questions.
 * Providers are loaded lazily by name (see ./registry.ts) so the CLI never loads a cloud SDK it does not use.
 */

import type { TeeReportOptions } from '../lib/attestation/tee/index.js';
import type { Issuer, Measurements, ValidatorDeps } from '../lib/attestation/types.js';
import type { TpmClient } from '../lib/tpm/client.js';
import type { ResourceJournal } from '../lib/workspace/resource-journal.js';

export type { RecordedResource, ResourceJournal } from '../lib/workspace/resource-journal.js';

export type ProviderName = 'local' | 'aws' | 'azure' | 'gcp' | (string & {});
export type NodeRole = 'control-plane' | 'worker';

/** One node group of the config (nodeGroups.<name>), as the provider needs it. */
export interface NodeGroupSpec {
  name: string;
  role: NodeRole;
  zone: string;
  instanceType: string;
  stateDiskSizeGB: number;
  stateDiskType: string;
  initialCount: number;
}

/** Everything `create` hands a provider. providerConfig is the config's `provider.<name>` section. */
export interface CreateRequest {
  /** Short random id of the cluster; every cloud resource carries it as tag/label constellation-uid. */
  uid: string;
  name: string;
  image: string;
  kubernetesVersion: string;
  attestationVariant: string;
  nodeGroups: NodeGroupSpec[];
  /** bcrypt hash of the init secret; nodes read it from instance metadata. The secret itself never goes here. */
  initSecretHash: string;
  /** The join-service identity key derived from the init secret (public, base64); nodes read it from instance metadata. */
  joinServiceKey: string;
  tags: Record<string, string>;
  providerConfig: Record<string, unknown>;
  /**
   * create may return once the control-plane nodes are up, while the workers still start (CreateResult.workersStarting),
   * so that the caller initializes the cluster meanwhile (mini up). Ignored by providers whose create does not wait for
   * nodes to boot (the clouds').
   */
  returnWhenControlPlanesUp?: boolean;
}

/** What `create` returns; the CLI writes it to constellation-state.yaml `infrastructure`. */
export interface CreateResult {
  clusterEndpoint: string;
  inClusterEndpoint: string;
  apiServerCertSANs: string[];
  /** Provider-specific ids kept under infrastructure.<provider> in the state file. */
  providerState: Record<string, unknown>;
  /** The nodes' network (infrastructure.ipCidrNode): the network plugin's encryption covers it. */
  ipCidrNode?: string;
  /**
   * Given when create returned before every worker was up (CreateRequest.returnWhenControlPlanesUp): resolves when
   * they are, or rejects with the first worker's failure once every one has settled. Never an unhandled rejection.
   */
  workersStarting?: Promise<void>;
}

export type InstanceState = 'pending' | 'running' | 'stopped' | 'terminated' | 'unknown';

export interface Instance {
  /** Provider id of the instance (EC2 instance id, Azure VM resource id, GCE self link, local node name). */
  id: string;
  name: string;
  role: NodeRole;
  nodeGroup: string;
  privateIp: string;
  publicIp?: string;
  state: InstanceState;
  /** The image the provider booted the instance from, where it reports one (the local provider's image version). */
  image?: string;
  /** When the provider made the instance (ISO 8601), where it reports it. */
  createdAt?: string;
}

export interface ProviderLogger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
}

/** Collaborators every infrastructure call gets. */
export interface ProviderContext {
  journal: ResourceJournal;
  log: ProviderLogger;
  /** Short, human progress lines for spinners ("creating load balancer"). */
  progress?: (message: string) => void;
  signal?: AbortSignal;
  /** The workspace directory (the local provider keeps node folders below it). */
  workspaceDir: string;
  /**
   * Called at most once by `create`, when every control-plane machine it starts runs and it only waits for them to
   * boot: a caller that goes on to init can load what init needs meanwhile (mini up does). A provider may not call
   * it at all (cloud providers do not; a resumed create whose control planes already run does not).
   */
  whileControlPlanesBoot?: () => void;
}

export interface TerminateOptions {
  /** Also delete anything carrying this cluster's constellation-uid tag that the journal does not know. */
  byTag?: boolean;
}

/**
 * CLI side. Every method is idempotent and safe to call again after an interruption. Required members are what
 * `create`, `status`, `apply` and `terminate` need of every provider; optional ones are capabilities a caller checks
 * for and refuses clearly without (`upgrade apply` and scale-in need addInstance and removeInstance).
 */
export interface InfrastructureProvider {
  readonly name: ProviderName;
  /**
   * Refuses (a UserError naming every unmet one) what this machine lacks for create, before the workspace is
   * written to: `create` calls it first (the local provider: root, its programs, /dev/fuse, the node program).
   */
  checkPreconditions?(): Promise<void>;
  create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult>;
  listInstances(ctx: ProviderContext): Promise<Instance[]>;
  /**
   * Grows a node group to `count` instances (`apply` scaling out: the new instances join by attestation). `apply`
   * never shrinks a group with it: a scale-in removes the instances it chose with removeInstance, because a cloud
   * lowering a group's size picks its own victims (by zone balance, launch template, age), not ours.
   */
  scaleNodeGroup(nodeGroup: string, count: number, ctx: ProviderContext): Promise<void>;
  /**
   * One more instance in the group, in service, from the provider's current image (an upgrade's replacement, whose
   * old instance goes only after the new one joined and verified). Returns the new instance.
   */
  addInstance?(nodeGroup: string, ctx: ProviderContext): Promise<Instance>;
  /**
   * Deletes exactly this instance (Instance.id) and lowers its group's size by one, so the cloud starts no
   * replacement and picks no other victim. Idempotent: an instance already gone is no error.
   */
  removeInstance?(id: string, ctx: ProviderContext): Promise<void>;
  /**
   * Takes an instance (Instance.id) out of the load balancer and lets the connections it serves end, as a cloud load
   * balancer drains a target; the instance keeps running until removeInstance. A control plane is drained before its
   * cluster store member leaves, so no call reaches a join service whose store no longer answers.
   */
  drainInstance?(id: string, ctx: ProviderContext): Promise<void>;
  /**
   * Records that the cluster is initialized: its nodes' metadata stops carrying the init-secret hash, so that no node
   * added later serves Init. Providers without it leave the hash in place (docs/join-service.md says what holds then).
   */
  markInitialized?(ctx: ProviderContext): Promise<void>;
  /**
   * The measurements of a node booted from the image this provider boots, measured by the CLI itself (the local
   * provider's current build); `create` writes them to the config, and they are the only trusted set for that image.
   */
  expectedMeasurements?(workspaceDir?: string): Promise<Measurements>;
  /** Power control, as a hypervisor has it (`mini reboot|stop|start`): nodes by Instance.name. */
  rebootNodes?(names: string[], ctx: ProviderContext): Promise<void>;
  stopNodes?(names: string[], ctx: ProviderContext): Promise<void>;
  startNodes?(names: string[], ctx: ProviderContext): Promise<void>;
  /** The names of the cluster's nodes (of one role), for power control. */
  nodeNames?(ctx: ProviderContext, role?: NodeRole): Promise<string[]>;
  /** Deletes what the journal recorded, in reverse dependency order; tolerates resources already gone. */
  terminate(ctx: ProviderContext, options?: TerminateOptions): Promise<void>;
}

/** A provider with power control (the local provider's process nodes). */
export type NodePowerControl = Required<
  Pick<InfrastructureProvider, 'rebootNodes' | 'stopNodes' | 'startNodes' | 'nodeNames'>
>;

export function hasPowerControl(
  provider: InfrastructureProvider,
): provider is InfrastructureProvider & NodePowerControl {
  return Boolean(provider.rebootNodes && provider.stopNodes && provider.startNodes && provider.nodeNames);
}

export interface InstanceMetadata {
  name: string;
  providerId: string;
  role: NodeRole;
  vpcIp: string;
}

/** Node side: what a bootstrapper asks its provider. */
export interface NodeMetadata {
  self(): Promise<InstanceMetadata>;
  peers(): Promise<InstanceMetadata[]>;
  /** host:port-less address of the control-plane load balancer. */
  loadBalancerEndpoint(): Promise<string>;
  /** bcrypt hash of the init secret; empty once the cluster is initialized (where the provider records that). */
  initSecretHash(): Promise<string>;
  /**
   * The cluster's join-service identity key (raw Ed25519 public key, base64; lib/kms/join-service-key.ts): a node
   * uses a ticket only when it is signed with it. Empty when the provider holds none.
   */
  joinServiceKey(): Promise<string>;
}

/**
 * How the node program learned where it runs (bootstrapper/boot-config.ts): the provider and variant from the
 * kernel command line or the image's boot config file, plus any path or endpoint the image (or a test) overrides.
 */
export interface NodePlatformOptions {
  variant: string;
  /** Device and file paths; each platform has its cloud's defaults. */
  paths?: {
    /** The TPM: a character device (/dev/tpmrm0) or swtpm's socket. */
    tpm?: string;
    /** The block device of the state disk. */
    stateDisk?: string;
    /** Where the unlocked state disk is mounted (default /var/run/state). */
    stateDir?: string;
    /** The node's own folder for what is not secret (the AMD certificate cache). */
    nodeDir?: string;
    /** configfs-tsm's report folder and the sev-guest device (SEV-SNP, TDX). */
    tsmRoot?: string;
    sevGuest?: string;
  };
  /** The TEE interfaces (configfs-tsm, sev-guest) when not the kernel's: tests emulate them. Paths above still apply. */
  tee?: TeeReportOptions;
  /** Options of the provider's node side (metadata endpoints; SDK endpoints and credentials in tests). */
  providerOptions?: Record<string, unknown>;
  /** The node image's version (the boot config's imageVersion). */
  imageVersion?: string;
  /** The environment (the local provider's launcher passes the node's identity this way). Default process.env. */
  env?: NodeJS.ProcessEnv;
}

/** Where the node's state disk is and what kind it is; the bootstrapper opens it (bootstrapper/state-disk.ts). */
export type StateDiskSpec =
  { kind: 'gocryptfs'; diskDir: string; mountPoint: string } | { kind: 'luks'; device: string; mountPoint: string };

/**
 * Everything provider-specific the node program needs on one platform (bootstrapper/main.ts wires the rest the
 * same way everywhere). Made by ProviderModule.nodePlatform once the node knows its provider.
 */
export interface NodePlatform {
  readonly provider: string;
  readonly variant: string;
  readonly metadata: NodeMetadata;
  /** The node's name, address and role; asking the cloud's metadata service also confirms the node runs there. */
  identity(): Promise<{ name: string; ip: string; role: NodeRole }>;
  /** The TPM to open (device or socket). */
  readonly tpmPath: string;
  /** The variant's issuer on this node's TPM (selects the platform's AK on the connection). */
  issuer(tpm: TpmClient): Promise<Issuer>;
  readonly stateDisk: StateDiskSpec;
  readonly nodeDir: string;
  readonly kubernetesBackend: 'none' | 'kubeadm';
  /** The node image's version, reported by `constellation status`. */
  readonly imageVersion: string;
  /** What the variant's validator needs when this node hosts a join service. */
  validatorDeps(): Promise<Partial<ValidatorDeps>>;
  /**
   * Cloud nodes: what the cloud controller manager's configuration needs (bootstrapper/kubernetes/cloud-controller.ts),
   * from the node's metadata. Absent where no cloud controller runs (local, qemu).
   */
  cloudController?(): Promise<CloudControllerValues>;
}

/** The cloud's values in the cloud controller manager's configuration (docs/kubernetes-backends.md). */
export type CloudControllerValues =
  | { cloud: 'aws' }
  | {
      cloud: 'gcp';
      projectId: string;
      /** The network tag the provider gives every node (firewall rules name it). */ nodeTag: string;
    }
  | {
      cloud: 'azure';
      subscriptionId: string;
      resourceGroup: string;
      location: string;
      /** The cluster's network security group. */ securityGroupName: string;
    };

/**
 * Options as they cross the registry: the config's `provider.<name>` section plus what the CLI adds (image, uid).
 * Each provider declares its own type for them (AwsProviderOptions, GcpProviderOptions, AzureProviderOptions,
 * LocalInfrastructureOptions) on its module's members and parses them there.
 */
export type ProviderOptions = Record<string, unknown>;

/**
 * What a provider package exports (default export or named `provider`). A provider module declares its members
 * with its own options type, e.g. `infrastructure(options?: AwsProviderOptions)`, and `satisfies ProviderModule`.
 */
export interface ProviderModule {
  readonly name: ProviderName;
  /** Attestation variants this provider's nodes can produce; the first is the default. */
  readonly attestationVariants: readonly string[];
  infrastructure(options?: ProviderOptions): Promise<InfrastructureProvider> | InfrastructureProvider;
  /**
   * Collaborators the provider's attestation variants need on the verifier side (join service, CLI):
   * local → the AK registry of its metadata server; gcp → the shielded-instance identity client; ...
   */
  attestationDeps?(options?: ProviderOptions): Promise<Partial<ValidatorDeps>> | Partial<ValidatorDeps>;
  /** Node side: the platform the node program runs on (see NodePlatform; its metadata answers the node's questions). */
  nodePlatform?(options: NodePlatformOptions): Promise<NodePlatform>;
  /** Cloud providers only. */
  iam?(options?: ProviderOptions): Promise<IamProvisioner> | IamProvisioner;
}

/** `iam create <provider>`: the identities nodes need. */
export interface IamCreateRequest {
  /** Name prefix of every identity made. */
  prefix: string;
  /** The provider section of the config as far as known (region, zone, project, subscription, ...). */
  providerConfig: Record<string, unknown>;
}

export interface IamCreateResult {
  /** Keys to set under `provider.<name>` in the config when the user passes --update-config. */
  configUpdates: Record<string, unknown>;
  /** Files to write into the workspace (e.g. a GCP service-account key), written 0600, never overwriting. */
  files?: { name: string; content: string }[];
}

export interface IamProvisioner {
  create(request: IamCreateRequest, ctx: ProviderContext): Promise<IamCreateResult>;
  /** Deletes what create recorded in the journal. */
  destroy(ctx: ProviderContext): Promise<void>;
  /**
   * `iam upgrade apply`: compares the permissions of the identities create recorded with what this CLI's nodes need,
   * and with `apply` makes them so. Returns each identity that differs (none when all are up to date).
   */
  upgrade(ctx: ProviderContext, options: { apply: boolean }): Promise<IamPermissionChange[]>;
}

/** One identity whose permissions differ from what this CLI needs: what `iam upgrade apply` adds and removes. */
export interface IamPermissionChange {
  /** The identity (policy, custom role, managed identity) as the cloud names it. */
  identity: string;
  add: string[];
  remove: string[];
}
