import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { promises as fs } from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import bcrypt from 'bcryptjs';
import * as localVtpm from '../../lib/attestation/variants/local-vtpm.js';
import { TpmClient } from '../../lib/tpm/client.js';
import { TPM_ALG } from '../../lib/tpm/constants.js';
import { startSwtpm, type SwtpmHandle } from '../../lib/tpm/swtpm.js';
import { CloudRegistry, createMetadataServer } from '../../providers/local/metadata-server.js';
import { localAkRegistry } from '../../providers/local/node-metadata.js';
import { InitSecrets } from '../../proto/gen/constellation/init.js';
import { REPO_ROOT } from '../support/cli.js';
import { cliInit, getStatus } from './support/test-cluster.js';
import { requireTool } from '../support/require-tool.js';

const hasSwtpm = spawnSync('swtpm', ['--version'], { stdio: 'ignore' }).status === 0;

interface Run {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** How a node program is started: its argv after the Node.js binary, its working folder, its extra environment. */
interface Program {
  args: string[];
  cwd: string;
  env?: NodeJS.ProcessEnv;
}

/** The sources, through tsx (what the unit tests import). */
const SOURCES: Program = { args: ['--import', 'tsx', path.join(REPO_ROOT, 'bootstrapper/main.ts')], cwd: REPO_ROOT };

/**
 * The bundled node program (dist/node-program/ of `npm run build`), copied into a temporary folder far from the
 * repository, with NODE_PATH empty and, beside the copy, a node_modules/ in which every package the repository has
 * is a trap: loading any of them writes its name into a file. The bundle must run without loading one.
 */
async function bundledProgram(dir: string): Promise<Program & { trapped: () => Promise<string[]> }> {
  const root = path.join(dir, 'far');
  const program = path.join(root, 'dist', 'node-program');
  await fs.cp(path.join(REPO_ROOT, 'dist', 'node-program'), program, { recursive: true });
  const trapFile = path.join(dir, 'trapped');
  const names: string[] = ['bufferutil', 'utf-8-validate', 'encoding'];
  for (const entry of await fs.readdir(path.join(REPO_ROOT, 'node_modules'))) {
    if (entry.startsWith('.')) continue;
    if (entry.startsWith('@'))
      for (const sub of await fs.readdir(path.join(REPO_ROOT, 'node_modules', entry))) names.push(`${entry}/${sub}`);
    else names.push(entry);
  }
  const trap = `require('node:fs').appendFileSync(${JSON.stringify(trapFile)}, __TRAP__ + '\\n');\nmodule.exports = {};\n`;
  for (const name of names) {
    const pkg = path.join(root, 'node_modules', name);
    await fs.mkdir(pkg, { recursive: true });
    await fs.writeFile(path.join(pkg, 'package.json'), JSON.stringify({ name, main: 'index.js' }));
    await fs.writeFile(path.join(pkg, 'index.js'), trap.replace('__TRAP__', JSON.stringify(name)));
  }
  return {
    args: [path.join(program, 'main.cjs')],
    cwd: program,
    env: { NODE_PATH: '' },
    trapped: async () => (await fs.readFile(trapFile, 'utf8').catch(() => '')).split('\n').filter(Boolean),
  };
}

function runMain(env: NodeJS.ProcessEnv, program: Program = SOURCES): Run {
  const child = spawn(process.execPath, program.args, {
    cwd: program.cwd,
    env: { PATH: process.env.PATH, ...program.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

describe('bootstrapper/main (the node program as a process)', function () {
  this.timeout(60_000);

  it('refuses to start without its environment, naming the variables, without a stack trace', async () => {
    const run = runMain({ NODE_NAME: 'cp-0' });
    assert.equal(await run.exited, 1);
    const line = JSON.parse(run.output().trim().split('\n').at(-1)!) as { level: string; msg: string; reason: string };
    assert.equal(line.level, 'error');
    assert.equal(line.msg, 'the bootstrapper cannot start');
    assert.match(line.reason, /NODE_IP is not set/);
    assert.match(line.reason, /TPM_SOCKET is not set/);
    assert.doesNotMatch(run.output(), /\n\s+at /);
  });

  for (const variant of ['sources', 'bundle'] as const) {
    describe(
      variant === 'sources'
        ? 'from the sources'
        : 'bundled (dist/node-program copied far from the repository, NODE_PATH empty, node_modules beside it trapped)',
      () => {
        let program: Program = SOURCES;
        let trapped: () => Promise<string[]> = async () => [];
        let programDir: string | undefined;
        before(async () => {
          if (variant === 'sources') return;
          programDir = await fs.mkdtemp(path.join(os.tmpdir(), 'node-program-'));
          const bundled = await bundledProgram(programDir);
          program = bundled;
          trapped = bundled.trapped;
        });
        after(async () => {
          if (programDir) await fs.rm(programDir, { recursive: true, force: true });
        });
        afterEach(async () => {
          assert.deepEqual(await trapped(), [], 'the node program loaded no package from node_modules');
        });

        it("on a cloud named by the boot config, stops when that cloud's metadata service does not confirm the node", async () => {
          const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bootstrapper-main-cloud-'));
          try {
            const config = path.join(dir, 'boot.json');
            await fs.writeFile(
              config,
              JSON.stringify({
                csp: 'aws',
                attestationVariant: 'aws-sev-snp',
                providerOptions: { imdsEndpoint: 'http://127.0.0.1:1' },
              }),
            );
            const run = runMain({ CONSTELLATION_BOOT_CONFIG: config }, program);
            assert.equal(await run.exited, 1);
            const line = JSON.parse(run.output().trim().split('\n').at(-1)!) as { reason: string };
            assert.match(line.reason, /says this node runs on aws, but aws's metadata service does not confirm it/);

            await fs.writeFile(config, JSON.stringify({ csp: 'gcp', attestationVariant: 'aws-sev-snp' }));
            const wrong = runMain({ CONSTELLATION_BOOT_CONFIG: config }, program);
            assert.equal(await wrong.exited, 1);
            assert.match(wrong.output(), /Provider \\"gcp\\" nodes cannot attest as aws-sev-snp/);
          } finally {
            await fs.rm(dir, { recursive: true, force: true });
          }
        });

        describe('with a swtpm, a state disk and the local metadata server', () => {
          const ip = `127.1.${randomInt(2, 250)}.10`;
          const gateway = ip.replace(/\.10$/, '.1');
          const initSecret = randomBytes(32).toString('hex');
          let dir: string;
          let swtpm: SwtpmHandle | undefined;
          let metadata: http.Server | undefined;
          let run: Run | undefined;
          let metadataUrl: string;
          const measurements: Record<string, { expected: string; warnOnly: boolean }> = {};

          before(async function () {
            requireTool(this, hasSwtpm, 'swtpm');
            dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bootstrapper-main-'));
            swtpm = await startSwtpm({ stateDir: path.join(dir, 'tpm') });
            const tpm = await TpmClient.connect(swtpm.serverSocket);
            const ak = (await tpm.attestationKey()).publicArea;
            for (const [i, v] of await tpm.pcrRead(TPM_ALG.SHA256, [4, 8, 9, 11, 12, 13]))
              measurements[String(i)] = { expected: Buffer.from(v).toString('hex'), warnOnly: false };
            tpm.close(); // swtpm serves one connection: the bootstrapper's
            const registry = new CloudRegistry();
            registry.initSecretHash = bcrypt.hashSync(initSecret, 4);
            registry.nodes.set('cp-0', {
              name: 'cp-0',
              role: 'control-plane',
              group: 'control_plane_default',
              address: ip,
              akPublic: Buffer.from(ak).toString('base64'),
            });
            metadata = createMetadataServer({ registry, gateway, controlToken: 'test-token' });
            await new Promise<void>((resolve) => metadata!.listen(0, gateway, resolve));
            metadataUrl = `http://${gateway}:${(metadata.address() as { port: number }).port}`;
            await fs.writeFile(path.join(dir, 'state-disk.img'), '');
            await fs.truncate(path.join(dir, 'state-disk.img'), 1024 * 1024);
          });
          after(async () => {
            if (run && run.child.exitCode === null) {
              run.child.kill('SIGKILL');
              await run.exited;
            }
            await swtpm?.stop();
            await new Promise((resolve) => (metadata ? metadata.close(resolve) : resolve(undefined)));
            if (dir) await fs.rm(dir, { recursive: true, force: true });
          });

          it('serves status and init on the node address, logs JSON lines without secrets, and exits 0 on SIGTERM', async () => {
            run = runMain(
              {
                NODE_NAME: 'cp-0',
                NODE_IP: ip,
                NODE_ROLE: 'control-plane',
                METADATA_URL: metadataUrl,
                TPM_SOCKET: swtpm!.serverSocket,
                STATE_DISK: path.join(dir, 'state-disk'),
                STATE_DIR: path.join(dir, 'state'),
                NODE_DIR: dir,
              },
              program,
            );
            while (!run.output().includes('"bootstrapper started"')) {
              if (run.child.exitCode !== null) assert.fail(`the bootstrapper exited: ${run.output()}`);
              await new Promise((resolve) => setTimeout(resolve, 50));
            }
            assert.equal((await getStatus(`${ip}:30081`)).state, 'waiting');

            const masterKey = randomBytes(32);
            const validator = localVtpm.createValidator({ measurements }, { akRegistry: localAkRegistry(metadataUrl) });
            const outcome = await cliInit(
              `${ip}:9000`,
              validator,
              InitSecrets.fromPartial({
                masterKey,
                masterSalt: randomBytes(32),
                initSecret: Buffer.from(initSecret),
                measurementSalt: randomBytes(32),
                kubernetesVersion: 'v1.31.1',
                attestationConfig: Buffer.from(JSON.stringify({ variant: 'local-vtpm', config: { measurements } })),
              }),
            );
            assert.equal(outcome.error, undefined, outcome.error?.message);
            assert.equal(outcome.result!.kubernetesBackend, 'none');
            assert.equal((await getStatus(`${ip}:30081`)).state, 'initialized');

            run.child.kill('SIGTERM');
            assert.equal(await run.exited, 0);
            const lines = run
              .output()
              .trim()
              .split('\n')
              .map((l) => JSON.parse(l) as { msg: string });
            assert.ok(lines.some((l) => l.msg === 'shutting down'));
            assert.ok(
              !run.output().includes(masterKey.toString('hex')) && !run.output().includes(masterKey.toString('base64')),
            );
            assert.ok(!run.output().includes(initSecret));
          });
        });
      },
    );
  }
});
