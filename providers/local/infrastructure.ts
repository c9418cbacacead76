/**
 * The local provider's CLI side (InfrastructureProvider): a cluster of process nodes on this machine.
 * Per node: its swtpm (state in the node folder, its unix sockets in the cluster's runtime folder, ./layout.ts; in the
 * root namespace), a state-disk folder, a network namespace with the address <prefix>.10+ (control plane) or <prefix>.100+ (worker), and a detached
 * launcher (./launcher.ts) in that namespace that measures the image and runs the node program. Per cluster: the
 * network (./network.ts) and the cloud daemon (metadata server + load balancer, ./cloud.ts) on <prefix>.1 in the
 * cluster's gateway namespace.
 * Everything is recorded in cluster.json and the workspace's resource journal before or right after it exists,
 * every process carries its folder as owner mark, and every namespace the cluster's network id, so any later CLI
 * process continues an interrupted create or terminates whatever exists (see ./processes.ts). Nodes start in
 * parallel.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Measurements } from '../../lib/attestation/types.js';
import { UserError } from '../../lib/errors.js';
import { LOCAL_BUILD_IMAGE } from '../../lib/config/image-version.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { pathExists } from '../../lib/workspace/files.js';
import type {
  CreateRequest,
  CreateResult,
  InfrastructureProvider,
  Instance,
  InstanceState,
  ProviderContext,
} from '../contract.js';
import {
  CloudControl,
  CLUSTER_RESOURCE_ID,
  CLOUD_RESOURCE_ID,
  ensureCloud,
  ensureNetwork,
  metadataUrl,
  NETWORK_RESOURCE_ID,
  type NetworkOptions,
} from './cloud.js';
import { clusterSettings, ClusterFile, type LocalClusterRecord } from './cluster-file.js';
import { FileDigestCache } from './digest-cache.js';
import { expectedImageMeasurements, type NodeImage } from './image-measurement.js';
import { LocalImageStore } from './image-store.js';
import type { LaunchConfig } from './launcher.js';
import { allocateHost, clusterPaths, gatewayAddress, LOCAL_DIR, METADATA_PORT, nodeAddress, nodePaths, type NodePaths } from './layout.js';
import { ADDRESS_POOL_ENV, ClusterNetwork, DEFAULT_ADDRESS_POOL, isNetworkId, newNetworkId, requireRoot } from './network.js';
import { defaultNodeProgram } from './node-program.js';
import { requireLocalPreconditions } from './preconditions.js';
export { defaultNodeProgram } from './node-program.js';
import { isOwnedBy, siblingModule, spawnDetached, stopOwnedProcesses } from './processes.js';

export interface LocalInfrastructureOptions {
  /**
   * The config's `image`: `local` (default) boots the current build (or `nodeProgram`), a version boots that image of
   * the user's (`mini image create`, ./image-store.ts). New nodes boot it; a node keeps the image it was made with.
   */
  image?: string;
  /** The user's config folder, which holds the versioned images; default $XDG_CONFIG_HOME/constellation. */
  userConfigDir?: string;
  /** For image `local`: the node program the launcher starts, and the image directory it measures (entry inside it). */
  nodeProgram?: { entry: string; imageDir: string };
  /** The Node.js binary that runs the node program (measured into PCR 4). Default: the one running the CLI. */
  nodeBinary?: string;
  metadataPort?: number;
  /** The pool that cluster address ranges come from. Default: env CONSTELLATION_LOCAL_ADDRESS_POOL, else 10.213.0.0/16. */
  addressPool?: string;
  /** Randomness for choosing the first address range to try (tests). */
  random?: () => number;
}

const nodeResourceId = (name: string) => `local-node/${name}`;

/** How long a removed control plane keeps serving the calls it has, after the load balancer stopped sending more. */
const DRAIN_MS = 500;

