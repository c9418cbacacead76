import assert from 'node:assert/strict';
import { promises as fs, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT, runCli } from '../support/cli.js';
import { REFERENCE_FILE, renderFromRepo, type Manifest } from '../../scripts/gen-cli-reference.js';
import { commandId, ENTRY_NAME, META_FILE } from '../../scripts/bundle-cli.mjs';

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
    const BUNDLE_DIR = path.join(REPO_ROOT, 'dist', 'cli-bundle');
    const HEAVY = /(^|\/)node_modules\/(@aws-sdk|@azure|@google-cloud|@grpc|@kubernetes|zod|yaml)\//;
    let dir: string;
    before(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cli-startup-'));
      // Record every file the CLI process resolves: ES modules (import and import()) and CommonJS (require).
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
      await fs.writeFile(
        path.join(dir, 'require-hook.cjs'),
        `const Module = require('node:module');
const { appendFileSync } = require('node:fs');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (...args) {
  const file = resolve.apply(this, args);
  appendFileSync(process.env.RESOLVE_LOG, file + '\\n');
  return file;
};\n`,
      );
    });
    after(async () => {
      await fs.rm(dir, { recursive: true, force: true });
    });

    for (const args of [['--help'], ['version'], ['config', 'generate', '--help']]) {
      it(`\`${args.join(' ')}\` runs from the CLI's bundle and loads no file of node_modules/`, async () => {
        const log = path.join(dir, `${args.join('-')}.log`);
        const hooks = `--require ${path.join(dir, 'require-hook.cjs')} --import ${path.join(dir, 'register.mjs')}`;
        const res = await runCli(args, { env: { NODE_OPTIONS: hooks, RESOLVE_LOG: log } });
        assert.equal(res.code, 0, res.stderr);
        const files = (await fs.readFile(log, 'utf8')).split('\n').filter(Boolean);
        assert.ok(files.includes(path.join(BUNDLE_DIR, 'loader.cjs')), files.join('\n'));
        assert.deepEqual(
          files.filter((f) => f.includes('/node_modules/')),
          [],
        );
      });
    }

    it("the bundle's commands are the manifest's, each a command class", () => {
      const { cliBundle } = createRequire(import.meta.url)(path.join(BUNDLE_DIR, 'loader.cjs')) as {
        cliBundle: (dir: string) => { COMMANDS: Record<string, { run?: unknown }> };
      };
      const { COMMANDS } = cliBundle(BUNDLE_DIR);
      assert.deepEqual(Object.keys(COMMANDS).sort(), Object.keys(manifest().commands).sort());
      for (const [id, command] of Object.entries(COMMANDS)) assert.equal(typeof command.run, 'function', id);
      assert.equal(commandId('mini/image/create.ts'), 'mini:image:create');
      assert.equal(commandId('config/index.ts'), 'config');
    });

    it('what runs when the bundle loads holds no cloud SDK, Kubernetes client, gRPC, zod or yaml', () => {
      // The modules the bundle's entry reaches over static imports and requires (esbuild runs those as it loads);
      // a command reaches the rest with import(), when it runs.
      const { inputs } = JSON.parse(readFileSync(path.join(BUNDLE_DIR, META_FILE), 'utf8')) as {
        inputs: Record<string, { imports: { path: string; kind: string; external?: boolean }[] }>;
      };
      const loaded = new Set<string>();
      const todo = [ENTRY_NAME];
      while (todo.length > 0) {
        const file = todo.pop()!;
        if (loaded.has(file) || !inputs[file]) continue;
        loaded.add(file);
        for (const i of inputs[file].imports) if (i.kind !== 'dynamic-import' && !i.external) todo.push(i.path);
      }
      assert.ok(
        [...loaded].some((f) => f.startsWith('cli/commands/mini/up.ts')),
        'the entry imports the commands',
      );
      assert.deepEqual(
        [...loaded].filter((f) => HEAVY.test(f)),
        [],
      );
    });
  });
});
