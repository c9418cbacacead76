/**
 * Cloud in a box: what plays the hypervisor for the instances a cloud's fake launches. For each instance it
 * boots a node: a swtpm as its vTPM (provisioned as that cloud provisions it), a sparse state-disk file, the
 * stand-in kubeadm, and the node program (./node-program.ts) in its own process on the instance's loopback
 * address; a TCP load balancer on the cluster endpoint forwards the control plane's ports. Everything is stopped
 * by PID and removed at the end.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TpmClient } from '../../../lib/tpm/client.js';
import { startSwtpm, type SwtpmHandle } from '../../../lib/tpm/swtpm.js';
import { startLoadBalancer, type LoadBalancer } from '../../../providers/local/load-balancer.js';
import { installStandinKubeadm } from '../../bootstrapper/kubernetes/standin-kubeadm.js';
import { REPO_ROOT } from '../../support/cli.js';
import type { BoxNodeConfig } from './node-program.js';
import { extendBootPcrs } from '../../support/image-measurements.js';
import { pollUntil } from '../../../lib/poll.js';

const NODE_PROGRAM = path.join(path.dirname(fileURLToPath(import.meta.url)), 'node-program.ts');
export const CONTROL_PLANE_PORTS = [6443, 9000, 30090, 30081, 9999] as const;

export interface BoxInstance {
  id: string;
  ip: string;
  role: 'control-plane' | 'worker';
}

export interface BoxNode {
  instance: BoxInstance;
  dir: string;
  stateDisk: string;
  output(): string;
  exited: Promise<number | null>;
}

interface Running extends BoxNode {
  child: ChildProcess;
  swtpm: SwtpmHandle;
}

export type NodeSettings = Omit<BoxNodeConfig, 'paths' | 'kubeadm'> & {
  /** What the cloud puts into a VM's vTPM before it boots (GCE's AK template, Azure's paravisor AK and report). */
  provision?: (tpm: TpmClient) => Promise<void>;
  /** The node process' environment on top of this one (where the VM's default credentials come from). */
  env?: Record<string, string>;
};

export class CloudBox {
  private readonly nodes = new Map<string, Running>();
  private lb?: LoadBalancer;

  constructor(readonly root: string) {}

  get booted(): BoxNode[] {
    return [...this.nodes.values()];
  }

  async boot(instance: BoxInstance, settings: NodeSettings): Promise<BoxNode> {
    const dir = path.join(this.root, instance.id);
    await fs.mkdir(dir, { recursive: true });
    const swtpm = await startSwtpm({ stateDir: path.join(dir, 'tpm') });
    try {
      // The node image's measured boot: firmware, systemd-stub and the kernel extend PCR 4, 9 and 11 before the node program runs.
      const booted = await TpmClient.connect(swtpm.serverSocket);
      try {
        await extendBootPcrs(booted);
      } finally {
        booted.close();
      }
      if (settings.provision) {
        const tpm = await TpmClient.connect(swtpm.serverSocket);
        try {
          await settings.provision(tpm);
        } finally {
          tpm.close();
        }
      }
      const stateDisk = path.join(dir, 'state-disk.img');
      await fs.writeFile(stateDisk, '');
      await fs.truncate(stateDisk, 32 * 1024 * 1024);
      const standin = await installStandinKubeadm(path.join(dir, 'kubeadm'));
      const { provision: _, env, ...rest } = settings;
      const config: BoxNodeConfig = {
        kubernetesBackend: 'none',
        ...rest,
        paths: {
          tpm: swtpm.serverSocket,
          nodeDir: path.join(dir, 'node'),
          stateDisk,
          stateDir: path.join(dir, 'state'),
        },
        kubeadm: { pkiDir: standin.pkiDir, adminConf: standin.adminConf, env: standin.env as Record<string, string> },
      };
      const configFile = path.join(dir, 'node.json');
      await fs.writeFile(configFile, JSON.stringify(config));
      const child = spawn(process.execPath, ['--import', 'tsx', NODE_PROGRAM, configFile], {
        cwd: REPO_ROOT,
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const node: Running = { instance, dir, stateDisk, output: () => output, exited, child, swtpm };
      this.nodes.set(instance.id, node);
      return node;
    } catch (err) {
      await swtpm.stop();
      throw err;
    }
  }

  /** Waits until the node logged a line with `msg` (JSON log lines); fails when it exits first or after `timeoutMs`. */
  async waitForLog(node: BoxNode, msg: string, timeoutMs = 60_000): Promise<void> {
    const running = this.nodes.get(node.instance.id);
    await pollUntil(
      () => {
        if (node.output().includes(`"msg":"${msg}"`)) return true;
        if (running?.child.exitCode !== null && running?.child.exitCode !== undefined)
          throw new Error(`node ${node.instance.id} exited:\n${node.output()}`);
        return undefined;
      },
      {
        timeoutMs,
        intervalMs: 100,
        onTimeout: () => {
          throw new Error(`node ${node.instance.id} did not log "${msg}" within ${timeoutMs} ms:\n${node.output()}`);
        },
      },
    );
  }

  /**
   * The load balancer in front of the control plane, on the cluster endpoint: by default every booted control plane;
   * `targets` (the cloud's own view: which instances its load balancer sends new connections to) narrows that.
   */
  async startLoadBalancer(host: string, targets?: () => string[]): Promise<void> {
    this.lb = await startLoadBalancer({
      host,
      ports: CONTROL_PLANE_PORTS,
      backends: () => {
        const wanted = targets ? new Set(targets()) : undefined;
        return this.booted
          .filter((n) => n.instance.role === 'control-plane' && (!wanted || wanted.has(n.instance.id)))
          .map((n) => n.instance.ip);
      },
      healthCheckIntervalMs: 100,
    });
  }

  /** Whether an instance's node was booted here (and not stopped since). */
  has(id: string): boolean {
    return this.nodes.has(id);
  }

  /** Powers a node off (the cloud terminated its instance). */
  async stop(id: string): Promise<void> {
    const node = this.nodes.get(id);
    if (!node) return;
    this.nodes.delete(id);
    if (node.child.exitCode === null) {
      node.child.kill('SIGTERM');
      const timer = setTimeout(() => node.child.kill('SIGKILL'), 5000);
      await node.exited;
      clearTimeout(timer);
    }
    await node.swtpm.stop();
  }

  async close(): Promise<void> {
    for (const id of [...this.nodes.keys()]) await this.stop(id);
    await this.lb?.close();
    this.lb = undefined;
  }
}