/**
 * The local provider's infrastructure. Its nodes are process nodes; the qemu provider (providers/qemu/) extends it
 * with VM nodes by overriding the two steps that differ: starting a node's TPM (startTpm) and starting the node's
 * machine in its namespace (startMachine). Everything else (record, network, cloud daemon, ownership, scaling,
 * power, terminate) is the same code.
 */
export class LocalInfrastructure implements InfrastructureProvider {
  readonly name: string = 'local';
  /** The image new nodes boot: its version (`local`: the current build) and what the launcher runs and measures. */
  readonly imageVersion: string;
  /** What the launcher runs and measures for the image new nodes boot. */
  get image(): NodeImage {
    return this.nodeImageOf(this.imageVersion);
  }
  /** The current build (image `local`): the nodes of a cluster made before versioned images boot it. */
  private readonly localBuild: NodeImage;
  private readonly images: LocalImageStore;
  /** The user's digest cache of image files, shared by the CLI and every launcher of every cluster (./digest-cache.ts). */
  private readonly digestCacheFile: string;
  private readonly metadataPort: number;
  protected readonly network: NetworkOptions;

  constructor(options: LocalInfrastructureOptions = {}) {
    const program = options.nodeProgram ?? defaultNodeProgram();
    const nodeBinary = path.resolve(options.nodeBinary ?? process.execPath);
    this.localBuild = { nodeBinary, imageDir: path.resolve(program.imageDir), entry: path.resolve(program.entry) };
    this.images = new LocalImageStore({ userConfigDir: options.userConfigDir, nodeBinary });
    this.digestCacheFile = this.images.digestCacheFile;
    this.imageVersion = options.image ?? LOCAL_BUILD_IMAGE;
    this.metadataPort = options.metadataPort ?? METADATA_PORT;
    this.network = {
      addressPool: options.addressPool ?? (process.env[ADDRESS_POOL_ENV] || DEFAULT_ADDRESS_POOL),
      random: options.random,
    };
  }

  /**
   * The measurements (PCR 4, 8, 9, 11, 12, 13, SHA-256) of a node booted from this provider's image, as its files
   * are at this moment (files unchanged since an earlier run are not hashed again: the user's digest cache). For a
   * versioned image, `create` uses its signed measurements instead (cli/images).
   */
  expectedMeasurements(): Promise<Measurements> {
    return expectedImageMeasurements(this.image, new FileDigestCache(this.digestCacheFile, { waitToRest: true }));
  }

  /** Root, the programs, /dev/fuse, the runtime folder and the current build's node program (./preconditions.ts). */
  async checkPreconditions(): Promise<void> {
    await requireLocalPreconditions({ nodeProgram: this.localBuild.entry });
  }

  async create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    requireRoot(); // before anything exists
    const paths = clusterPaths(ctx.workspaceDir);
    if (request.image !== this.imageVersion) {
      throw new UserError(`The config names image ${request.image}, but the local provider was set up to boot ${this.imageVersion}.`, {
        hint: 'This is a bug in constellation: the provider must be made from the same config.',
      });
    }
    await this.requireImage(this.imageVersion);
    await ctx.journal.record({ kind: 'local:cluster', id: CLUSTER_RESOURCE_ID, name: LOCAL_DIR, data: { dir: paths.dir } });
    await fs.mkdir(paths.nodesDir, { recursive: true, mode: 0o700 });

