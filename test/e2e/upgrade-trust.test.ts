/**
 * What an upgrade may write and remove, on a real local cluster (1 control plane + 1 worker, versioned local images v1
 * and v2 made with `mini image create`): the attacks and accidents of the attack review, each performed as a user or a
 * corrupted workspace would, and each failing on the code before the fix.
 *   - a journal that names the only control plane as "added" and an empty "previous" set: the rollback removes nothing
 *     and writes nothing (issue: the journal was trusted);
 *   - `apply --skip-phases …,image,k8s` with measurements edited in the config: refused before the store is written;
 *   - a run killed between the store write and the journal: the rollback still restores the old set, and `upgrade
 *     apply` brings a store that trusts other measurements than the config back to the config's;
 *   - a rollout whose journal lost the steps of nodes still on the old image (a partial rollback): it replaces them
 *     too before it drops the old measurements, instead of saying every node runs the new image.
 * Every case starts from the cluster on v1 with a config for v1 and no journal.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { openWorkspaceStore } from '../../cli/cluster/store.js';
import { UPGRADE_JOURNAL_FILE } from '../../cli/cluster/upgrade.js';
import { imageMeasurementsDigest } from '../../lib/attestation/measurements.js';
import type { Measurements } from '../../lib/attestation/types.js';
import { editConfig } from '../../lib/config/edit.js';
import { loadConfig, measurementsOf } from '../../lib/config/index.js';
import { LocalImageStore } from '../../providers/local/image-store.js';
import { changedBuild, cleanUp, imageWorkspace, status, type CliCopy, type ImageWorkspace } from './support.js';

describe('e2e: upgrade state is verified, not trusted (1 control plane + 1 worker, images v1 and v2)', function () {
  this.timeout(600_000);
  let w: ImageWorkspace;
  let tmp: string;
  let copy: CliCopy;
  let ws: string;
  let images: LocalImageStore;
  const measurementsOfImage: Record<string, Measurements> = {};
  const cli = (args: string[]) => w.cli(args);
  const ok = (args: string[]) => w.ok(args);
  const useImage = (version: string) => w.useImage(version);
  const names = async () => (await status(copy, ws)).map((n) => n.name).sort();
  const journalFile = () => path.join(ws, UPGRADE_JOURNAL_FILE);
  /** What the cluster store trusts: its current set's digest and its previous ones. */
  const trusted = async () =>
    (JSON.parse(await ok(['status', '--json'])) as { trusted: { current: string; previous: string[] } }).trusted;
  /** Writes the store's attestation config directly, as a killed CLI run may have left it. */
  const writeStore = async (current: Measurements, previous: Measurements[] = []) => {
    const store = await openWorkspaceStore(ws);
    try {
      await store.writeJoinConfig({
        attestation: {
          variant: 'local-vtpm',
          config: { measurements: current },
          ...(previous.length ? { previous: previous.map((m) => ({ measurements: m })) } : {}),
        },
      });
    } finally {
      await store.close();
    }
  };
  const writeJournal = (journal: object) =>
    fs.writeFile(journalFile(), JSON.stringify({ version: 1, ...journal }, null, 2), { mode: 0o600 });
  const target = async (image: string) => ({
    image,
    measurementsDigest: imageMeasurementsDigest(measurementsOfImage[image]),
    kubernetesVersion: (await loadConfig(ws)).kubernetesVersion,
  });

  before(async () => {
    w = await imageWorkspace('cl-upgrade-trust-');
    ({ tmp, copy, ws, images } = w);
    await ok(['mini', 'image', 'create', 'v1', '--from', copy.root]);
    await ok(['mini', 'image', 'create', 'v2', '--from', await changedBuild(copy, path.join(tmp, 'build-v2'), 'v2')]);
    const key = (await images.publicKey())!;
    for (const version of ['v1', 'v2'])
      measurementsOfImage[version] = (await images.measurements(version, key)).measurements;
    await ok(['mini', 'up', '--image', 'v1', '-c', '1', '-w', '1']);
  });

  beforeEach(async () => {
    await fs.rm(journalFile(), { force: true });
    await useImage('v1');
  });

  after(async () => {
    if (copy && ws) await cleanUp(copy, ws);
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  it('a rollback does not remove the control plane a corrupted journal names as added, nor write its empty measurements', async () => {
    const before = await names();
    const v1 = imageMeasurementsDigest(measurementsOfImage.v1);
    await writeJournal({
      target: await target('v2'),
      previous: { measurements: {} },
      measurementsWritten: true,
      steps: [{ old: 'worker-0', role: 'worker', group: 'worker_default', new: 'control-plane-0' }],
    });
    const res = await cli(['upgrade', 'apply', '--rollback']);
    assert.equal(res.code, 1, res.stdout + res.stderr);
    assert.match(
      res.stderr,
      /The rollback does not remove control-plane-0: it is in node group control_plane_default, not worker_default/,
    );
    assert.deepEqual(await names(), before, 'no node was removed');
    assert.deepEqual(await trusted(), { current: v1, previous: [] }, 'the store still trusts v1 alone');
    await ok(['verify', '--all']);
  });

  it("a rollback removes no node of the right group that the provider made from another image than the upgrade's", async () => {
    await writeJournal({
      target: await target('v2'),
      measurementsWritten: false,
      steps: [{ old: 'worker-9', role: 'worker', group: 'worker_default', new: 'worker-0' }],
    });
    const res = await cli(['upgrade', 'apply', '--rollback']);
    assert.equal(res.code, 1, res.stdout + res.stderr);
    assert.match(res.stderr, /does not remove worker-0: the provider made it from image v1, not the upgrade's v2/);
    assert.ok((await names()).includes('worker-0'));
  });

  it('apply --skip-phases image,k8s refuses measurements edited in the config and leaves the store as it was', async () => {
    const edited = { ...measurementsOf(await loadConfig(ws)), 9: { expected: 'ab'.repeat(32), warnOnly: false } };
    await editConfig(ws, { measurements: edited, replaceMeasurements: true });
    const res = await cli(['apply', '--skip-phases', 'infrastructure,init,image,k8s', '-y']);
    assert.equal(res.code, 1, res.stdout + res.stderr);
    assert.match(res.stderr, /not the signed measurements of image v1[\s\S]*PCR 9 is abab/);
    assert.deepEqual(await trusted(), { current: imageMeasurementsDigest(measurementsOfImage.v1), previous: [] });
  });

  it('a run killed between the store write and the journal: the rollback restores the old set; upgrade apply brings a drifted store back to the config', async () => {
    const [v1, v2] = [imageMeasurementsDigest(measurementsOfImage.v1), imageMeasurementsDigest(measurementsOfImage.v2)];
    // The store holds v2 as current (v1 previous); the journal records only the intent.
    await writeStore(measurementsOfImage.v2, [measurementsOfImage.v1]);
    await writeJournal({
      target: await target('v2'),
      measurementsWriting: true,
      measurementsWritten: false,
      steps: [{ old: 'control-plane-0', role: 'control-plane', group: 'control_plane_default' }],
    });
    const rollback = await ok(['upgrade', 'apply', '--rollback']);
    assert.match(rollback, /restored the measurements of before the upgrade/);
    assert.deepEqual(await trusted(), { current: v1, previous: [] });

    // The same store state without any journal (a rollback's own write was lost): status says so, and upgrade apply,
    // with every node on the config's v1, makes the store trust v1 again instead of saying "nothing to upgrade".
    await writeStore(measurementsOfImage.v2, [measurementsOfImage.v1]);
    assert.match(await ok(['status']), new RegExp(`trusts measurements ${v2}, not the config's ${v1}`));
    const apply = await ok(['upgrade', 'apply', '-y']);
    assert.match(
      apply,
      new RegExp(`the cluster store trusted measurements ${v2}, not the config's ${v1}: it now trusts the config's`),
    );
    assert.deepEqual(await trusted(), { current: v1, previous: [] });
  });

  // Last: it moves the cluster to v2.
  it('a rollout whose journal lost the steps of old nodes replaces them too before it drops the old measurements', async () => {
    await useImage('v2');
    const v2 = imageMeasurementsDigest(measurementsOfImage.v2);
    // What a partial rollback leaves: the new set written, no step left for the nodes still on v1.
    await writeStore(measurementsOfImage.v2, [measurementsOfImage.v1]);
    await writeJournal({ target: await target('v2'), measurementsWritten: true, steps: [] });
    const res = await ok(['upgrade', 'apply', '-y']);
    assert.match(res, /still on another image: control-plane-0, worker-0/);
    for (const node of await status(copy, ws)) assert.equal(node.software?.image, 'v2', `${node.name} runs v2`);
    assert.deepEqual(await trusted(), { current: v2, previous: [] });
    await ok(['verify', '--all']);
  });
});
