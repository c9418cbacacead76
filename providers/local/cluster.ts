/**
 * A cluster on this machine (docs/workflows/local-provider.md), whatever its nodes run on: the InfrastructureProvider
 * of the local provider (process nodes, ./infrastructure.ts) and of the qemu provider (VM nodes, providers/qemu/).
 * Per cluster: the cluster file (./cluster-file.ts), the network (./network.ts) and the cloud daemon (metadata
 * server, load balancer, for VMs also DHCP: ./cloud.ts) on <prefix>.1 in the cluster's gateway namespace. Per node:
 * an address <prefix>.10+ (control plane) or <prefix>.100+ (worker) and its lifecycle (./node-lifecycle.ts), which
 * the node's NodeMachine completes.
 * Everything is recorded in the cluster file and the workspace's resource journal before or right after it exists,
 * every process carries its folder as owner mark, and every namespace the cluster's network id, so any later CLI
 * process continues an interrupted create or terminates whatever exists (see ./processes.ts). Nodes start in
 * parallel; create can return once the control planes are up (CreateRequest.returnWhenControlPlanesUp).
 */
import { promises as fs } from 'node:fs';
import { LOCAL_BUILD_IMAGE } from '../../lib/config/image-version.js';
import { UserError } from '../../lib/errors.js';
import { settleAll } from '../../lib/settle.js';
import type { CreateRequest, CreateResult, InfrastructureProvider, Instance, ProviderContext } from '../contract.js';
import {
  CloudControl,
  CLUSTER_RESOURCE_ID,
  CLOUD_RESOURCE_ID,
  ensureCloud,
  ensureNetwork,
  NETWORK_RESOURCE_ID,
  type NetworkOptions,
} from './cloud.js';
import { clusterSettings, ClusterFile, type LocalClusterRecord, type LocalNodeRecord } from './cluster-file.js';
import { allocateHost, clusterPaths, gatewayAddress, LOCAL_DIR } from './layout.js';
import { ClusterNetwork, isNetworkId, newNetworkId, requireRoot } from './network.js';
import { addressOf, LocalNodeLifecycle, type NodeMachine } from './node-lifecycle.js';
import { setSessionNice, stopOwnedProcesses } from './processes.js';

export interface LocalClusterSettings {
  /** The image new nodes boot (the config's `image`); a node keeps the image it was made with. */
  image: string;
  metadataPort: number;
  network: NetworkOptions;
}

export abstract class LocalCluster implements InfrastructureProvider {
  abstract readonly name: string;
  /** The image new nodes boot. */
  readonly imageVersion: string;
  private readonly metadataPort: number;
  private readonly network: NetworkOptions;
  private readonly nodes: LocalNodeLifecycle;

  constructor(
    settings: LocalClusterSettings,
    protected readonly machine: NodeMachine,
  ) {
    this.imageVersion = settings.image;
    this.metadataPort = settings.metadataPort;
    this.network = settings.network;
    this.nodes = new LocalNodeLifecycle(machine);
  }

  abstract checkPreconditions(): Promise<void>;

