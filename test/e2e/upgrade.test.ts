/**
 * Rolling upgrades on a real local cluster (3 control planes + 2 workers) from versioned local image v1 to v2, with
 * the built CLI's private copy and a temporary user config folder (XDG_CONFIG_HOME: the images and their key). The
 * images, made with `mini image create` from the copy's build changed by one byte each:
 *   v2  the upgrade
 *   v3  correctly signed, then its files changed (a tampered image: its nodes measure otherwise)
 *   v4  its measurements file edited after signing
 * Cases, in order on one cluster:
 *   1. `upgrade check` lists v2 (and refuses v4); `upgrade apply` to v4 is refused before any node is touched
 *   2. a replacement booted from v3 stops the rollout naming the PCR; the old nodes stay and serve; --rollback
 *   3. the real rollout to v2, killed (SIGKILL) after its first replacement and run again: every node replaced and on
 *      v2, nothing lost, etcd 3 of 3, verify --all; all along a probe asks the load balancer every 100 ms (the join
 *      service's health check, a node's status and its verify service) and sees no failure, and a node of v2 joining mid-rollout gets its ticket.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { UPGRADE_JOURNAL_FILE } from '../../cli/cluster/upgrade.js';
import { editConfig } from '../../lib/config/edit.js';
import { loadConfig, measurementsOf } from '../../lib/config/index.js';
import { LocalImageStore, removeImageTree } from '../../providers/local/image-store.js';
import {
  changedBuild,
  cleanUp,
  imageWorkspace,
  start,
  startLoadBalancerProbe,
  startProbeNode,
  status,
  tamper,
  waitFor,
  type CliCopy,
  type ImageWorkspace,
} from './support.js';

describe('e2e: rolling upgrade of 3 control planes + 2 workers from image v1 to v2', function () {
  this.timeout(600_000);
  let w: ImageWorkspace;
  let tmp: string;
  let copy: CliCopy;
  let ws: string;
  let env: NodeJS.ProcessEnv;
  let images: LocalImageStore;
  const cli = (args: string[]) => w.cli(args);
  const ok = (args: string[]) => w.ok(args);
  const useImage = (version: string) => w.useImage(version);
  const names = async () => (await status(copy, ws)).map((n) => n.name);
  /** A changed build (PCRs 9 and 11 differ) made into image `version`. */
  const makeImage = async (version: string) =>
    ok([
      'mini',
      'image',
      'create',
      version,
      '--from',
      await changedBuild(copy, path.join(tmp, `build-${version}`), version),
    ]);

  before(async () => {
    w = await imageWorkspace('cl-upgrade-');
    ({ tmp, copy, ws, env, images } = w);
    await ok(['mini', 'image', 'create', 'v1', '--from', copy.root]);
    for (const version of ['v2', 'v3', 'v4']) await makeImage(version);
    await tamper(path.join(images.imageDir('v3'), 'node-program', 'main.cjs'), '// tampered after signing');
    const v4 = path.join(images.imageDir('v4'), 'measurements.json');
    await fs.chmod(v4, 0o644); // images are read-only: their owner can make a file writable
    await fs.writeFile(
      v4,
      (await fs.readFile(v4, 'utf8')).replace(/"expected": "[0-9a-f]{64}"/, `"expected": "${'ab'.repeat(32)}"`),
    );
    await ok(['mini', 'up', '--image', 'v1', '-c', '3', '-w', '2']);
  });

  after(async () => {
    if (copy && ws) await cleanUp(copy, ws);
    if (tmp) await removeImageTree(tmp);
  });

  it('upgrade check lists v2; measurements edited after signing are refused before any node is touched', async () => {
    const check = JSON.parse(await ok(['upgrade', 'check', '--json'])) as {
      images: { version: string; relation: string; refused?: string }[];
      upgrade?: { version: string };
    };
    assert.equal(check.images.find((i) => i.version === 'v2')?.relation, 'newer');
    assert.match(check.images.find((i) => i.version === 'v4')?.refused ?? '', /do not verify/);
    assert.equal(check.upgrade?.version, 'v2');

    // The user names v4 with the values of its (edited) file, by hand: fetch-measurements would refuse them.
    const edited = JSON.parse(await fs.readFile(path.join(images.imageDir('v4'), 'measurements.json'), 'utf8')) as {
      measurements: Record<string, { expected: string; warnOnly: boolean }>;
    };
    const config = await fs.readFile(path.join(ws, 'constellation-conf.yaml'));
    await editConfig(ws, { image: 'v4', measurements: edited.measurements, replaceMeasurements: true });
    const before = await names();
    const res = await cli(['upgrade', 'apply', '-y']);
    assert.equal(res.code, 1, res.stdout + res.stderr);
    assert.match(res.stderr, /The measurements of local image v4 .* do not verify with your local image key/);
    assert.deepEqual(await names(), before, 'no node was added or removed');
    await assert.rejects(fs.stat(path.join(ws, UPGRADE_JOURNAL_FILE)), { code: 'ENOENT' });
    await fs.writeFile(path.join(ws, 'constellation-conf.yaml'), config);
  });

  it('a replacement booted from a tampered image stops the rollout naming the PCR; the old nodes stay and serve; --rollback removes what was added', async () => {
    await useImage('v3');
    const before = await names();
    const res = await cli(['upgrade', 'apply', '-y']);
    assert.equal(res.code, 3, res.stdout + res.stderr);
    assert.match(res.stdout, /verified the signed measurements of image v3/);
    assert.match(
      res.stderr,
      /The replacement control-plane-3 of control-plane-0 was refused: [\s\S]*PCR 9: expected [0-9a-f]{64}, got [0-9a-f]{64}/,
    );
    const during = await status(copy, ws);
    for (const name of before)
      assert.equal(during.find((n) => n.name === name)?.state, 'joined', `${name} stays and serves`);
    // The cluster keeps serving joins of v1 nodes: a v1 worker reboots and rejoins (both measurement sets are accepted).
    await ok(['mini', 'reboot', 'worker-0']);
    await waitFor(
      'worker-0 (v1) to rejoin',
      async () => (await status(copy, ws)).find((n) => n.name === 'worker-0')?.state === 'joined',
      60_000,
    );

    const rollback = await ok(['upgrade', 'apply', '--rollback']);
    assert.match(rollback, /removed control-plane-3, which the upgrade added to replace control-plane-0/);
    assert.deepEqual(await names(), before);
    await assert.rejects(fs.stat(path.join(ws, UPGRADE_JOURNAL_FILE)), { code: 'ENOENT' });
  });

  it('rolls every node to v2 with no failed probe, continues after a SIGKILL, lets a node join mid-rollout, and ends with etcd 3 of 3', async () => {
    await useImage('v2');
    const lb = (await import('../../lib/workspace/state.js'))
      .readState(ws)
      .then((s) => s.infrastructure.clusterEndpoint);
    const probe = startLoadBalancerProbe(await lb);
    try {
      // First run: killed once the first replacement is done.
      const first = start(copy, ws, ['upgrade', 'apply', '-y'], false, env);
      await waitFor(
        'the first replacement',
        async () => {
          const journal = await fs.readFile(path.join(ws, UPGRADE_JOURNAL_FILE), 'utf8').catch(() => '');
          return journal.includes('"done": true');
        },
        180_000,
      );
      first.kill('SIGKILL');
      await new Promise((resolve) => first.once('exit', resolve));
      // No node was lost: five joined (old ones not yet replaced, and the first replacement); at most one more is
      // on its way (the second replacement, which the kill interrupted).
      const mid = await status(copy, ws);
      assert.equal(
        mid.filter((n) => n.state === 'joined').length,
        5,
        JSON.stringify(mid.map((n) => [n.name, n.state])),
      );

      // Mid-rollout (old and new nodes, both measurement sets accepted): a node of the new image joins.
      const node = await startProbeNode(ws, images.nodeImage('v2'), 'joiner-0', path.join(tmp, 'joiner-tpm'));
      try {
        const second = cli(['upgrade', 'apply', '-y']);
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
    const full = JSON.parse(await ok(['status', '--json'])) as {
      nodes: { name: string; state: string; upToDate: boolean; software?: { image: string } }[];
      store: { healthyVoters: number; voters: number };
    };
    assert.equal(full.nodes.length, 5);
    for (const n of full.nodes) {
      assert.equal(n.state, 'joined', n.name);
      assert.equal(n.software?.image, 'v2', `${n.name} runs v2`);
      assert.ok(n.upToDate, `${n.name} is up to date`);
    }
    assert.deepEqual([full.store.healthyVoters, full.store.voters], [3, 3]);
    await ok(['verify', '--all']);
    const signed = await images.measurements('v2', (await images.publicKey())!);
    assert.equal(
      measurementsOf(await loadConfig(ws))['9'].expected,
      signed.measurements['9'].expected,
      'the config still describes v2',
    );
    assert.equal(
      (parse(await fs.readFile(path.join(ws, 'constellation-conf.yaml'), 'utf8')) as { image: string }).image,
      'v2',
    );
  });
});
