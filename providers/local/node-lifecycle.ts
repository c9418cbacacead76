/**
 * One node of a cluster on this machine, from its first boot to its removal (docs/workflows/local-provider.md):
 *
 *   prepare   folder, state disk, a running TPM (swtpm) and the AK, read once before the first boot so the cloud
 *             daemon can register it; meanwhile the node is plugged into the cluster's network when it is new
 *   boot      registered with the cloud daemon (address, AK), plugged in, its machine started unless it runs
 *             (with `reboot`: the machine restarts; a machine whose TPM stops with it, a VM, is power-cycled:
 *             machine and TPM stop, then prepare and boot start both again)
 *   stop      every process of the node ends, its TPM too; its folders stay (power off)
 *   drain     the load balancer stops picking it; calls it serves end first
 *   remove    drained, stopped, unplugged, its folders and its entries in the cluster file and the journal gone
 *
 * What a node's "machine" is differs per provider, and only that: a NodeMachine. For the local provider it is the
 * launcher process that measures the image and runs the node program (./process-machine.ts); for the qemu provider a
 * QEMU VM (providers/qemu/vm-machine.ts). The lifecycle does the rest the same way for both, and records every PID in
 * the cluster file (./cluster-file.ts) and the resource journal right after it exists, so a later CLI process
 * continues or terminates whatever a crashed one left (./processes.ts: processes carry their node folder as owner).
 */
import { promises as fs } from 'node:fs';
import { detachMountsUnder } from '../../lib/mounts.js';
import { settleAll } from '../../lib/settle.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { pathExists } from '../../lib/workspace/files.js';
import type { InstanceState, ProviderContext } from '../contract.js';
import { CLUSTER_RESOURCE_ID, type CloudControl } from './cloud.js';
import type { ClusterFile, LocalClusterRecord, LocalNodeRecord } from './cluster-file.js';
import { clusterPaths, nodeAddress, nodePaths, type NodePaths } from './layout.js';
import { ClusterNetwork } from './network.js';
import { isOwnedBy, processesByOwner, stopOwnedProcesses } from './processes.js';

/** The node a machine acts on: its record, folders, address and the cluster it belongs to. */
export interface MachineNode {
  name: string;
  node: LocalNodeRecord;
  paths: NodePaths;
  /** The node's address in the cluster's range. */
  address: string;
  cluster: LocalClusterRecord;
  /** The node's network namespace (./network.ts). */
  netns: string;
  /**
   * The node starts while the control planes initialize the cluster (CreateRequest.returnWhenControlPlanesUp), so
   * their init goes first: a process node's processes run at a lower CPU priority until the cluster is initialized
   * (LocalCluster.markInitialized). VM nodes start as usual.
   */
  background?: boolean;
  /** Called once the machine runs (a process node's launcher is spawned), before it has booted. */
  started?: () => void;
}

/** What a node runs on: the one part of a local node's lifecycle that differs between process nodes and VM nodes. */
export interface NodeMachine {
  /** Refuses an image that nodes cannot boot (none built, no such version, no such folder), naming the fix. */
  requireImage(image: string, ctx: Pick<ProviderContext, 'workspaceDir'>): Promise<void>;
  /**
   * Starts the node's swtpm, detached (state in the node's TPM folder, sockets in its runtime folder), and returns its
   * PID; with `readAk`, also the public area of the AK (base64), which the TPM derives the same each time. On failure
   * nothing it started keeps running.
   */
  startTpm(paths: NodePaths, options: { readAk: boolean }): Promise<{ pid: number; akPublic?: string }>;
  /** Plugs the node into the cluster's network (a process node: its namespace with its address; a VM: a tap device). */
  plug(network: ClusterNetwork, target: Pick<MachineNode, 'name' | 'node' | 'address'>): Promise<void>;
  /** Plugs several nodes at once, as plug does each (fewer `ip` runs); without it they are plugged one by one. */
  plugAll?(network: ClusterNetwork, targets: Pick<MachineNode, 'name' | 'node' | 'address'>[]): Promise<void>;
  /**
   * The node's TPM stops when its machine does (QEMU shuts its swtpm down when it exits), so a reboot power-cycles
   * the node: machine and TPM stop, then both start again. Without it a reboot restarts only the machine, and the
   * machine resets the TPM itself (a process node's launcher).
   */
  readonly tpmStopsWithMachine?: boolean;
  /**
   * Starts the node's machine in its namespace (the node is plugged in and no process of it but its TPM runs) and
   * returns its PID, recorded as the node's launcherPid. `failure`: it started but reported that the node did not boot;
   * the lifecycle records the PID before it throws that.
   */
  start(target: MachineNode, ctx: ProviderContext): Promise<{ pid: number; failure?: Error }>;
}

