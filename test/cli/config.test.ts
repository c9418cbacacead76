import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCli } from '../support/cli.js';
import { INSTANCE_TYPES, SUPPORTED_KUBERNETES_VERSIONS, DEFAULT_KUBERNETES_VERSION } from '../../lib/config/index.js';

const STACK_LINE = /\n\s+at /;

describe('constellation config', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cli-config-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  const conf = () => path.join(dir, 'constellation-conf.yaml');
  const state = () => path.join(dir, 'constellation-state.yaml');

  it('generate local writes a valid config with the schema line and an empty state, both 0600', async () => {
    const res = await runCli(['config', 'generate', 'local', '-C', dir]);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /Wrote .*constellation-conf\.yaml and .*constellation-state\.yaml/);
    const text = await fs.readFile(conf(), 'utf8');
    assert.match(text.split('\n')[0]!, /^# yaml-language-server: \$schema=file:\/\/.*\/schema\/config\.schema\.json$/);
    assert.match(await fs.readFile(state(), 'utf8'), /^version: v1\n/);
    for (const f of [conf(), state()]) assert.equal((await fs.stat(f)).mode & 0o777, 0o600);

    const validate = await runCli(['config', 'validate', '-C', dir]);
    assert.equal(validate.code, 0, validate.stderr);
    assert.match(validate.stdout, /is valid: provider local, attestation variant local-vtpm/);
  });

  it('generate honours -k, -a and -t, and --json says what it wrote', async () => {
    const res = await runCli([
      'config',
      'generate',
      'azure',
      '-C',
      dir,
      '-k',
      'v1.31',
      '-a',
      'azure-tdx',
      '-t',
      'team=infra,env=dev',
      '--json',
    ]);
    assert.equal(res.code, 0, res.stderr);
    const out = JSON.parse(res.stdout) as Record<string, string>;
    assert.equal(out.attestationVariant, 'azure-tdx');
    assert.equal(
      out.kubernetesVersion,
      SUPPORTED_KUBERNETES_VERSIONS.find((v) => v.startsWith('v1.31.')),
    );
    const text = await fs.readFile(conf(), 'utf8');
    assert.match(text, /\n {2}azureTDX:\n/);
    assert.match(text, /\n {2}team: infra\n {2}env: dev\n/);
  });

  for (const existing of ['constellation-conf.yaml', 'constellation-state.yaml']) {
    it(`generate refuses when ${existing} exists, writes neither file and keeps the existing one`, async () => {
      await fs.writeFile(path.join(dir, existing), 'mine: keep\n');
      const res = await runCli(['config', 'generate', 'gcp', '-C', dir]);
      assert.notEqual(res.code, 0);
      assert.match(
        res.stderr,
        new RegExp(`Error: ${existing.replace('.', '\\.')} already exists .*nothing was written`),
      );
      assert.doesNotMatch(res.stderr, STACK_LINE);
      assert.deepEqual(await fs.readdir(dir), [existing]);
      assert.equal(await fs.readFile(path.join(dir, existing), 'utf8'), 'mine: keep\n');
    });
  }

  it('generate refuses a variant of another provider and an unsupported Kubernetes version, writing nothing', async () => {
    const variant = await runCli(['config', 'generate', 'aws', '-C', dir, '-a', 'gcp-sev-es']);
    assert.notEqual(variant.code, 0);
    assert.match(
      variant.stderr,
      /Attestation variant gcp-sev-es does not run on provider aws\.\nHint: aws allows aws-sev-snp, aws-nitro-tpm/,
    );
    const k8s = await runCli(['config', 'generate', 'aws', '-C', dir, '-k', '1.12']);
    assert.notEqual(k8s.code, 0);
    assert.match(k8s.stderr, /Kubernetes version "1.12" is not supported/);
    assert.deepEqual(await fs.readdir(dir), []);
  });

  it('validate prints file:line: path: message for each problem, exits 1, stack only with --debug', async () => {
    await runCli(['config', 'generate', 'local', '-C', dir]);
    const text = await fs.readFile(conf(), 'utf8');
    const broken = text
      .replace('initialCount: 1', 'initialCount: -2')
      .replace('name: constell', 'name: constell\nnmae: typo');
    await fs.writeFile(conf(), broken);
    const lines = broken.split('\n');
    const lineOf = (needle: string) => lines.findIndex((l) => l.includes(needle)) + 1;

    const res = await runCli(['config', 'validate', '-C', dir]);
    assert.equal(res.code, 1);
    assert.match(res.stderr, /^Error: .*constellation-conf\.yaml is not valid \(2 problems\):\n/);
    assert.match(
      res.stderr,
      new RegExp(`constellation-conf\\.yaml:${lineOf('nmae')}: nmae: unknown key "nmae" \\(did you mean "name"\\?\\)`),
    );
    assert.match(
      res.stderr,
      new RegExp(
        `constellation-conf\\.yaml:${lineOf('initialCount: -2')}: nodeGroups\\.control_plane_default\\.initialCount: `,
      ),
    );
    assert.match(res.stderr, /\nHint: /);
    assert.doesNotMatch(res.stderr, STACK_LINE);

    const debug = await runCli(['config', 'validate', '-C', dir, '--debug']);
    assert.equal(debug.code, 1);
    assert.match(debug.stderr, STACK_LINE);
  });

  it('validate --json reports the issues as data, and validate names a file given as argument', async () => {
    const file = path.join(dir, 'other.yaml');
    await fs.writeFile(file, 'version: v4\nname: [x\n');
    const res = await runCli(['config', 'validate', file, '--json'], { cwd: dir });
    assert.equal(res.code, 1);
    const out = JSON.parse(res.stdout) as {
      error: { file: string; issues: { path: string; line: number; message: string }[] };
    };
    assert.equal(out.error.file, 'other.yaml');
    assert.equal(out.error.issues.length, 1);
    assert.match(out.error.issues[0]!.message, /not valid YAML/);
  });

  it('validate without a config says how to make one', async () => {
    const res = await runCli(['config', 'validate', '-C', dir]);
    assert.equal(res.code, 1);
    assert.match(
      res.stderr,
      /There is no constellation-conf\.yaml in .*\nHint: Write one with `constellation config generate/,
    );
  });

  it('instance-types lists the allowed types per provider and variant', async () => {
    const res = await runCli(['config', 'instance-types', '--json']);
    assert.equal(res.code, 0, res.stderr);
    const out = JSON.parse(res.stdout) as Record<string, Record<string, string[]>>;
    assert.deepEqual(Object.keys(out), ['local', 'qemu', 'aws', 'azure', 'gcp']);
    assert.deepEqual(out.azure!['azure-tdx'], [...INSTANCE_TYPES['azure-tdx']]);
    const text = await runCli(['config', 'instance-types', '-p', 'gcp']);
    assert.match(text.stdout, /^gcp:\n {2}gcp-sev-snp:\n {4}n2d-standard-2, /);
  });

  it('kubernetes-versions lists the supported versions and the default', async () => {
    const res = await runCli(['config', 'kubernetes-versions', '--json']);
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(JSON.parse(res.stdout), {
      versions: [...SUPPORTED_KUBERNETES_VERSIONS],
      default: DEFAULT_KUBERNETES_VERSION,
    });
    const text = await runCli(['config', 'kubernetes-versions']);
    assert.match(text.stdout, new RegExp(`${DEFAULT_KUBERNETES_VERSION.replaceAll('.', '\\.')} \\(default\\)`));
  });
});
