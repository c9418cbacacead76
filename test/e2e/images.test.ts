/**
 * Versioned local images through the built CLI's private copy, with real node processes: `mini image create` of
 * the copy, a cluster on that image (`mini up --image v1`: every node runs v1 and shows its signed measurements), an
 * image whose measurements were edited after signing refused before anything starts, and `upgrade check` finding a
 * changed build made into v2, and an image with a byte appended to one of its files refused at init naming PCR 9.
 * The user's config folder is a temporary XDG_CONFIG_HOME. One cluster; cases in order.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { STATE_FILE } from '../../lib/workspace/files.js';
import {
  changedBuild,
  cleanUp,
  clusterProcesses,
  copyBuiltCli,
  run,
  tamper,
  tempDir,
  type CliCopy,
} from './support.js';
import { removeImageTree } from '../../providers/local/image-store.js';
import { pollUntil } from '../../lib/poll.js';

interface ListedImage {
  version: string;
  measurementsDigest: string;
  signature: string;
}

describe('e2e: versioned local images (mini image create, mini up --image, upgrade check)', function () {
  this.timeout(240_000);
  let tmp: string;
  let copy: CliCopy;
  let ws: string;
  let env: NodeJS.ProcessEnv;
  let v1: ListedImage;

  const cli = async (args: string[], workspace = ws) => {
    const res = await run(copy, workspace, args, env);
    return res;
  };
  const ok = async (args: string[], workspace = ws) => {
    const res = await cli(args, workspace);
    assert.equal(res.code, 0, `${args.join(' ')}:\n${res.stdout}\n${res.stderr}`);
    return res.stdout;
  };
  const images = async () =>
    (JSON.parse(await ok(['mini', 'image', 'list', '--json'])) as { images: ListedImage[] }).images;

  before(async () => {
    tmp = await tempDir('cl-images-e2e-');
    copy = await copyBuiltCli(tmp);
    ws = path.join(tmp, 'ws');
    await fs.mkdir(ws);
    env = { XDG_CONFIG_HOME: path.join(tmp, 'config') };
    await ok(['mini', 'image', 'create', 'v1', '--from', copy.root]);
    [v1] = await images();
  });

  after(async () => {
    if (copy && ws) await cleanUp(copy, ws);
    if (tmp) await removeImageTree(tmp);
  });

  it('mini image list shows the image with its measurements digest and a verified signature', async () => {
    assert.equal(v1.version, 'v1');
    assert.equal(v1.signature, 'verified');
    assert.match(v1.measurementsDigest, /^[0-9a-f]{12}$/);
  });

  it('refuses an image whose measurements were edited after signing, before anything starts', async () => {
    await ok(['mini', 'image', 'create', 'v1-edited', '--from', copy.root]);
    const file = path.join(tmp, 'config', 'constellation', 'images', 'v1-edited', 'measurements.json');
    const signed = JSON.parse(await fs.readFile(file, 'utf8')) as {
      measurements: Record<string, { expected: string }>;
    };
    await fs.chmod(file, 0o644); // images are read-only: their owner can make a file writable
    await fs.writeFile(
      file,
      (await fs.readFile(file, 'utf8')).replace(signed.measurements['9'].expected, 'ab'.repeat(32)),
    );
    assert.equal((await images()).find((i) => i.version === 'v1-edited')?.signature, 'bad');

    const other = path.join(tmp, 'ws-edited');
    await fs.mkdir(other);
    const res = await cli(['mini', 'up', '--image', 'v1-edited', '-w', '0'], other);
    assert.equal(res.code, 1);
    assert.match(res.stderr, /The measurements of local image v1-edited .* do not verify with your local image key/);
    assert.match(res.stderr, /Hint: Nothing was changed\./);
    assert.deepEqual(await clusterProcesses(other), [], 'no node was started');
    assert.equal(
      (parse(await fs.readFile(path.join(other, STATE_FILE), 'utf8')) as { infrastructure: { uid: string } })
        .infrastructure.uid,
      '',
      'not even a cluster identity was made',
    );
  });

  it('an image with one byte appended to one of its files after signing: the first node is refused naming PCR 9, no cluster comes up', async () => {
    await ok(['mini', 'image', 'create', 'v1-tampered', '--from', copy.root]);
    // koffi's native add-on: a file a local node never loads, and still measured as every other file of the image.
    await tamper(path.join(tmp, 'config', 'constellation', 'images', 'v1-tampered', 'node-program', 'koffi.node'), '');
    const other = path.join(tmp, 'ws-tampered');
    await fs.mkdir(other);
    try {
      const res = await cli(['mini', 'up', '--image', 'v1-tampered', '-w', '0'], other);
      assert.notEqual(res.code, 0, `${res.stdout}\n${res.stderr}`);
      assert.match(`${res.stdout}\n${res.stderr}`, /PCR 9: expected [0-9a-f]{64}, got [0-9a-f]{64}/);
      assert.doesNotMatch(res.stdout, /is up/);
    } finally {
      await cleanUp(copy, other);
    }
  });

  it('mini up --image v1: every node boots v1 and shows its signed measurements; verify --all accepts them', async () => {
    await ok(['mini', 'up', '--image', 'v1', '-c', '1', '-w', '1']);
    const config = parse(await fs.readFile(path.join(ws, 'constellation-conf.yaml'), 'utf8')) as {
      image: string;
      attestation: { localVTPM: { measurements: unknown } };
    };
    assert.equal(config.image, 'v1');
    const signed = JSON.parse(
      await fs.readFile(path.join(tmp, 'config', 'constellation', 'images', 'v1', 'measurements.json'), 'utf8'),
    ) as { measurements: unknown };
    assert.deepEqual(
      Object.fromEntries(
        Object.entries(config.attestation.localVTPM.measurements as Record<string, unknown>).map(([k, v]) => [
          String(k),
          v,
        ]),
      ),
      signed.measurements,
    );
    const status = JSON.parse(await ok(['status', '--json'])) as {
      nodes: { name: string; state: string; software?: { image: string; measurementsDigest: string } }[];
    };
    assert.equal(status.nodes.length, 2);
    for (const n of status.nodes) {
      assert.equal(n.state, 'joined', n.name);
      assert.equal(n.software?.image, 'v1', `${n.name} reports IMAGE_VERSION v1`);
      assert.equal(
        n.software?.measurementsDigest,
        v1.measurementsDigest,
        `${n.name} booted what v1's signed measurements say`,
      );
    }
    // The nodes run the image's copy of the build, not the CLI's dist/.
    const launch = JSON.parse(
      await fs.readFile(path.join(ws, 'constellation-local', 'nodes', status.nodes[0].name, 'launch.json'), 'utf8'),
    ) as { image: { imageDir: string }; imageVersion: string };
    assert.equal(launch.image.imageDir, path.join(tmp, 'config', 'constellation', 'images', 'v1', 'node-program'));
    assert.equal(launch.imageVersion, 'v1');
    await ok(['verify', '--all']);
  });

  it('upgrade check finds a changed build made into v2, and --update-config writes it into the config', async () => {
    // A changed build: one byte more in a file of dist/ (PCR 9 and 11 change).
    await ok(['mini', 'image', 'create', 'v2', '--from', await changedBuild(copy, path.join(tmp, 'next'), 'v2')]);

    const check = JSON.parse(await ok(['upgrade', 'check', '--json'])) as {
      current: { image: string };
      images: { version: string; relation: string; changes?: { index: number }[]; refused?: string }[];
      upgrade?: { version: string };
    };
    assert.equal(check.current.image, 'v1');
    const v2 = check.images.find((i) => i.version === 'v2');
    assert.equal(v2?.relation, 'newer');
    assert.deepEqual(
      v2?.changes?.map((c) => c.index),
      [9, 11],
    );
    assert.match(check.images.find((i) => i.version === 'v1-edited')?.refused ?? '', /do not verify/);
    assert.equal(check.upgrade?.version, 'v2');

    const text = await ok(['upgrade', 'check', '--update-config']);
    assert.match(text, /Wrote image v2 and its measurements into the config/);
    assert.equal(
      (parse(await fs.readFile(path.join(ws, 'constellation-conf.yaml'), 'utf8')) as { image: string }).image,
      'v2',
    );
  });

  it('a rebooted node keeps the image it was created with after the config names another', async () => {
    await ok(['mini', 'reboot', 'worker-0']);
    let worker: { state: string; software?: { image: string } } | undefined;
    await pollUntil(
      async () => {
        const status = JSON.parse(await ok(['status', '--json'])) as {
          nodes: { name: string; state: string; software?: { image: string } }[];
        };
        worker = status.nodes.find((n) => n.name === 'worker-0');
        return worker?.state === 'joined' || undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, onTimeout: () => false },
    );
    assert.equal(worker?.state, 'joined');
    assert.equal(worker?.software?.image, 'v1');
  });
});