/** What the lifecycle needs of the cloud daemon's control API (./cloud.ts): the metadata server's node registry. */
export type NodeRegistry = Pick<CloudControl, 'registerNode' | 'unregisterNode'>;

const nodeResourceId = (name: string) => `local-node/${name}`;

/** How long a removed control plane keeps serving the calls it has, after the load balancer stopped sending more. */
const DRAIN_MS = 500;

export class LocalNodeLifecycle {
  constructor(private readonly machine: NodeMachine) {}

  /** Brings one node to "running": prepare, then boot; with `reboot`, a power cycle first when the machine needs one. */
  async ensure(
    file: ClusterFile,
    name: string,
    cloud: NodeRegistry,
    ctx: ProviderContext,
    options: { reboot?: boolean } = {},
  ): Promise<void> {
    if (options.reboot && this.machine.tpmStopsWithMachine) {
      ctx.progress?.(`power-cycling ${name}`);
      await this.powerOff(file, name, ctx);
    }
    const { swept } = await this.prepare(file, name, ctx);
    await this.boot(file, name, cloud, ctx, { ...options, swept });
  }

  /**
   * What a node needs before it can boot, doing only what is missing: folder, state disk, a running swtpm, and the
   * AK. Needs no address yet, so it runs while the cloud daemon starts. Given the network that is being made, it
   * also plugs a node that is not running into it meanwhile. Tells whether it plugged the node in, and whether it
   * stopped every process of the node before it started the node's TPM (which boot then need not do again).
   */
  async prepare(
    file: ClusterFile,
    name: string,
    ctx: ProviderContext,
    network?: Promise<ClusterNetwork>,
  ): Promise<{ plugged: boolean; swept: boolean }> {
    return (await this.prepareAll(file, [name], ctx, network))[0];
  }

  /**
   * prepare for several nodes at once, with the work that is the same for all of them done once: one sweep of the
   * machine's processes finds what earlier runs left of every node (instead of one sweep per node), and the nodes
   * that are not running are plugged into the network together (./network.ts plugNodes: fewer `ip` runs).
   */
  async prepareAll(
    file: ClusterFile,
    names: readonly string[],
    ctx: ProviderContext,
    network?: Promise<ClusterNetwork>,
  ): Promise<{ plugged: boolean; swept: boolean }[]> {
    ctx.signal?.throwIfAborted();
    const running = await Promise.all(
      names.map((name) => this.machineRuns(file.record.nodes[name], nodePaths(ctx.workspaceDir, name))),
    );
    const toPlug = names.filter((_, i) => !running[i]);
    const plug = async () => {
      if (!network || toPlug.length === 0) return;
      const net = await network;
      const targets = toPlug.map((name) => ({
        name,
        node: file.record.nodes[name],
        address: addressOf(file.record, name),
      }));
      if (this.machine.plugAll) await this.machine.plugAll(net, targets);
      else await Promise.all(targets.map((target) => this.machine.plug(net, target)));
    };
    // Taken by the first node that needs it, before that node starts anything; see processesByOwner.
    let sweep: Promise<Map<string, number[]>> | undefined;
    const leftovers = () => (sweep ??= processesByOwner(clusterPaths(ctx.workspaceDir).dir));
    const [swept] = await settleAll([
      settleAll(names.map((name) => this.prepareTpm(file, name, ctx, leftovers))),
      plug(),
    ]);
    return names.map((name, i) => ({ plugged: !!network && toPlug.includes(name), swept: swept[i] }));
  }