    let file = await ClusterFile.load(paths);
    if (file && file.record.uid !== request.uid) {
      throw new UserError(`This workspace already has a local cluster (uid ${file.record.uid}).`, {
        hint: 'Terminate it first (constellation terminate), or use another workspace (-C <dir>).',
      });
    }
    file ??= await ClusterFile.create(paths, {
      version: 1,
      uid: request.uid,
      name: request.name,
      netId: newNetworkId(),
      metadataPort: this.metadataPort,
      initSecretHash: request.initSecretHash,
      joinServiceKey: request.joinServiceKey,
      initialized: false,
      kubernetesBackend: kubernetesBackendOf(request),
      nodeGroups: {},
      nextNodeIndex: {},
      nodes: {},
    });
    await file.update((r) => {
      r.initSecretHash = request.initSecretHash;
      r.joinServiceKey = request.joinServiceKey;
      r.kubernetesBackend = kubernetesBackendOf(request);
      for (const g of request.nodeGroups) {
        r.nodeGroups[g.name] ??= { role: g.role, stateDiskSizeGB: g.stateDiskSizeGB, count: g.initialCount };
      }
      for (const [group, spec] of Object.entries(r.nodeGroups)) {
        for (let n = this.groupMembers(r, group).length; n < spec.count; n++) this.addNode(r, group);
      }
    });
    const names = Object.keys(file.record.nodes);
    ctx.progress?.(`starting ${names.length} nodes`);
    // The network (which fixes the address range) and the cloud daemon start while the nodes' TPMs are made; each
    // node is plugged into the network as soon as it exists.
    const network = ensureNetwork(file, ctx, this.network);
    network.catch(() => undefined); // its failure is reported by those who wait for it
    const [cloud, ...plugged] = await settleAll([
      ensureCloud(file, ctx, this.network, () => network),
      ...names.map((name) => this.prepareNode(file, name, ctx, network)),
    ]);
    await cloud.control.setCluster(clusterSettings(file.record));
    await settleAll(names.map((name, i) => this.bootNode(file, name, cloud.control, ctx, { plugged: plugged[i] })));
    const gateway = gatewayAddress(file.record.prefix as string);
    return {
      clusterEndpoint: gateway,
      inClusterEndpoint: gateway,
      apiServerCertSANs: [gateway],
      providerState: { prefix: file.record.prefix, metadataUrl: cloud.control.metadataUrl, dir: LOCAL_DIR },
    };
  }

  async listInstances(ctx: ProviderContext): Promise<Instance[]> {
    const file = await ClusterFile.load(clusterPaths(ctx.workspaceDir));
    if (!file) return [];
    return Promise.all(Object.keys(file.record.nodes).sort().map((name) => this.instance(file, name, ctx)));
  }

  async scaleNodeGroup(nodeGroup: string, count: number, ctx: ProviderContext): Promise<void> {
    if (!Number.isInteger(count) || count < 0) throw new UserError(`A node group's size must be a whole number >= 0, not ${count}.`);
    const file = await this.requireClusterFile(ctx);
    const group = file.record.nodeGroups[nodeGroup];
    if (!group) {
      throw new UserError(`The local cluster has no node group "${nodeGroup}".`, {
        hint: `Its node groups: ${Object.keys(file.record.nodeGroups).join(', ')}.`,
      });
    }
    const cloud = await this.cloud(file, ctx);
    const members = this.groupMembers(file.record, nodeGroup);
    const added: string[] = [];
    await file.update((r) => {
      r.nodeGroups[nodeGroup].count = count;
      for (let n = members.length; n < count; n++) added.push(this.addNode(r, nodeGroup));
    });
    await settleAll([
      ...added.map((name) => this.ensureNode(file, name, cloud, ctx)),
      ...members.slice(count).map((name) => this.removeNode(file, name, cloud, ctx)),
    ]);
  }

  /** One more node in the group, booted (an upgrade's replacement: the caller removes the old node once it joined). */
  async addInstance(nodeGroup: string, ctx: ProviderContext): Promise<Instance> {
    const file = await this.requireClusterFile(ctx);
    if (!file.record.nodeGroups[nodeGroup]) throw new UserError(`The local cluster has no node group "${nodeGroup}".`);
    const cloud = await this.cloud(file, ctx);
    let name = '';
    await file.update((r) => {
      name = this.addNode(r, nodeGroup);
    });
    await this.ensureNode(file, name, cloud, ctx);
    return this.instance(file, name, ctx);
  }

  /** Removes one node: the load balancer stops sending to it first, then its processes and folders go. */
  async removeInstance(id: string, ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    if (!file.record.nodes[id]) return; // gone already (a repeated call)
    await this.removeNode(file, id, await this.cloud(file, ctx), ctx);
  }

  async drainInstance(id: string, ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    const node = file.record.nodes[id];
    if (!node || node.drained) return;
    await this.drain(file, id, await this.cloud(file, ctx));
  }

  /**
   * Reboots nodes at once, as a hypervisor would: each node's processes stop (its state disk is unmounted), its TPM
   * is reset (PCRs to zero; swtpm keeps its state, so the AK stays) and the launcher measures and starts the node
   * again. A stopped node is started.
   */
  async rebootNodes(names: string[], ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    for (const name of names) this.requireNode(file, name);
    const cloud = await this.cloud(file, ctx);
    await settleAll(names.map((name) => this.ensureNode(file, name, cloud, ctx, { reboot: true })));
  }

  /** Powers nodes off: every process of each node stops, its TPM too; its folders (TPM state, state disk) stay. */
  async stopNodes(names: string[], ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    for (const name of names) this.requireNode(file, name);
    await settleAll(
      names.map(async (name) => {
        const node = file.record.nodes[name];
        ctx.progress?.(`stopping ${name}`);
        // The recorded PIDs stay: they no longer run, so the instance reads as stopped, and start makes new ones.
        await stopOwnedProcesses(nodePaths(ctx.workspaceDir, name).dir, [node.launcherPid ?? 0, node.swtpmPid ?? 0]);
      }),
    );
  }

  /** Powers nodes on: their TPM starts and they boot (measured by the launcher); a running node is left alone. */
  async startNodes(names: string[], ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    for (const name of names) this.requireNode(file, name);
    const cloud = await this.cloud(file, ctx);
    await settleAll(names.map((name) => this.ensureNode(file, name, cloud, ctx)));
  }

  /** The names of the cluster's nodes of a role. */
  async nodeNames(ctx: ProviderContext, role?: 'control-plane' | 'worker'): Promise<string[]> {
    const file = await this.requireClusterFile(ctx);
    return Object.keys(file.record.nodes)
      .filter((name) => role === undefined || file.record.nodes[name].role === role)
      .sort();
  }

  /** The metadata stops serving the init-secret hash (the record keeps that, so a restarted cloud daemon does too). */
  async markInitialized(ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    if (!file.record.initialized) await file.update((r) => void (r.initialized = true));
    const cloud = await this.cloud(file, ctx);
    await cloud.setCluster(clusterSettings(file.record));
  }

  async terminate(ctx: ProviderContext): Promise<void> {
    const paths = clusterPaths(ctx.workspaceDir);
    let record: LocalClusterRecord | undefined;
    try {
      record = (await ClusterFile.load(paths))?.record;
    } catch (err) {
      // A broken cluster.json must not keep anything alive: the journal and the owner marks still find it all.
      ctx.log.warn('local cluster record unreadable; terminating from the journal and the process table', { error: String(err) });
    }
    const journal = (await ctx.journal.list()).filter((r) => r.kind.startsWith('local:'));
    const nodes = new Map<string, number[]>();
    const addPids = (name: string, ...pids: unknown[]) =>
      nodes.set(name, [...(nodes.get(name) ?? []), ...pids.filter((p): p is number => typeof p === 'number')]);
    for (const [name, n] of Object.entries(record?.nodes ?? {})) addPids(name, n.launcherPid, n.swtpmPid);
    for (const r of journal) if (r.kind === 'local:node' && r.name) addPids(r.name, r.data?.launcherPid, r.data?.swtpmPid);
    for (const name of await fs.readdir(paths.nodesDir).catch(() => [] as string[])) addPids(name);
    ctx.progress?.(`stopping ${nodes.size} local nodes`);
    await settleAll(
      [...nodes].map(async ([name, pids]) => {
        let np: ReturnType<typeof nodePaths>;
        try {
          np = nodePaths(ctx.workspaceDir, name);
        } catch {
          return; // not a node folder of ours; removed with the cluster folder below
        }
        await stopOwnedProcesses(np.dir, pids);
        await fs.rm(np.dir, { recursive: true, force: true, maxRetries: 5 });
        await fs.rm(np.socketDir, { recursive: true, force: true });
        await ctx.journal.remove(nodeResourceId(name));
      }),
    );
    const cloudPids = [record?.cloudPid, ...journal.filter((r) => r.id === CLOUD_RESOURCE_ID).map((r) => r.data?.pid)];
    await stopOwnedProcesses(
      paths.dir,
      cloudPids.filter((p): p is number => typeof p === 'number'),
    );
    // With every process gone: the namespaces (the cluster's network id is in the record and in the journal).
    const netIds = new Set([record?.netId, ...journal.filter((r) => r.id === NETWORK_RESOURCE_ID).map((r) => r.data?.netId)]);
    for (const id of netIds) if (isNetworkId(id)) await new ClusterNetwork(id).remove();
    await fs.rm(paths.dir, { recursive: true, force: true, maxRetries: 5 });
    await fs.rm(paths.runtimeDir, { recursive: true, force: true });
    for (const r of journal) await ctx.journal.remove(r.id);
  }

  protected async requireClusterFile(ctx: ProviderContext): Promise<ClusterFile> {
    const file = await ClusterFile.load(clusterPaths(ctx.workspaceDir));
    if (!file) {
      throw new UserError(`The workspace ${ctx.workspaceDir} has no local cluster.`, { hint: 'Create one first (constellation create).' });
    }
    return file;
  }

  protected requireNode(file: ClusterFile, name: string): LocalClusterRecord['nodes'][string] {
    const node = file.record.nodes[name];
    if (!node) {
      throw new UserError(`The local cluster has no node "${name}".`, {
        hint: `Its nodes: ${Object.keys(file.record.nodes).sort().join(', ') || 'none'}.`,
      });
    }
    return node;
  }

  /** The cloud daemon's control client; a freshly (re)started daemon gets every recorded node registered again. */
  protected async cloud(file: ClusterFile, ctx: ProviderContext): Promise<CloudControl> {
    const { control, started } = await ensureCloud(file, ctx, this.network);
    if (started) {
      await control.setCluster(clusterSettings(file.record));
      for (const [name, node] of Object.entries(file.record.nodes)) {
        if (node.akPublic && !node.drained) {
          await control.registerNode(name, { role: node.role, group: node.group, address: this.address(file.record, name), akPublic: node.akPublic });
        }
      }
    }
    return control;
  }

  /** The cluster's network; its id exists once ensureCloud ran (which every operation that boots nodes calls first). */
  protected clusterNetwork(file: ClusterFile): ClusterNetwork {
    return new ClusterNetwork(file.record.netId as string);
  }

  private groupMembers(record: LocalClusterRecord, group: string): string[] {
    const index = (name: string) => Number(name.slice(name.lastIndexOf('-') + 1));
    return Object.keys(record.nodes)
      .filter((name) => record.nodes[name].group === group)
      .sort((a, b) => index(a) - index(b));
  }

  /** What the launcher runs and measures for image `version`. */
  private nodeImageOf(version: string): NodeImage {
    return version === LOCAL_BUILD_IMAGE ? this.localBuild : this.images.nodeImage(version);
  }

  /** Refuses to boot an image that is not there (no build, or no such versioned image). */
  protected async requireImage(version: string): Promise<void> {
    const image = this.nodeImageOf(version);
    if (version !== LOCAL_BUILD_IMAGE && !(await this.images.has(version))) {
      throw new UserError(`There is no local image ${version} (in ${this.images.imagesDir}).`, {
        hint: `\`constellation mini image list\` shows the images; \`constellation mini image create ${version}\` makes one from the current build.`,
      });
    }
    await fs.access(image.entry).catch(() => {
      throw new UserError(`The node program ${image.entry} does not exist.`, {
        hint: version === LOCAL_BUILD_IMAGE ? 'Build the project first (npm run build).' : `The image ${version} is incomplete: make it again under a new version.`,
      });
    });
  }

  /** Plans a node of the group (name and address) in the record; names are never reused within a cluster. */
  private addNode(record: LocalClusterRecord, group: string): string {
    const role = record.nodeGroups[group].role;
    const index = record.nextNodeIndex[role] ?? 0;
    const name = `${role}-${index}`;
    record.nextNodeIndex[role] = index + 1;
    const host = allocateHost(
      role,
      Object.values(record.nodes).map((n) => n.host),
    );
    record.nodes[name] = { group, role, host, image: this.imageVersion, createdAt: new Date().toISOString() };
    return name;
  }

  private async instance(file: ClusterFile, name: string, ctx: ProviderContext): Promise<Instance> {
    const node = file.record.nodes[name];
    const dir = nodePaths(ctx.workspaceDir, name).dir;
    let state: InstanceState = 'pending';
    if (node.launcherPid !== undefined) state = (await isOwnedBy(node.launcherPid, dir)) ? 'running' : 'stopped';
    return {
      id: name,
      name,
      role: node.role,
      nodeGroup: node.group,
      privateIp: this.address(file.record, name),
      state,
      image: node.image ?? LOCAL_BUILD_IMAGE,
      ...(node.createdAt ? { createdAt: node.createdAt } : {}),
    };
  }

  /** The node's address; empty while the cluster has no address range yet (create was interrupted before). */
  protected address(record: LocalClusterRecord, name: string): string {
    return record.prefix ? nodeAddress(record.prefix, record.nodes[name].host) : '';
  }

  /** Brings one node to "running": prepareNode, then bootNode. */
  private async ensureNode(file: ClusterFile, name: string, cloud: CloudControl, ctx: ProviderContext, options: { reboot?: boolean } = {}): Promise<void> {
    await this.prepareNode(file, name, ctx);
    await this.bootNode(file, name, cloud, ctx, options);
  }

  protected async recordNode(file: ClusterFile, name: string, ctx: ProviderContext): Promise<void> {
    const node = file.record.nodes[name];
    await ctx.journal.record({
      kind: 'local:node',
      id: nodeResourceId(name),
      name,
      dependsOn: [CLUSTER_RESOURCE_ID],
      data: { dir: nodePaths(ctx.workspaceDir, name).dir, swtpmPid: node.swtpmPid, launcherPid: node.launcherPid },
    });
  }

  /**
   * What a node needs before it can boot, doing only what is missing: folder, state disk, a running swtpm, and the
   * AK (read once, before the first boot, so it can be registered). Needs no address yet, so it runs while the
   * cloud daemon starts. Given the network that is being made, it also plugs a node that is not running into it
   * meanwhile, and tells whether it did.
   */
  private async prepareNode(file: ClusterFile, name: string, ctx: ProviderContext, network?: Promise<ClusterNetwork>): Promise<boolean> {
    ctx.signal?.throwIfAborted();
    const node = file.record.nodes[name];
    const running = node.launcherPid !== undefined && (await isOwnedBy(node.launcherPid, nodePaths(ctx.workspaceDir, name).dir));
    const plug = async () => {
      if (!network || running) return false;
      await this.plug(await network, name, node.host, this.address(file.record, name));
      return true;
    };
    const [, plugged] = await settleAll([this.prepareTpm(file, name, ctx), plug()]);
    return plugged;
  }

  private async prepareTpm(file: ClusterFile, name: string, ctx: ProviderContext): Promise<void> {
    const node = file.record.nodes[name];
    const np = nodePaths(ctx.workspaceDir, name);
    await this.recordNode(file, name, ctx);
    await fs.mkdir(np.tpmDir, { recursive: true, mode: 0o700 });
    await fs.mkdir(np.stateDisk, { recursive: true, mode: 0o700 });

    const { swtpmPaths } = await import('../../lib/tpm/swtpm.js');
    const sockets = swtpmPaths(np.tpmDir, np.socketDir);
    // A swtpm of an older CLI has its sockets in the TPM folder; the node is started anew with them in the runtime one.
    if (node.swtpmPid === undefined || !(await isOwnedBy(node.swtpmPid, np.dir)) || !(await pathExists(sockets.ctrlSocket))) {
      // A launcher without its TPM is useless, and an orphaned swtpm would hold the TPM state.
      await stopOwnedProcesses(np.dir, [node.launcherPid ?? 0, node.swtpmPid ?? 0]);
      const swtpmPid = await this.startTpm(file, name, np);
      await file.update(() => {
        node.swtpmPid = swtpmPid;
        node.launcherPid = undefined;
      });
      await this.recordNode(file, name, ctx);
    }
    if (node.akPublic === undefined) {
      const akPublic = Buffer.from(await readAttestationKey(sockets.serverSocket)).toString('base64');
      await file.update(() => {
        node.akPublic = akPublic;
      });
    }
  }

  /** Plugs a node into the cluster's network (a process node: its namespace with its address). */
  protected async plug(network: ClusterNetwork, name: string, host: number, address: string): Promise<void> {
    await network.plugNode(name, host, address);
  }

  /**
   * Starts the node's swtpm, detached, and returns its PID. A process node's launcher talks to it on its server
   * socket (and resets it through the control socket when it boots the node).
   */
  protected async startTpm(_store: ClusterFile, _name: string, np: NodePaths): Promise<number> {
    const { startSwtpm } = await import('../../lib/tpm/swtpm.js');
    return (await startSwtpm({ stateDir: np.tpmDir, socketDir: np.socketDir, detached: true })).pid;
  }

  /**
   * Registers a prepared node (address, AK) with the metadata server, plugs it into the network (a fresh pair of
   * links, unless `plugged` says prepareNode just did) and starts its launcher in its namespace, unless it runs.
   * With `reboot`, a running node's launcher and node program are stopped and started again (the launcher resets
   * the TPM).
   */
  private async bootNode(
    file: ClusterFile,
    name: string,
    cloud: CloudControl,
    ctx: ProviderContext,
    options: { reboot?: boolean; plugged?: boolean } = {},
  ): Promise<void> {
    ctx.signal?.throwIfAborted();
    const node = file.record.nodes[name];
    const np = nodePaths(ctx.workspaceDir, name);
    const address = this.address(file.record, name);
    await writeFileAtomic(np.address, `${address}\n`);
    await cloud.registerNode(name, { role: node.role, group: node.group, address, akPublic: node.akPublic as string });
    if (node.drained) {
      await file.update((r) => {
        delete r.nodes[name].drained; // started again: back in the load balancer
      });
    }

    await this.startMachine(file, name, ctx, options);
  }

  /**
   * Starts the node's machine in its namespace unless it runs (with `reboot`, also when it runs): for a process node
   * the launcher, which measures the image and runs the node program. Records the machine's PID as launcherPid.
   */
  protected async startMachine(file: ClusterFile, name: string, ctx: ProviderContext, options: { reboot?: boolean; plugged?: boolean }): Promise<void> {
    const node = file.record.nodes[name];
    const np = nodePaths(ctx.workspaceDir, name);
    const address = this.address(file.record, name);
    if (!options.reboot && node.launcherPid !== undefined && (await isOwnedBy(node.launcherPid, np.dir))) return;
    // Everything of the node but its TPM: the launcher, the node program and whatever that started.
    await stopOwnedProcesses(np.dir, [node.launcherPid ?? 0], { keep: [node.swtpmPid as number] });
    const network = this.clusterNetwork(file);
    if (!options.plugged) await network.plugNode(name, node.host, address);
    const { swtpmPaths } = await import('../../lib/tpm/swtpm.js');
    const tpm = swtpmPaths(np.tpmDir, np.socketDir);
    const imageVersion = node.image ?? LOCAL_BUILD_IMAGE;
    await this.requireImage(imageVersion);
    const launch: LaunchConfig = {
      name,
      role: node.role,
      address,
      metadataUrl: metadataUrl(file.record.prefix as string, file.record.metadataPort),
      nodeDir: np.dir,
      stateDisk: np.stateDisk,
      stateDir: np.stateDir,
      tpm: { serverSocket: tpm.serverSocket, ctrlSocket: tpm.ctrlSocket },
      image: this.nodeImageOf(imageVersion),
      kubernetesBackend: file.record.kubernetesBackend,
      imageVersion,
      digestCache: this.digestCacheFile,
    };
    await writeFileAtomic(np.launchConfig, `${JSON.stringify(launch, null, 2)}\n`);
    ctx.progress?.(`booting ${name}`);
    const { pid, message } = await spawnDetached({
      file: siblingModule('launcher'),
      // The launcher runs the node program in its own process: on the Node.js binary that is measured into PCR 4.
      execPath: launch.image.nodeBinary,
      args: [np.launchConfig],
      owner: np.dir,
      cwd: np.dir,
      logFile: np.log,
      netns: network.nodeNetns(name),
    });
    await file.update(() => {
      node.launcherPid = pid;
    });
    await this.recordNode(file, name, ctx);
    await writeFileAtomic(np.launcherPid, `${pid}\n`);
    if (message.type === 'error') {
      throw new UserError(`Local node ${name} did not boot: ${message.message}`, { hint: `See its log: ${np.log}` });
    }
    ctx.log.debug('local node booted', { name, address, launcherPid: pid, programPid: message.programPid });
  }

  /** The load balancer no longer picks the node; calls it is serving end before it goes, as a cloud LB drains a target. */
  private async drain(file: ClusterFile, name: string, cloud: CloudControl): Promise<void> {
    await cloud.unregisterNode(name);
    if (file.record.nodes[name].role === 'control-plane') await new Promise((resolve) => setTimeout(resolve, DRAIN_MS));
    await file.update((r) => {
      r.nodes[name].drained = true;
    });
  }

  private async removeNode(file: ClusterFile, name: string, cloud: CloudControl, ctx: ProviderContext): Promise<void> {
    const node = file.record.nodes[name];
    const np = nodePaths(ctx.workspaceDir, name);
    if (!node.drained) await this.drain(file, name, cloud);
    await stopOwnedProcesses(np.dir, [node.launcherPid ?? 0, node.swtpmPid ?? 0]);
    await this.clusterNetwork(file).unplugNode(name, node.host);
    await fs.rm(np.dir, { recursive: true, force: true, maxRetries: 5 });
    await fs.rm(np.socketDir, { recursive: true, force: true });
    await file.update((r) => {
      delete r.nodes[name];
    });
    await ctx.journal.remove(nodeResourceId(name));
  }
}

/**
 * Like Promise.all, but waits for every operation to end before rejecting with the first error, so nothing keeps
 * running in the background after a failed create (the workspace lock is released only then).
 */
async function settleAll<T extends readonly unknown[]>(promises: T): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}

/** The node's AK public area; the TPM derives the same key each time, so the node re-creates exactly this one. */
async function readAttestationKey(serverSocket: string): Promise<Uint8Array> {
  const { TpmClient } = await import('../../lib/tpm/client.js');
  const client = await TpmClient.connect(serverSocket);
  try {
    const ak = await client.createAttestationKey();
    await client.flushContext(ak.handle);
    return ak.publicArea;
  } finally {
    client.close();
  }
}

/** The config's provider.local.kubernetesBackend (validated by the config schema); "none" when unset. */
function kubernetesBackendOf(request: CreateRequest): 'none' | 'kubeadm' {
  return request.providerConfig.kubernetesBackend === 'kubeadm' ? 'kubeadm' : 'none';
}
