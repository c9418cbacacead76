/**
 * The node launcher's own checks: its launch config, and that the process it shares with the node program imports
 * no package from node_modules (the node program is the bundle; a package the launcher imported would be unmeasured
 * code in the node's process, where an attacker's payload could read the node's secrets).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';
import { parseLaunchConfig } from '../../../providers/local/launcher.js';
import { REPO_ROOT } from '../../support/cli.js';

const VALID = {
  name: 'worker-0',
  role: 'worker',
  address: '10.213.7.100',
  metadataUrl: 'http://10.213.7.1:8080',
  nodeDir: '/ws/nodes/worker-0',
  stateDisk: '/ws/nodes/worker-0/state-disk',
  stateDir: '/ws/nodes/worker-0/state',
  tpm: { serverSocket: '/ws/tpm/swtpm.sock', ctrlSocket: '/ws/tpm/swtpm-ctrl.sock' },
  image: {
    nodeBinary: '/usr/bin/node',
    imageDir: '/repo/dist/node-program',
    entry: '/repo/dist/node-program/main.cjs',
  },
};

describe('local provider: the node launcher', () => {
  it('reads a launch config, defaulting the Kubernetes backend to none and the image version to local', () => {
    const config = parseLaunchConfig(VALID);
    assert.equal(config.kubernetesBackend, 'none');
    assert.equal(config.imageVersion, 'local');
    assert.equal(config.digestCache, undefined);
    assert.deepEqual(config.image, VALID.image);
    assert.equal(
      parseLaunchConfig({ ...VALID, kubernetesBackend: 'kubeadm', imageVersion: 'v2', digestCache: '/c.json' })
        .imageVersion,
      'v2',
    );
  });

  it('refuses a launch config with a bad or missing field, naming it', () => {
    assert.throws(() => parseLaunchConfig(null), /launch config: the file must be an object/);
    assert.throws(() => parseLaunchConfig({ ...VALID, role: 'admin' }), /role must be control-plane or worker/);
    assert.throws(
      () => parseLaunchConfig({ ...VALID, tpm: { serverSocket: 's' } }),
      /tpm\.ctrlSocket must be a string/,
    );
    assert.throws(
      () => parseLaunchConfig({ ...VALID, image: { ...VALID.image, entry: 3 } }),
      /image\.entry must be a string/,
    );
    assert.throws(
      () => parseLaunchConfig({ ...VALID, kubernetesBackend: 'k3s' }),
      /kubernetesBackend must be none or kubeadm/,
    );
    assert.throws(() => parseLaunchConfig({ ...VALID, imageVersion: '' }), /imageVersion must not be empty/);
  });

  it('imports no package from node_modules (its process runs the node program)', async function () {
    this.timeout(60_000);
    const result = await esbuild.build({
      absWorkingDir: REPO_ROOT,
      entryPoints: [path.join(REPO_ROOT, 'providers/local/launcher.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      write: false,
      metafile: true,
      outdir: 'out',
      logLevel: 'silent',
    });
    const packages = Object.keys(result.metafile.inputs).filter((file) => file.includes('node_modules/'));
    assert.deepEqual(packages, []);
  });

  // The provider starts the launcher and the cloud daemon of a build from their bundles (detachedProgram).
  for (const { program, failure } of [
    { program: 'launcher' as const, failure: /launcher: boot failed: ENOENT/ },
    { program: 'cloud-daemon' as const, failure: /cloud daemon failed: ENOENT/ },
  ]) {
    it(`a build's ${program} is one CommonJS file that loads only Node.js's own modules, and runs`, async function () {
      this.timeout(30_000);
      const { detachedProgram } = (await import(
        pathToFileURL(path.join(REPO_ROOT, 'dist/providers/local/processes.js')).href
      )) as typeof import('../../../providers/local/processes.js');
      const file = detachedProgram(program);
      assert.equal(file, path.join(REPO_ROOT, 'dist', 'cli-bundle', `${program}.cjs`));
      const required = [...(await fs.readFile(file, 'utf8')).matchAll(/\brequire\("([^"]+)"\)/g)].map((m) => m[1]!);
      assert.ok(required.length > 0);
      assert.deepEqual(
        required.filter((name) => !name.startsWith('node:')),
        [],
      );
      // Without its config it says so in its log and exits 1, as the module does.
      const run = spawnSync(process.execPath, [file, path.join(os.tmpdir(), 'no-such-config.json')], {
        encoding: 'utf8',
      });
      assert.equal(run.status, 1, run.stderr);
      assert.match(run.stderr, failure);
    });
  }
});
