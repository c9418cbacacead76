/**
 * The compromised-worker attack of issue 20 (item 1; the must-show), on a real local cluster: root on a worker stops
 * the worker's program, takes its TPM and asks the cluster's join service for tickets as that worker (it gets them:
 * it is a worker), lets the worker reboot and rejoin, and then, from the worker's network namespace, while `apply`
 * scales the control planes from 1 to 2 (and the workers from 1 to 2), tries `Init` on the new control plane with
 * every secret-sized value its tickets held and a master secret of its own, and serves a join service of its own on
 * the worker's address (./fixtures/compromised-worker.ts).
 *
 * Before the fix, a ticket carried the init secret: run against that code (commit 379a4af, with the two assertions
 * on the tickets taken out), the attacker found the init secret among its tickets' values by the metadata's hash,
 * initialized control-plane-1 as a cluster of its own, and `apply` ended with "control-plane-1: failed (it belongs
 * to another cluster …)"; with the assertions in, the test fails at "no ticket carries the init secret". Now: no ticket carries the init secret, the new
 * control plane serves no Init (the metadata stopped carrying the init-secret hash at init), every Init the attacker
 * tries fails, no node joins the attacker, and every node proves by attestation (PCR 15) that it belongs to this
 * cluster.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { editConfig } from '../../lib/config/edit.js';
import { readState } from '../../lib/workspace/state.js';
import { nodePaths } from '../../providers/local/layout.js';
import { netnsPath } from '../../providers/local/network.js';
import { nodeArgsFor } from '../../providers/local/processes.js';
import { REPO_ROOT } from '../support/cli.js';
import { cleanUp, clusterNetwork, copyBuiltCli, run, status, tempDir, waitFor, type CliCopy } from './support.js';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'compromised-worker.ts');

type Event = { type: string; [key: string]: unknown };

/** The attacker process, in the worker's network namespace; its events as they come. */
class Attacker {
  readonly events: Event[] = [];
  constructor(readonly child: ChildProcess) {
    readline
      .createInterface({ input: child.stdout! })
      .on('line', (line) => this.events.push(JSON.parse(line) as Event));
  }

  async command(line: string, answer: string, timeoutMs = 60_000): Promise<Event> {
    const before = this.events.length;
    this.child.stdin!.write(`${line}\n`);
    return waitFor(
      `the attacker's answer to "${line.split(' ')[0]}"`,
      async () =>
        this.events.slice(before).find((e) => e.type === answer) ??
        (this.child.exitCode !== null && Promise.reject(new Error('the attacker exited'))),
      timeoutMs,
    );
  }

  stop(): void {
    if (this.child.pid !== undefined && this.child.exitCode === null) process.kill(this.child.pid, 'SIGKILL');
  }
}

async function alive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('e2e: a compromised worker while apply adds a control plane', function () {
  this.timeout(600_000);
  let tmp: string;
  let copy: CliCopy;
  let ws: string;
  let attacker: Attacker | undefined;

  before(async () => {
    tmp = await tempDir('cl-e2e-compromised-');
    copy = await copyBuiltCli(tmp);
    ws = path.join(tmp, 'ws');
    await fs.mkdir(ws);
  });

  after(async () => {
    attacker?.stop();
    if (copy && ws) await cleanUp(copy, ws);
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  it("gains no node, no ticket it can use and no key: the new control plane serves no Init, and every node is this cluster's", async () => {
    assert.equal((await run(copy, ws, ['config', 'generate', 'local'])).code, 0);
    const up = await run(copy, ws, ['apply', '-y']);
    assert.equal(up.code, 0, up.stdout + up.stderr);
    const initSecret = (await readState(ws)).infrastructure.initSecret.toLowerCase();

    // Root on worker-0: its launch config (TPM socket, address, metadata), its disk's UUID (in its log), its namespace.
    const worker = nodePaths(ws, 'worker-0');
    const started = (await fs.readFile(worker.log, 'utf8'))
      .split('\n')
      .find((l) => l.includes('"bootstrapper started"'));
    const diskUuid = (JSON.parse(started!) as { diskUuid: string }).diskUuid;
    const netns = (await clusterNetwork(ws))!.nodeNetns('worker-0');
    attacker = new Attacker(
      spawn(
        'nsenter',
        [`--net=${netnsPath(netns)}`, '--', process.execPath, ...nodeArgsFor(FIXTURE), worker.launchConfig],
        { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'inherit'] },
      ),
    );

    // It stops the worker's program and takes the TPM: the join service gives it what it gives worker-0.
    const launcherPid = Number((await fs.readFile(worker.launcherPid, 'utf8')).trim());
    process.kill(launcherPid, 'SIGKILL');
    await waitFor('the worker program to stop', async () => !(await alive(launcherPid)));
    const tickets = await attacker.command(`tickets ${diskUuid}`, 'tickets');
    assert.deepEqual(
      tickets.got,
      { rejoin: true, join: true },
      'the join service serves the worker (it attests as one)',
    );
    const candidates = tickets.candidates as string[];
    assert.ok(candidates.length > 0);
    const carriesInitSecret = candidates.some(
      (c) => c === initSecret || Buffer.from(c, 'hex').toString() === initSecret,
    );
    assert.equal(carriesInitSecret, false, 'no ticket carries the init secret');
    assert.equal(tickets.matchingHash, 0, 'nothing the worker holds matches the init-secret hash');

    // The worker reboots and rejoins; the attacker stays in its namespace.
    const reboot = await run(copy, ws, ['mini', 'reboot', 'worker-0']);
    assert.equal(reboot.code, 0, reboot.stdout + reboot.stderr);
    await waitFor(
      'worker-0 to rejoin',
      async () => (await status(copy, ws)).find((n) => n.name === 'worker-0')?.state === 'joined',
      120_000,
    );

    const attacking = await attacker.command('attack', 'attacking');
    assert.deepEqual(attacking.known, ['control-plane-0']);
    await editConfig(ws, { initialCounts: { control_plane_default: 2, worker_default: 2 } });
    const scaled = await run(copy, ws, ['apply', '-y']);
    assert.equal(scaled.code, 0, scaled.stdout + scaled.stderr);
    const report = await attacker.command('report', 'report', 120_000);

    // It tried Init on the new control plane with everything it held; none got through.
    const inits = report.inits as { node: string; outcome: string }[];
    assert.ok(
      inits.some((i) => i.node === 'control-plane-1'),
      'the attacker tried Init on the new control plane',
    );
    assert.deepEqual(
      inits.filter((i) => i.outcome === 'initialized'),
      [],
      'no Init succeeded',
    );
    assert.match(await fs.readFile(nodePaths(ws, 'control-plane-1').log, 'utf8'), /this node serves no Init/);

    // No node asked the attacker's join service; every node joined this cluster and proves it (PCR 15).
    assert.deepEqual(
      (report.joinServiceLog as string[]).filter((l) => l.includes('ticket issued')),
      [],
    );
    const nodes = await status(copy, ws);
    assert.deepEqual(
      nodes.map((n) => [n.name, n.state]),
      [
        ['control-plane-0', 'joined'],
        ['control-plane-1', 'joined'],
        ['worker-0', 'joined'],
        ['worker-1', 'joined'],
      ],
    );
    const verified = await run(copy, ws, ['verify', '--all']);
    assert.equal(
      verified.code,
      0,
      `every node proves it belongs to this cluster: ${verified.stdout}${verified.stderr}`,
    );
    attacker.child.stdin!.write('stop\n');
  });
});
