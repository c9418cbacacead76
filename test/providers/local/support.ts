/** Test helpers for the local provider: a workspace with a file journal, a quiet context, polling HTTP, cleanup. */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { FileResourceJournal } from '../../../lib/workspace/resource-journal.js';
import type { CreateRequest, ProviderContext } from '../../../providers/contract.js';
import { clusterPaths } from '../../../providers/local/layout.js';
import { findOwnedProcesses } from '../../../providers/local/processes.js';

export async function tempDir(prefix: string): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), prefix));
}

export function testContext(workspaceDir: string): ProviderContext & { journal: FileResourceJournal } {
  const quiet = () => {};
  return {
    journal: new FileResourceJournal(workspaceDir),
    log: { debug: quiet, info: quiet, warn: quiet },
    workspaceDir,
  };
}

export function createRequest(overrides: Partial<CreateRequest> = {}): CreateRequest {
  const group = (name: string, role: 'control-plane' | 'worker', initialCount: number) => ({
    name,
    role,
    zone: 'local',
    instanceType: 'process',
    stateDiskSizeGB: 1,
    stateDiskType: 'file',
    initialCount,
  });
  return {
    uid: 'a1b2c3d4',
    name: 'test',
    image: 'local',
    kubernetesVersion: 'v1.31.0',
    attestationVariant: 'local-vtpm',
    nodeGroups: [group('control_plane_default', 'control-plane', 1), group('worker_default', 'worker', 2)],
    initSecretHash: '$2a$10$abcdefghijklmnopqrstuu4Dx2q4pU8I3ArFZ2S4GlQfQ6hFfzn2S',
    joinServiceKey: Buffer.alloc(32, 7).toString('base64'),
    tags: {},
    providerConfig: {},
    ...overrides,
  };
}

/**
 * Loopback prefixes 127.0.N (N = 2..254) from a random start: for tests that run the metadata server or the load
 * balancer in-process, on addresses of the root namespace (clusters themselves live in network namespaces).
 */
export function loopbackPrefixes(random: () => number = Math.random): string[] {
  const start = Math.floor(random() * 253);
  return Array.from({ length: 253 }, (_, i) => `127.0.${2 + ((start + i) % 253)}`);
}

/** GET returning parsed JSON (status and body), optionally from a given source address. */
export function getJson(url: string, localAddress?: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { localAddress, agent: false, timeout: 10_000 }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') }),
        );
      })
      .on('error', reject);
  });
}

/** Waits until a node program answers (it starts a moment after the launcher reported it started). */
export async function waitForJson<T>(url: string): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      const { status, body } = await getJson(url);
      if (status === 200) return body as T;
      if (attempt > 300) throw new Error(`${url}: HTTP ${status} ${JSON.stringify(body)}`);
    } catch (err) {
      if (attempt > 300) throw err;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Last resort after a failed test: kill whatever still carries the workspace's owner mark, then remove the folder. */
export async function killLeftovers(workspaceDir: string): Promise<number[]> {
  const left = await findOwnedProcesses(clusterPaths(workspaceDir).dir);
  for (const pid of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  return left;
}

/** The uid and gid of `nobody` (Debian): an unprivileged local user. */
export const NOBODY = 65534;

/**
 * Tries, as the unprivileged user `nobody`, to listen on each address and port; resolves with "bound" or the error
 * code (EADDRNOTAVAIL: the address is not one of the root network namespace's) per "address:port".
 */
export function bindAsNobody(addresses: string[], ports: number[]): Promise<Record<string, string>> {
  const script = `
    const net = require('node:net');
    const tryBind = (host, port) => new Promise((resolve) => {
      const server = net.createServer();
      server.once('error', (err) => resolve(err.code));
      server.listen(port, host, () => server.close(() => resolve('bound')));
    });
    (async () => {
      const result = {};
      for (const host of ${JSON.stringify(addresses)}) for (const port of ${JSON.stringify(ports)}) result[host + ':' + port] = await tryBind(host, port);
      process.stdout.write(JSON.stringify({ uid: process.getuid(), result }));
    })();`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script], { uid: NOBODY, gid: NOBODY, cwd: '/' }, (err, stdout) => {
      if (err) return reject(err);
      const { uid, result } = JSON.parse(stdout) as { uid: number; result: Record<string, string> };
      if (uid !== NOBODY) return reject(new Error(`the probe ran as uid ${uid}, not nobody`));
      resolve(result);
    });
  });
}

/** The named network namespace a process is in ("cst-…"), or "root" for this process's, or its nsfs inode. */
export async function netnsOf(pid: number): Promise<string> {
  const inode = (await fs.readlink(`/proc/${pid}/ns/net`)).replace(/^net:\[(\d+)\]$/, '$1');
  if (inode === (await fs.readlink('/proc/self/ns/net')).replace(/^net:\[(\d+)\]$/, '$1')) return 'root';
  for (const name of await fs.readdir('/run/netns').catch(() => [] as string[])) {
    if (String((await fs.stat(`/run/netns/${name}`)).ino) === inode) return name;
  }
  return inode;
}

/** Whether a link of this name exists in the root network namespace. */
export function rootLinkExists(name: string): Promise<boolean> {
  return fs.access(`/sys/class/net/${name}`).then(
    () => true,
    () => false,
  );
}
