/**
 * A CLI process killed in the middle of `create` leaves a workspace from which create continues or terminate
 * cleans up: no process, network namespace, link or folder left behind, even for processes the killed CLI never got
 * to record.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ClusterFile } from '../../../providers/local/cluster-file.js';
import { LocalInfrastructure } from '../../../providers/local/infrastructure.js';
import { clusterPaths } from '../../../providers/local/layout.js';
import { ClusterNetwork, rangeLink } from '../../../providers/local/network.js';
import { findOwnedProcesses, isAlive, nodeArgsFor } from '../../../providers/local/processes.js';
import { makeImage, type TestImage } from './fixtures/image.js';
import { createRequest, killLeftovers, rootLinkExists, tempDir, testContext, waitForJson } from './support.js';

const CREATE_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'create-cluster.ts');

/** Runs create in a child process and SIGKILLs it as soon as it prints a progress line matching `killAt`. */
function createAndKill(ws: string, image: TestImage, killAt: RegExp): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgsFor(CREATE_SCRIPT), ws, image.entry, image.imageDir], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: string[] = [];
    let buffered = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop() ?? '';
      for (const line of parts) {
        lines.push(line);
        if (killAt.test(line)) child.kill('SIGKILL');
      }
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolve(lines);
      else reject(new Error(`create ended (${code}) before it reached ${killAt}: ${lines.join(' | ')}`));
    });
  });
}

describe('local provider: a CLI killed during create', function () {
  this.timeout(60_000);
  let tmp: string;
  let image: TestImage;
  let infra: LocalInfrastructure;
  const workspaces: string[] = [];
  let made = 0;

  async function workspace(): Promise<string> {
    const ws = path.join(tmp, `ws${made++}`);
    await fs.mkdir(ws);
    workspaces.push(ws);
    return ws;
  }

  before(async () => {
    tmp = await tempDir('cl-local-kill-');
    image = await makeImage(path.join(tmp, 'image'));
    infra = new LocalInfrastructure({ nodeProgram: { entry: image.entry, imageDir: image.imageDir } });
  });

  afterEach(async () => {
    for (const ws of workspaces.splice(0)) {
      await infra.terminate(testContext(ws)).catch(() => undefined);
      await killLeftovers(ws);
    }
  });

  after(async () => {
    await fs.rm(tmp, { recursive: true, force: true });
  });

  /** What the killed run made of the cluster's network, as recorded (the id exists from the record's start). */
  async function networkOf(ws: string): Promise<{ network: ClusterNetwork; prefix?: string }> {
    const { record } = (await ClusterFile.load(clusterPaths(ws))) as ClusterFile;
    return { network: new ClusterNetwork(record.netId as string), prefix: record.prefix };
  }

  for (const [when, killAt] of [
    ['while the network is made', /^starting \d+ nodes/],
    ['while the cloud daemon and TPMs start', /starting metadata server/],
  ] as const) {
    it(`terminate after a kill ${when} removes everything`, async () => {
      const ws = await workspace();
      await createAndKill(ws, image, killAt);
      const { network, prefix } = await networkOf(ws);
      const ctx = testContext(ws);
      await infra.terminate(ctx);
      assert.deepEqual(await findOwnedProcesses(clusterPaths(ws).dir), []);
      await assert.rejects(fs.stat(clusterPaths(ws).dir), { code: 'ENOENT' });
      assert.deepEqual(await network.namespaces(), []);
      if (prefix) assert.equal(await rootLinkExists(rangeLink(prefix)), false, 'the range is free again');
      assert.deepEqual(await ctx.journal.list(), []);
    });
  }

  it('create after a kill while nodes boot continues to a running cluster, and terminate removes it', async () => {
    const ws = await workspace();
    await createAndKill(ws, image, /^booting /);
    const ctx = testContext(ws);
    await infra.create(createRequest(), ctx);
    const instances = await infra.listInstances(ctx);
    assert.deepEqual(
      instances.map((i) => [i.name, i.state]),
      [
        ['control-plane-0', 'running'],
        ['worker-0', 'running'],
        ['worker-1', 'running'],
      ],
    );
    const expected = await infra.expectedMeasurements();
    for (const instance of instances) {
      const node = await waitForJson<{ pcrs: { sha256: Record<string, string> } }>(
        `http://${instance.privateIp}:9000/info`,
      );
      assert.equal(node.pcrs.sha256['9'], expected['9'].expected, `${instance.name} measured once after its (re)boot`);
    }
    const pids = await findOwnedProcesses(clusterPaths(ws).dir);
    const cmdlines = await Promise.all(pids.map((pid) => fs.readFile(`/proc/${pid}/cmdline`, 'utf8')));
    const count = (what: string) => cmdlines.filter((c) => c.includes(what)).length;
    // One cloud daemon, and per node one swtpm and one launcher (which runs the node program): nothing doubled.
    assert.deepEqual([count('cloud-daemon'), count('swtpm\0socket'), count('launcher')], [1, 3, 3]);
    const { network, prefix } = await networkOf(ws);
    assert.equal((await network.namespaces()).length, 4, "one namespace per node and the gateway's, none doubled");
    await infra.terminate(ctx);
    for (const pid of pids) assert.equal(await isAlive(pid), false);
    await assert.rejects(fs.stat(clusterPaths(ws).dir), { code: 'ENOENT' });
    assert.deepEqual(await network.namespaces(), []);
    assert.equal(await rootLinkExists(rangeLink(prefix as string)), false);
  });
});
