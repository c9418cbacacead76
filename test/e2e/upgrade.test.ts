/**
 * Rolling upgrades on a real local cluster (3 control planes + 2 workers; the built CLI's private copy, whose dist/
 * is the node image). "v2" is a changed build (one byte of the image), whose measurements the config gets; a
 * "tampered" v2 is a build that differs from the one the config's measurements describe.
 *   1. a tampered replacement stops the rollout naming the PCR; the old nodes stay and serve; --rollback cleans up
 *   2. the real rollout, killed (SIGKILL) after its first replacement and run again: every node replaced, nothing
 *      lost, etcd 3 of 3, verify --all; all along a probe asks the load balancer every 100 ms (status and the
 *      verify service) and sees no failure, and a node joining mid-rollout gets its ticket.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { editConfig } from '../../cli/cluster/config-edit.js';
import { getNodeStatus } from '../../cli/cluster/status.js';
import { UPGRADE_JOURNAL_FILE } from '../../cli/cluster/upgrade.js';
import { loadConfig, measurementsOf } from '../../lib/config/index.js';
import { LocalInfrastructure } from '../../providers/local/infrastructure.js';
import { cleanUp, copyBuiltCli, run, start, startProbeNode, status, tempDir, waitFor, type CliCopy } from './support.js';

/** Asks the load balancer every 100 ms for a status and an attestation document; counts the calls that fail. */
function startProbe(lb: string): { stop(): Promise<{ calls: number; failures: string[] }> } {
  let running = true;
  let calls = 0;
  const failures: string[] = [];
  const loop = (async () => {
    const [{ VerifyClient }, atls, { randomBytes }] = await Promise.all([
      import('../../proto/gen/constellation/verify.js'),
      import('../../lib/atls/index.js'),
      import('node:crypto'),
    ]);
    while (running) {
      const started = Date.now();
      calls++;
      try {
        await getNodeStatus(`${lb}:30081`, 2000);
        const client = new VerifyClient(`${lb}:30081`, await atls.createAttestedClientCredentials(), { ...atls.attestedChannelOptions, 'grpc.use_local_subchannel_pool': 1 });
        try {
          await new Promise<void>((resolve, reject) =>
            client.getAttestation({ nonce: randomBytes(32) }, (err, res) => (err ? reject(err) : res.document.length > 0 ? resolve() : reject(new Error('empty document')))),
          );
        } finally {
          client.close();
        }
      } catch (err) {
        failures.push(`${new Date().toISOString()} ${(err as Error).message}`);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 100 - (Date.now() - started))));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { calls, failures };
    },
  };
}

