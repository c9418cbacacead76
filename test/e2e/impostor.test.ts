/**
 * Join-service impersonation on a real local cluster (issue 13, item 1; the must-show): an unprivileged local user
 * (`nobody`) runs an impostor (./fixtures/impostor.ts) that tries to take every address a node of a local cluster
 * could get, before and while the cluster comes up, on every port of a node and of the gateway, and serves a fake
 * join service that accepts any node and seals it a made-up ticket. Against `mini up` and against `create` + `init`:
 * the impostor gets none of the cluster's addresses, nothing reaches it (so no node joins it and no secret is sealed
 * to it), and the cluster comes up, every node proving by attestation that it belongs to this cluster.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { readState } from '../../lib/workspace/state.js';
import { LOAD_BALANCER_PORTS, METADATA_PORT, nodePaths } from '../../providers/local/layout.js';
import { DEFAULT_ADDRESS_POOL, parseAddressPool } from '../../providers/local/network.js';
import { nodeArgsFor } from '../../providers/local/processes.js';
import { REPO_ROOT } from '../support/cli.js';
import { NOBODY } from '../providers/local/support.js';
import { cleanUp, copyBuiltCli, run, status, tempDir, waitFor, type CliCopy } from './support.js';

const IMPOSTOR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'impostor.ts');
const PORTS = [METADATA_PORT, ...LOAD_BALANCER_PORTS];

interface Report {
  type: 'report';
  attempts: number;
  passes: Record<string, number>;
  bound: string[];
  outcomes: Record<string, string>;
}
type Event = { type: 'ready' | 'bound' | 'connection' | 'log'; [key: string]: unknown } | Report;

/** The impostor process, run as nobody; its events as they come. */
class Impostor {
  readonly events: Event[] = [];
  private constructor(private readonly child: ChildProcess) {
    readline
      .createInterface({ input: child.stdout! })
      .on('line', (line) => this.events.push(JSON.parse(line) as Event));
  }

  static async start(pool: string): Promise<Impostor> {
    const child = spawn(process.execPath, [...nodeArgsFor(IMPOSTOR), pool], {
      uid: NOBODY,
      gid: NOBODY,
      cwd: REPO_ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const impostor = new Impostor(child);
    await waitFor(
      'the impostor to try the whole pool',
      async () =>
        impostor.events.some((e) => e.type === 'ready') ||
        (child.exitCode !== null && Promise.reject(new Error('the impostor exited'))),
    );
    return impostor;
  }

  /** Its report after one more pass over every range the machine routes now. */
  async report(): Promise<Report> {
    const before = this.events.length;
    this.child.stdin!.write('report\n');
    return waitFor("the impostor's report", async () =>
      this.events.slice(before).find((e): e is Report => e.type === 'report'),
    );
  }

  /** What reached its listeners: connections, and every line of its fake join service but "listening". */
  reached(): Event[] {
    return this.events.filter(
      (e) => e.type === 'connection' || (e.type === 'log' && !String(e.line).includes('"join service listening"')),
    );
  }

  stop(): void {
    if (this.child.pid !== undefined && this.child.exitCode === null) process.kill(this.child.pid, 'SIGKILL');
  }
}

describe('e2e: a local user (nobody) impersonating the join service of a local cluster', function () {
  this.timeout(240_000);
  const pool = process.env.CONSTELLATION_LOCAL_ADDRESS_POOL || DEFAULT_ADDRESS_POOL;
  let tmp: string;
  let copy: CliCopy;
  let impostor: Impostor;
  const workspaces: string[] = [];

  before(async () => {
    tmp = await tempDir('cl-e2e-impostor-');
    copy = await copyBuiltCli(tmp);
    impostor = await Impostor.start(pool);
    const first = await impostor.report();
    assert.equal(
      first.attempts >= 254 * 2 ** (24 - parseAddressPool(pool).bits),
      true,
      'it tried every address of the pool',
    );
  });

  after(async () => {
    impostor?.stop();
    for (const ws of workspaces) await cleanUp(copy, ws);
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  async function workspace(name: string): Promise<string> {
    const ws = path.join(tmp, name);
    await fs.mkdir(ws);
    workspaces.push(ws);
    return ws;
  }

  /** The three claims of the must-show, for the cluster of `ws` (up, as the caller waited for). */
  async function assertImpostorGotNothing(ws: string, nodeCount: number): Promise<void> {
    const nodes = await status(copy, ws);
    assert.deepEqual(
      nodes.map((n) => n.state),
      Array(nodeCount).fill('joined'),
      `every node joined: ${JSON.stringify(nodes)}`,
    );
    const verified = await run(copy, ws, ['verify', '--all']);
    assert.equal(
      verified.code,
      0,
      `every node proves it belongs to this cluster (PCR 15): ${verified.stdout}${verified.stderr}`,
    );

    const gateway = (await readState(ws)).infrastructure.clusterEndpoint;
    const prefix = gateway.slice(0, gateway.lastIndexOf('.'));
    const report = await impostor.report();
    assert.ok(
      (report.passes[prefix] ?? 0) >= 1,
      `the impostor went over the cluster's range ${prefix}.0/24 while the cluster ran`,
    );
    // It tried each of the cluster's addresses, on every port, and got none.
    for (const address of [gateway, ...nodes.map((n) => n.address)]) {
      for (const port of PORTS)
        assert.equal(report.outcomes[`${address}:${port}`], 'EADDRNOTAVAIL', `${address}:${port}`);
    }
    // All it ever got is this machine's own address in a range (<prefix>.2), which nothing connects to.
    for (const where of report.bound) assert.match(where, /^\d+\.\d+\.\d+\.2:\d+$/);
    // Nothing reached it: no node asked it for a ticket, it sealed nothing, no CLI connected.
    assert.deepEqual(impostor.reached(), []);
    for (const n of nodes) {
      assert.doesNotMatch(
        await fs.readFile(nodePaths(ws, n.name).log, 'utf8'),
        /ticket not used/,
        `${n.name} never got a ticket from anyone but its cluster`,
      );
    }
  }

  it('mini up: the impostor gets no address of the cluster, nothing reaches it, and the cluster comes up', async () => {
    const ws = await workspace('mini');
    const up = await run(copy, ws, ['mini', 'up', '-w', '2']);
    assert.equal(up.code, 0, `${up.stdout}\n${up.stderr}`);
    assert.match(up.stdout, /is up: 3 nodes joined/);
    await assertImpostorGotNothing(ws, 3);
  });

  it('create + init: the impostor gets no address of the cluster, nothing reaches it, and the cluster comes up', async () => {
    const ws = await workspace('create-init');
    assert.equal((await run(copy, ws, ['config', 'generate', 'local'])).code, 0);
    const created = await run(copy, ws, ['create', '-y']);
    assert.equal(created.code, 0, created.stderr);
    const init = await run(copy, ws, ['init']);
    assert.equal(init.code, 0, `${init.stdout}\n${init.stderr}`);
    await waitFor(
      'every node to join',
      async () => (await status(copy, ws)).every((n) => n.state === 'joined'),
      120_000,
    );
    await assertImpostorGotNothing(ws, 2); // the default config: 1 control plane, 1 worker
  });
});
