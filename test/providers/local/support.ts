/** Test helpers for the local provider: a workspace with a file journal, a quiet context, polling HTTP, cleanup. */
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
  return { journal: new FileResourceJournal(workspaceDir), log: { debug: quiet, info: quiet, warn: quiet }, workspaceDir };
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
    tags: {},
    providerConfig: {},
    ...overrides,
  };
}

/** GET returning parsed JSON (status and body), optionally from a given source address. */
export function getJson(url: string, localAddress?: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { localAddress, agent: false, timeout: 10_000 }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') }));
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