describe('e2e: rolling upgrade of 3 control planes + 2 workers', function () {
  this.timeout(600_000);
  let tmp: string;
  let copy: CliCopy;
  let ws: string;
  let original: Buffer;
  const imageFile = () => path.join(copy.imageDir, 'bootstrapper', 'node-status.d.ts');
  const infra = () => new LocalInfrastructure({ nodeProgram: { entry: path.join(copy.imageDir, 'bootstrapper', 'main.js'), imageDir: copy.imageDir } });

  before(async () => {
    tmp = await tempDir('cl-upgrade-');
    copy = await copyBuiltCli(tmp);
    ws = path.join(tmp, 'ws');
    await fs.mkdir(ws);
    const res = await run(copy, ws, ['mini', 'up', '-c', '3', '-w', '2']);
    assert.equal(res.code, 0, `${res.stdout}\n${res.stderr}`);
    original = await fs.readFile(imageFile());
  });

  after(async () => {
    if (copy && ws) await cleanUp(copy, ws);
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  it('a replacement from a tampered image stops the rollout naming the PCR; the old nodes stay and serve; --rollback removes what was added', async () => {
    // The config describes v2; the image the new nodes boot is not v2.
    await fs.writeFile(imageFile(), Buffer.concat([original, Buffer.from('// v2\n')]));
    await editConfig(ws, { measurements: await infra().expectedMeasurements() });
    await fs.writeFile(imageFile(), Buffer.concat([original, Buffer.from('// tampered\n')]));
    const before = (await status(copy, ws)).map((n) => n.name);

    const res = await run(copy, ws, ['upgrade', 'apply', '-y']);
    assert.equal(res.code, 3, res.stdout + res.stderr);
    assert.match(res.stderr, /The replacement control-plane-3 of control-plane-0 was refused: [\s\S]*PCR 9: expected [0-9a-f]{64}, got [0-9a-f]{64}/);
    const during = await status(copy, ws);
    for (const name of before) assert.equal(during.find((n) => n.name === name)?.state, 'joined', `${name} stays and serves`);
    // The cluster keeps serving joins of v1 nodes: a v1 worker reboots and rejoins.
    await fs.writeFile(imageFile(), original);
    assert.equal((await run(copy, ws, ['mini', 'reboot', 'worker-0'])).code, 0);
    await waitFor('worker-0 (v1) to rejoin', async () => (await status(copy, ws)).find((n) => n.name === 'worker-0')?.state === 'joined', 60_000);

    const rollback = await run(copy, ws, ['upgrade', 'apply', '--rollback']);
    assert.equal(rollback.code, 0, rollback.stdout + rollback.stderr);
    assert.match(rollback.stdout, /removed control-plane-3, which the upgrade added to replace control-plane-0/);
    assert.deepEqual((await status(copy, ws)).map((n) => n.name), before);
    await assert.rejects(fs.stat(path.join(ws, UPGRADE_JOURNAL_FILE)), { code: 'ENOENT' });
  });

  it('rolls every node to v2 with no failed probe, continues after a SIGKILL, lets a node join mid-rollout, and ends with etcd 3 of 3', async () => {
    await fs.writeFile(imageFile(), Buffer.concat([original, Buffer.from('// v2\n')]));
    await editConfig(ws, { measurements: await infra().expectedMeasurements() });
    const lb = (await import('../../lib/workspace/state.js')).readState(ws).then((s) => s.infrastructure.clusterEndpoint);
    const probe = startProbe(await lb);
    try {
      // First run: killed once the first replacement is done.
      const first = start(copy, ws, ['upgrade', 'apply', '-y']);
      await waitFor('the first replacement', async () => {
        const journal = await fs.readFile(path.join(ws, UPGRADE_JOURNAL_FILE), 'utf8').catch(() => '');
        return journal.includes('"done": true');
      }, 180_000);
      first.kill('SIGKILL');
      await new Promise((resolve) => first.once('exit', resolve));
      // No node was lost: five joined (old ones not yet replaced, and the first replacement); at most one more is
      // on its way (the second replacement, which the kill interrupted).
      const mid = await status(copy, ws);
      assert.equal(mid.filter((n) => n.state === 'joined').length, 5, JSON.stringify(mid.map((n) => [n.name, n.state])));

      // Mid-rollout (old and new nodes, both measurement sets accepted): a node of the new image joins.
      const node = await startProbeNode(ws, { imageDir: copy.imageDir, entry: path.join(copy.imageDir, 'bootstrapper', 'main.js') }, 'joiner-0', path.join(tmp, 'joiner-tpm'));
      try {
        const second = run(copy, ws, ['upgrade', 'apply', '-y']);
        const joined = await node.join(`${await lb}:30090`);
        assert.equal(joined.error, undefined, 'a node joining mid-rollout gets its ticket');
        const res = await second;
        assert.equal(res.code, 0, res.stdout + res.stderr);
        assert.match(res.stdout, /continuing the upgrade/);
      } finally {
        await node.close();
      }
    } finally {
      const { calls, failures } = await probe.stop();
      assert.deepEqual(failures, [], `${failures.length} of ${calls} probes failed`);
      assert.ok(calls > 20, `the probe ran (${calls} calls)`);
    }
    const nodes = await status(copy, ws);
    assert.equal(nodes.length, 5);
    assert.ok(nodes.every((n) => n.state === 'joined'));
    const full = JSON.parse((await run(copy, ws, ['status', '--json'])).stdout) as { nodes: { upToDate: boolean }[]; store: { healthyVoters: number; voters: number } };
    assert.ok(full.nodes.every((n) => n.upToDate), 'every node runs v2');
    assert.deepEqual([full.store.healthyVoters, full.store.voters], [3, 3]);
    assert.equal((await run(copy, ws, ['verify', '--all'])).code, 0);
    assert.equal(measurementsOf(await loadConfig(ws))['9'].expected, (await infra().expectedMeasurements())['9'].expected, 'the config still describes v2');
  });
});
