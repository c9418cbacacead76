/**
 * `mini logs` (cli/cluster/mini-logs.ts) on a workspace with a cluster record and node folders as `mini up` and
 * `mini up --vm` leave them: the node program's lines by default, the whole console with --boot (the event-log dump
 * shortened), lines appended while following, and an unknown node named with the known ones.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { miniLogs } from '../../cli/cluster/mini-logs.js';
import { UserError } from '../../lib/errors.js';
import { ClusterFile } from '../../providers/local/cluster-file.js';
import { clusterPaths, nodePaths } from '../../providers/local/layout.js';

const PROGRAM_LINE = '{"time":"2026-11-26T18:00:00.000Z","level":"info","msg":"bootstrapper started"}';
const VM_CONSOLE = [
  'BdsDxe: loading Boot0001 "UEFI Misc Device" from PciRoot(0x0)/Pci(0x3,0x0)',
  '[    1.234567] Linux version 6.1.0-56-cloud-amd64',
  'CONSTELLATION-BOOT pcr-sha256 4 ' + 'ab'.repeat(32),
  'CONSTELLATION-BOOT eventlog AAAA',
  'CONSTELLATION-BOOT eventlog BBBB',
  'CONSTELLATION-BOOT end',
  `${PROGRAM_LINE}\r`,
  `[   20.000000] random: crng init done${PROGRAM_LINE.replace('bootstrapper started', 'state disk formatted')}`,
].join('\n');

describe('mini logs', () => {
  let ws: string;
  const lines = async (options: { node: string; boot?: boolean }) => {
    const out: string[] = [];
    await miniLogs({ workspaceDir: ws, ...options, write: (l) => out.push(l) });
    return out;
  };

  beforeEach(async () => {
    ws = await fs.mkdtemp(path.join(os.tmpdir(), 'mini-logs-'));
    const node = (host: number) => ({ group: 'worker_default', role: 'worker' as const, host });
    await fs.mkdir(clusterPaths(ws).dir, { recursive: true });
    await ClusterFile.create(clusterPaths(ws), {
      version: 1,
      uid: 'u',
      name: 'mini',
      metadataPort: 8080,
      initSecretHash: '',
      joinServiceKey: '',
      initialized: true,
      kubernetesBackend: 'none',
      nodeGroups: {},
      nextNodeIndex: {},
      nodes: { 'control-plane-0': node(10), 'worker-0': node(100) },
    });
    for (const [name, text] of [
      ['control-plane-0', `${VM_CONSOLE}\n`],
      ['worker-0', `2026-11-26T18:00:00Z launcher: booting worker-0\n${PROGRAM_LINE}\n`],
    ]) {
      await fs.mkdir(nodePaths(ws, name!).dir, { recursive: true });
      await fs.writeFile(nodePaths(ws, name!).log, text!);
    }
  });
  afterEach(async () => {
    await fs.rm(ws, { recursive: true, force: true });
  });

  it("prints the node program's log lines of a VM's serial console and of a process node", async () => {
    assert.deepEqual(await lines({ node: 'control-plane-0' }), [
      PROGRAM_LINE,
      PROGRAM_LINE.replace('bootstrapper started', 'state disk formatted'),
    ]);
    assert.deepEqual(await lines({ node: 'worker-0' }), [PROGRAM_LINE]);
  });

  it('--boot prints the whole console, the event-log dump as one line', async () => {
    const out = await lines({ node: 'control-plane-0', boot: true });
    assert.equal(out.length, 7);
    assert.match(out[0]!, /^BdsDxe/);
    assert.equal(out[3], "CONSTELLATION-BOOT eventlog (2 lines of base64: the firmware's TPM event log)");
    assert.equal(out[4], 'CONSTELLATION-BOOT end');
    assert.equal(out[5], PROGRAM_LINE, 'no carriage return');
    assert.deepEqual(await lines({ node: 'worker-0', boot: true }), [
      '2026-11-26T18:00:00Z launcher: booting worker-0',
      PROGRAM_LINE,
    ]);
  });

  it('-f prints lines appended later (a partial line once it ends) until stopped', async () => {
    const out: string[] = [];
    const stop = new AbortController();
    const following = miniLogs({
      workspaceDir: ws,
      node: 'worker-0',
      follow: true,
      signal: stop.signal,
      pollMs: 20,
      write: (l) => out.push(l),
    });
    const log = nodePaths(ws, 'worker-0').log;
    await new Promise((r) => setTimeout(r, 60));
    await fs.appendFile(log, '{"time":"2026-11-26T18:01:00.000Z","msg":"joi');
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(out.length, 1, 'a partial line waits');
    await fs.appendFile(log, 'ned"}\n');
    for (let i = 0; i < 100 && out.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    stop.abort();
    await following;
    assert.deepEqual(out, [PROGRAM_LINE, '{"time":"2026-11-26T18:01:00.000Z","msg":"joined"}']);
  });

  it('an unknown node is refused naming the known ones; a workspace without a cluster says so', async () => {
    await assert.rejects(
      lines({ node: 'worker-7' }),
      (err: Error) =>
        err instanceof UserError &&
        /no node "worker-7"/.test(err.message) &&
        /control-plane-0, worker-0/.test(err.hint ?? ''),
    );
    await fs.rm(clusterPaths(ws).dir, { recursive: true });
    await assert.rejects(lines({ node: 'worker-0' }), /no local or VM cluster/);
  });
});
