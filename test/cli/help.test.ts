import assert from 'node:assert/strict';
import { promises as fs, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT, runCli } from '../support/cli.js';
import { REFERENCE_FILE, renderFromRepo, type Manifest } from '../../scripts/gen-cli-reference.js';

const manifest = () => JSON.parse(readFileSync(path.join(REPO_ROOT, 'oclif.manifest.json'), 'utf8')) as Manifest;

describe('constellation --help', () => {
  it('lists the topics and commands', async () => {
    const res = await runCli(['--help']);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /TOPICS\n[\s\S]*config\s+Generate, validate and inspect the cluster configuration/);
    assert.match(res.stdout, /COMMANDS\n[\s\S]*version\s+Show the CLI version/);
  });

  it('teaches a command: description, usage, flags with their values, global flags, examples', async () => {
    const res = await runCli(['config', 'generate', '--help']);
    assert.equal(res.code, 0, res.stderr);
    for (const part of [
      /USAGE\n\s+\$ constellation config generate PROVIDER/,
      /-k, --kubernetes=<version>\s+Kubernetes version/,
      /-a, --attestation=<option>\s+Attestation variant/,
      /-t, --tags=<key=value>\.\.\.\s+Tag for every cloud resource/,
      /GLOBAL FLAGS\n[\s\S]*-C, --workspace=<value>[\s\S]*--debug[\s\S]*--json/,
      /DESCRIPTION\n[\s\S]*never overwrites/,
      /EXAMPLES\n[\s\S]*\$ constellation config generate azure -a azure-tdx/,
    ]) {
      assert.match(res.stdout, part);
    }
  });

  it('every command has a summary or description, an example, and a description for each flag and argument', () => {
    for (const command of Object.values(manifest().commands)) {
      assert.ok(command.summary || command.description, `${command.id}: no description`);
      assert.ok((command.examples ?? []).length > 0, `${command.id}: no example`);
      for (const flag of Object.values(command.flags))
        assert.ok(flag.description, `${command.id}: flag --${flag.name} has no description`);
      for (const arg of Object.values(command.args))
        assert.ok(arg.description, `${command.id}: argument ${arg.name} has no description`);
    }
  });

  it('docs/cli-reference.md is up to date (else run `npm run docs`)', () => {
    assert.equal(readFileSync(REFERENCE_FILE, 'utf8'), renderFromRepo());
  });

  describe('start-up path', () => {
    let dir: string;
    before(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cli-startup-'));
      // Records every module URL the ESM loader resolves in the CLI process.
      await fs.writeFile(
        path.join(dir, 'hooks.mjs'),
        `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.RESOLVE_LOG, result.url + '\\n');
  return result;
}\n`,
      );
      await fs.writeFile(
        path.join(dir, 'register.mjs'),
        `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(path.join(dir, 'hooks.mjs')).href)});\n`,
      );
    });
    after(async () => {
      await fs.rm(dir, { recursive: true, force: true });
    });

    for (const args of [['--help'], ['version'], ['config', 'generate', '--help']]) {
      it(`\`${args.join(' ')}\` loads no cloud SDK, no gRPC, no zod and no yaml`, async () => {
        const log = path.join(dir, `${args.join('-')}.log`);
        const res = await runCli(args, {
          env: { NODE_OPTIONS: `--import ${path.join(dir, 'register.mjs')}`, RESOLVE_LOG: log },
        });
        assert.equal(res.code, 0, res.stderr);
        const urls = (await fs.readFile(log, 'utf8')).split('\n').filter(Boolean);
        assert.ok(
          urls.some((u) => u.includes('/@oclif/core/')),
          'the log records the modules loaded',
        );
        const heavy = urls.filter((u) => /\/node_modules\/(@aws-sdk|@azure|@google-cloud|@grpc|zod|yaml)\//.test(u));
        assert.deepEqual(heavy, []);
      });
    }
  });
});