  /**
   * Registers a prepared node (address, AK) with the metadata server and starts its machine in its namespace (plugged
   * in first, unless `plugged` says prepare just did), unless it runs. With `reboot`, a running machine is stopped
   * and started again (a process node's launcher resets the TPM; a VM was power-cycled by ensure already). `swept`:
   * prepare has just stopped every process of the node and started only its TPM, so no sweep of the machine's
   * processes (a read of every process's /proc files) is needed before the machine starts. `background` and
   * `started`: see MachineNode.
   */
  async boot(
    file: ClusterFile,
    name: string,
    cloud: NodeRegistry,
    ctx: ProviderContext,
    options: {
      reboot?: boolean;
      plugged?: boolean;
      swept?: boolean;
      background?: boolean;
      started?: () => void;
    } = {},
  ): Promise<void> {
    ctx.signal?.throwIfAborted();
    const node = file.record.nodes[name];
    const np = nodePaths(ctx.workspaceDir, name);
    const address = addressOf(file.record, name);
    await writeFileAtomic(np.address, `${address}\n`);
    await cloud.registerNode(name, { role: node.role, group: node.group, address, akPublic: node.akPublic as string });
    if (node.drained) {
      await file.update((r) => {
        delete r.nodes[name].drained; // started again: back in the load balancer
      });
    }

    const network = clusterNetwork(file);
    const target: MachineNode = {
      name,
      node,
      paths: np,
      address,
      cluster: file.record,
      netns: network.nodeNetns(name),
      ...(options.background ? { background: true } : {}),
      ...(options.started ? { started: options.started } : {}),
    };
    if (!options.reboot && (await this.machineRuns(node, np))) return;
    // Everything of the node but its TPM: the machine and whatever it started.
    if (!options.swept) await stopOwnedProcesses(np.dir, [node.launcherPid ?? 0], { keep: [node.swtpmPid as number] });
    if (!options.plugged) await this.machine.plug(network, target);
    const { pid, failure } = await this.machine.start(target, ctx);
    await file.update(() => {
      node.launcherPid = pid;
    });
    await this.record(file, name, ctx);
    await writeFileAtomic(np.launcherPid, `${pid}\n`);
    if (failure) throw failure;
  }

  /** Powers a node off: every process of it stops, its TPM too; its folders (TPM state, state disk) stay. */
  async stop(file: ClusterFile, name: string, ctx: ProviderContext): Promise<void> {
    ctx.progress?.(`stopping ${name}`);
    await this.powerOff(file, name, ctx);
  }

  private async powerOff(file: ClusterFile, name: string, ctx: ProviderContext): Promise<void> {
    const node = file.record.nodes[name];
    // The recorded PIDs stay: they no longer run, so the instance reads as stopped, and start makes new ones.
    await stopOwnedProcesses(nodePaths(ctx.workspaceDir, name).dir, [node.launcherPid ?? 0, node.swtpmPid ?? 0]);
  }

  /** The load balancer no longer picks the node; calls it is serving end before it goes, as a cloud LB drains a target. */
  async drain(file: ClusterFile, name: string, cloud: NodeRegistry): Promise<void> {
    await cloud.unregisterNode(name);
    if (file.record.nodes[name].role === 'control-plane') await new Promise((resolve) => setTimeout(resolve, DRAIN_MS));
    await file.update((r) => {
      r.nodes[name].drained = true;
    });
  }

  /** Removes one node: the load balancer stops sending to it first, then its processes, network links and folders go. */
  async remove(file: ClusterFile, name: string, cloud: NodeRegistry, ctx: ProviderContext): Promise<void> {
    const node = file.record.nodes[name];
    if (!node.drained) await this.drain(file, name, cloud);
    await this.destroy(name, [node.launcherPid ?? 0, node.swtpmPid ?? 0], ctx, () =>
      clusterNetwork(file).unplugNode(name, node.host),
    );
    await file.update((r) => {
      delete r.nodes[name];
    });
    await ctx.journal.remove(nodeResourceId(name));
  }

  /**
   * What terminate does to each node it finds (in the cluster file, the journal or the nodes folder): its processes
   * end, its folders and its journal entry go. A name that is no node folder of ours is skipped (the cluster folder
   * goes as a whole after).
   */
  async destroyLeftovers(name: string, pids: number[], ctx: ProviderContext): Promise<void> {
    try {
      nodePaths(ctx.workspaceDir, name);
    } catch {
      return;
    }
    await this.destroy(name, pids, ctx);
    await ctx.journal.remove(nodeResourceId(name));
  }