  async create(request: CreateRequest, ctx: ProviderContext): Promise<CreateResult> {
    requireRoot(); // before anything exists
    const paths = clusterPaths(ctx.workspaceDir);
    if (request.image !== this.imageVersion) {
      throw new UserError(
        `The config names image ${request.image}, but the ${this.name} provider was set up to boot ${this.imageVersion}.`,
        {
          hint: 'This is a bug in constellation: the provider must be made from the same config.',
        },
      );
    }
    await this.machine.requireImage(this.imageVersion, ctx);
    await ctx.journal.record({
      kind: 'local:cluster',
      id: CLUSTER_RESOURCE_ID,
      name: LOCAL_DIR,
      data: { dir: paths.dir },
    });
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
        for (let n = groupMembers(r, group).length; n < spec.count; n++) this.addNode(r, group);
      }
    });
    const names = Object.keys(file.record.nodes);
    ctx.progress?.(`starting ${names.length} nodes`);
    // The network (which fixes the address range) and the cloud daemon start while the nodes' TPMs are made; the
    // nodes are plugged into the network as soon as it exists.
    const network = ensureNetwork(file, ctx, this.network);
    network.catch(() => undefined); // its failure is reported by those who wait for it
    const [cloud, prepared] = await settleAll([
      ensureCloud(file, ctx, this.network, () => network),
      this.nodes.prepareAll(file, names, ctx, network),
    ]);
    await cloud.control.setCluster(clusterSettings(file.record));
    // Every node boots at once. Workers the caller does not wait for start in the background (MachineNode.background).
    // Once every control plane's machine runs, the caller is told that create only waits (whileControlPlanesBoot).
    let controlPlanesToStart = names.filter((name) => file.record.nodes[name].role === 'control-plane').length;
    const controlPlaneStarted = () => {
      if (--controlPlanesToStart === 0) ctx.whileControlPlanesBoot?.();
    };
    const boot = (role: 'control-plane' | 'worker', options: { background?: boolean; started?: () => void } = {}) =>
      settleAll(
        names.flatMap((name, i) =>
          file.record.nodes[name].role === role
            ? [this.nodes.boot(file, name, cloud.control, ctx, { ...prepared[i], ...options })]
            : [],
        ),
      ).then(() => undefined);
    const controlPlanes = boot('control-plane', { started: controlPlaneStarted });
    const workers = boot('worker', { background: request.returnWhenControlPlanesUp });
    workers.catch(() => undefined); // awaited below, or by the caller (CreateResult.workersStarting)
    if (!request.returnWhenControlPlanesUp) await settleAll([controlPlanes, workers]);
    else {
      await controlPlanes.catch(async (err: unknown) => {
        await workers.catch(() => undefined); // nothing of a failed create keeps running
        throw err;
      });
    }
    const gateway = gatewayAddress(file.record.prefix as string);
    return {
      clusterEndpoint: gateway,
      inClusterEndpoint: gateway,
      apiServerCertSANs: [gateway],
      providerState: { prefix: file.record.prefix, metadataUrl: cloud.control.metadataUrl, dir: LOCAL_DIR },
      ...(request.returnWhenControlPlanesUp ? { workersStarting: workers } : {}),
    };
  }

  async listInstances(ctx: ProviderContext): Promise<Instance[]> {
    const file = await ClusterFile.load(clusterPaths(ctx.workspaceDir));
    if (!file) return [];
    return Promise.all(
      Object.keys(file.record.nodes)
        .sort()
        .map((name) => this.instance(file, name, ctx)),
    );
  }

  async scaleNodeGroup(nodeGroup: string, count: number, ctx: ProviderContext): Promise<void> {
    if (!Number.isInteger(count) || count < 0)
      throw new UserError(`A node group's size must be a whole number >= 0, not ${count}.`);
    const file = await this.requireClusterFile(ctx);
    const group = file.record.nodeGroups[nodeGroup];
    if (!group) {
      throw new UserError(`The local cluster has no node group "${nodeGroup}".`, {
        hint: `Its node groups: ${Object.keys(file.record.nodeGroups).join(', ')}.`,
      });
    }
    const cloud = await this.cloud(file, ctx);
    const members = groupMembers(file.record, nodeGroup);
    const added: string[] = [];
    await file.update((r) => {
      r.nodeGroups[nodeGroup].count = count;
      for (let n = members.length; n < count; n++) added.push(this.addNode(r, nodeGroup));
    });
    await settleAll([
      ...added.map((name) => this.nodes.ensure(file, name, cloud, ctx)),
      ...members.slice(count).map((name) => this.nodes.remove(file, name, cloud, ctx)),
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
    await this.nodes.ensure(file, name, cloud, ctx);
    return this.instance(file, name, ctx);
  }

  /** Removes one node: the load balancer stops sending to it first, then its processes and folders go. */
  async removeInstance(id: string, ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    if (!file.record.nodes[id]) return; // gone already (a repeated call)
    await this.nodes.remove(file, id, await this.cloud(file, ctx), ctx);
  }

  async drainInstance(id: string, ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    const node = file.record.nodes[id];
    if (!node || node.drained) return;
    await this.nodes.drain(file, id, await this.cloud(file, ctx));
  }

  /**
   * Reboots nodes at once, as a hypervisor would: each node's machine restarts (a VM with its swtpm: a power cycle)
   * and its TPM is reset (PCRs to zero; swtpm keeps its state, so the AK stays), so the node is measured again. A
   * stopped node is started.
   */
  async rebootNodes(names: string[], ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    for (const name of names) this.requireNode(file, name);
    const cloud = await this.cloud(file, ctx);
    await settleAll(names.map((name) => this.nodes.ensure(file, name, cloud, ctx, { reboot: true })));
  }

  /** Powers nodes off: every process of each node stops, its TPM too; its folders (TPM state, state disk) stay. */
  async stopNodes(names: string[], ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    for (const name of names) this.requireNode(file, name);
    await settleAll(names.map((name) => this.nodes.stop(file, name, ctx)));
  }

  /** Powers nodes on: their TPM starts and they boot (and are measured); a running node is left alone. */
  async startNodes(names: string[], ctx: ProviderContext): Promise<void> {
    const file = await this.requireClusterFile(ctx);
    for (const name of names) this.requireNode(file, name);
    const cloud = await this.cloud(file, ctx);
    await settleAll(names.map((name) => this.nodes.ensure(file, name, cloud, ctx)));
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
    // Nodes started in the background (MachineNode.background) run at the usual priority from now on.
    await Promise.all(
      Object.entries(file.record.nodes).map(
        async ([name, n]) =>
          (await this.nodes.state(file, name, ctx)) === 'running' && setSessionNice(n.launcherPid as number, 0),
      ),
    );
  }

  async terminate(ctx: ProviderContext): Promise<void> {
    const paths = clusterPaths(ctx.workspaceDir);
    let record: LocalClusterRecord | undefined;
    try {
      record = (await ClusterFile.load(paths))?.record;
    } catch (err) {
      // A broken cluster.json must not keep anything alive: the journal and the owner marks still find it all.
      ctx.log.warn('local cluster record unreadable; terminating from the journal and the process table', {
        error: String(err),
      });
    }
    const journal = (await ctx.journal.list()).filter((r) => r.kind.startsWith('local:'));
    const nodes = new Map<string, number[]>();
    const addPids = (name: string, ...pids: unknown[]) =>
      nodes.set(name, [...(nodes.get(name) ?? []), ...pids.filter((p): p is number => typeof p === 'number')]);
    for (const [name, n] of Object.entries(record?.nodes ?? {})) addPids(name, n.launcherPid, n.swtpmPid);
    for (const r of journal)
      if (r.kind === 'local:node' && r.name) addPids(r.name, r.data?.launcherPid, r.data?.swtpmPid);
    for (const name of await fs.readdir(paths.nodesDir).catch(() => [] as string[])) addPids(name);
    ctx.progress?.(`stopping ${nodes.size} local nodes`);
    await settleAll([...nodes].map(([name, pids]) => this.nodes.destroyLeftovers(name, pids, ctx)));
    const cloudPids = [record?.cloudPid, ...journal.filter((r) => r.id === CLOUD_RESOURCE_ID).map((r) => r.data?.pid)];
    await stopOwnedProcesses(
      paths.dir,
      cloudPids.filter((p): p is number => typeof p === 'number'),
    );
    // With every process gone: the namespaces (the cluster's network id is in the record and in the journal).
    const netIds = new Set([
      record?.netId,
      ...journal.filter((r) => r.id === NETWORK_RESOURCE_ID).map((r) => r.data?.netId),
    ]);
    for (const id of netIds) if (isNetworkId(id)) await new ClusterNetwork(id).remove();
    await fs.rm(paths.dir, { recursive: true, force: true, maxRetries: 5 });
    await fs.rm(paths.runtimeDir, { recursive: true, force: true });
    for (const r of journal) await ctx.journal.remove(r.id);
  }

  private async requireClusterFile(ctx: ProviderContext): Promise<ClusterFile> {
    const file = await ClusterFile.load(clusterPaths(ctx.workspaceDir));
    if (!file) {
      throw new UserError(`The workspace ${ctx.workspaceDir} has no local cluster.`, {
        hint: 'Create one first (constellation create).',
      });
    }
    return file;
  }

  private requireNode(file: ClusterFile, name: string): LocalNodeRecord {
    const node = file.record.nodes[name];
    if (!node) {
      throw new UserError(`The local cluster has no node "${name}".`, {
        hint: `Its nodes: ${Object.keys(file.record.nodes).sort().join(', ') || 'none'}.`,
      });
    }
    return node;
  }

  /** The cloud daemon's control client; a freshly (re)started daemon gets every recorded node registered again. */
  private async cloud(file: ClusterFile, ctx: ProviderContext): Promise<CloudControl> {
    const { control, started } = await ensureCloud(file, ctx, this.network);
    if (started) {
      await control.setCluster(clusterSettings(file.record));
      for (const [name, node] of Object.entries(file.record.nodes)) {
        if (node.akPublic && !node.drained) {
          await control.registerNode(name, {
            role: node.role,
            group: node.group,
            address: addressOf(file.record, name),
            akPublic: node.akPublic,
          });
        }
      }
    }
    return control;
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
    return {
      id: name,
      name,
      role: node.role,
      nodeGroup: node.group,
      privateIp: addressOf(file.record, name),
      state: await this.nodes.state(file, name, ctx),
      image: node.image ?? LOCAL_BUILD_IMAGE, // records of earlier versions name no image: they booted the build
      ...(node.createdAt ? { createdAt: node.createdAt } : {}),
    };
  }
}

/** The group's nodes, oldest first (by the index in their names). */
function groupMembers(record: LocalClusterRecord, group: string): string[] {
  const index = (name: string) => Number(name.slice(name.lastIndexOf('-') + 1));
  return Object.keys(record.nodes)
    .filter((name) => record.nodes[name].group === group)
    .sort((a, b) => index(a) - index(b));
}

/** The config's provider.local.kubernetesBackend (validated by the config schema); "none" when unset. */
function kubernetesBackendOf(request: CreateRequest): 'none' | 'kubeadm' {
  return request.providerConfig.kubernetesBackend === 'kubeadm' ? 'kubeadm' : 'none';
}