  /** running (its machine runs), stopped (it ran and was powered off or crashed) or pending (never booted). */
  async state(file: ClusterFile, name: string, ctx: ProviderContext): Promise<InstanceState> {
    const node = file.record.nodes[name];
    if (node.launcherPid === undefined) return 'pending';
    return (await this.machineRuns(node, nodePaths(ctx.workspaceDir, name))) ? 'running' : 'stopped';
  }

  /** Records the node (its folder and PIDs) in the workspace's resource journal, where terminate finds it. */
  async record(file: ClusterFile, name: string, ctx: ProviderContext): Promise<void> {
    const node = file.record.nodes[name];
    await ctx.journal.record({
      kind: 'local:node',
      id: nodeResourceId(name),
      name,
      dependsOn: [CLUSTER_RESOURCE_ID],
      data: { dir: nodePaths(ctx.workspaceDir, name).dir, swtpmPid: node.swtpmPid, launcherPid: node.launcherPid },
    });
  }

  /** Starts the node's TPM unless it runs with its AK read; true when it did (every other process of the node stopped). */
  private async prepareTpm(
    file: ClusterFile,
    name: string,
    ctx: ProviderContext,
    leftovers: () => Promise<Map<string, number[]>>,
  ): Promise<boolean> {
    const node = file.record.nodes[name];
    const np = nodePaths(ctx.workspaceDir, name);
    await this.record(file, name, ctx);
    await fs.mkdir(np.tpmDir, { recursive: true, mode: 0o700 });
    await fs.mkdir(np.stateDisk, { recursive: true, mode: 0o700 });

    const { swtpmPaths } = await import('../../lib/tpm/swtpm.js');
    const sockets = swtpmPaths(np.tpmDir, np.socketDir);
    // A swtpm of an older CLI has its sockets in the TPM folder; the node is started anew with them in the runtime
    // one. A node without its AK never booted: its TPM starts again, and the AK is read then.
    const tpmRuns =
      node.swtpmPid !== undefined && (await isOwnedBy(node.swtpmPid, np.dir)) && (await pathExists(sockets.ctrlSocket));
    if (tpmRuns && node.akPublic !== undefined) return false;
    // A machine without its TPM is useless, and an orphaned swtpm would hold the TPM state. A node of which no process
    // runs (the sweep found none) has nothing to stop; only a mount whose server died may be left.
    if ((await leftovers()).has(np.dir)) await stopOwnedProcesses(np.dir, [node.launcherPid ?? 0, node.swtpmPid ?? 0]);
    else await detachMountsUnder(np.dir);
    const { pid, akPublic } = await this.machine.startTpm(np, { readAk: node.akPublic === undefined });
    await file.update(() => {
      node.swtpmPid = pid;
      node.launcherPid = undefined;
      if (akPublic !== undefined) node.akPublic = akPublic;
    });
    await this.record(file, name, ctx);
    return true;
  }

  private async machineRuns(node: LocalNodeRecord, np: NodePaths): Promise<boolean> {
    return node.launcherPid !== undefined && (await isOwnedBy(node.launcherPid, np.dir));
  }

  private async destroy(
    name: string,
    pids: number[],
    ctx: ProviderContext,
    unplug?: () => Promise<void>,
  ): Promise<void> {
    const np = nodePaths(ctx.workspaceDir, name);
    await stopOwnedProcesses(np.dir, pids);
    await unplug?.();
    await fs.rm(np.dir, { recursive: true, force: true, maxRetries: 5 });
    await fs.rm(np.socketDir, { recursive: true, force: true });
  }
}

/** The node's address; empty while the cluster has no address range yet (create was interrupted before). */
export function addressOf(record: LocalClusterRecord, name: string): string {
  return record.prefix ? nodeAddress(record.prefix, record.nodes[name].host) : '';
}

/** The cluster's network; its id exists once ensureCloud ran (which every operation that boots nodes calls first). */
export function clusterNetwork(file: ClusterFile): ClusterNetwork {
  return new ClusterNetwork(file.record.netId as string);
}
