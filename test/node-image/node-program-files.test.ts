import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { IMAGE_PROVIDERS, IMAGE_VARIANTS } from '../../lib/node-image/build/init.js';
import {
  nodeProgramFiles,
  readProviderFileLists,
  type ProviderFileLists,
} from '../../lib/node-image/build/node-program.js';
import { UserError } from '../../lib/errors.js';
import { NODE_PROGRAM_DIR } from '../support/built-image.js';

/**
 * The chunks a bundle file imports, read from its own text (CommonJS, scripts/bundle-node-program.mjs): statically
 * (`require("./chunk-…")`) and dynamically (`Promise.resolve().then(()=>require("./chunk-…"))`).
 */
async function chunkImports(file: string): Promise<{ static: string[]; dynamic: string[] }> {
  const text = await fs.readFile(path.join(NODE_PROGRAM_DIR, file), 'utf8');
  const dynamic = [...text.matchAll(/\.then\(\(\)=>require\("\.\/(chunk-[A-Z0-9]+\.cjs)"\)\)/g)].map((m) => m[1]!);
  const all = [...text.matchAll(/\brequire\("\.\/(chunk-[A-Z0-9]+\.cjs)"\)/g)].map((m) => m[1]!);
  return { static: all.filter((c) => !dynamic.includes(c)), dynamic };
}

const SDKS = /^@(google-cloud|aws-sdk|azure)\//;
const OWN_SDK: Record<string, RegExp | undefined> = {
  aws: /^@aws-sdk\//,
  azure: /^@azure\/arm-/,
  gcp: /^@google-cloud\/compute$/,
};

/** The program's main file (the entry main.cjs loads it) and the entry, which loads the others. */
const PROGRAM = 'program.cjs';
const ENTRY = 'main.cjs';

/** The chunks reached from `from` over each chunk's static imports and the dynamic ones `follow` accepts. */
async function reachedFromMain(
  follow: (file: string, chunk: string) => boolean,
  from: string = PROGRAM,
): Promise<Set<string>> {
  const reached = new Set<string>();
  const todo = [from];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (reached.has(file)) continue;
    reached.add(file);
    const imports = await chunkImports(file);
    todo.push(...imports.static, ...imports.dynamic.filter((chunk) => follow(file, chunk)));
  }
  return reached;
}

describe("the node program's files per provider (dist/node-program/providers.json of `npm run build`)", function () {
  this.timeout(60_000);
  let lists: ProviderFileLists;

  before(async () => {
    lists = await readProviderFileLists(NODE_PROGRAM_DIR);
  });

  it("lists each provider's files as the closure of the chunks' own imports from program.cjs, but the registry's of the other providers' entries, with the entry and the code caches of what it compiles before it listens", async () => {
    const entries = new Set(Object.values(lists.providers).map((l) => l.entry));
    assert.deepEqual(
      (await chunkImports(lists.loader)).dynamic.filter((c) => entries.has(c)).sort(),
      [...entries].sort(),
      "the registry's chunk imports every provider's entry",
    );
    for (const [name, list] of Object.entries(lists.providers)) {
      const reached = await reachedFromMain(
        (file, chunk) => file !== lists.loader || !entries.has(chunk) || chunk === list.entry,
      );
      assert.deepEqual(
        list.files.filter((f) => f.endsWith('.cjs') && f !== ENTRY),
        [...reached].sort(),
        name,
      );
      assert.ok(list.files.includes(ENTRY), name);
      // The caches: program.cjs and the provider's entry with what they import statically.
      const start = new Set([
        ...(await reachedFromMain(() => false)),
        ...(await reachedFromMain(() => false, list.entry)),
      ]);
      assert.deepEqual(
        list.files.filter((f) => f.endsWith('.cache')),
        [...start].map((f) => `${f}.cache`).sort(),
        name,
      );
    }
  });

  it("a qemu node's files carry no cloud SDK; each cloud's carry its own SDK and no other cloud's", () => {
    assert.deepEqual(
      lists.providers.qemu!.packages.filter((p) => SDKS.test(p)),
      [],
    );
    assert.deepEqual(
      lists.providers.local!.packages.filter((p) => SDKS.test(p)),
      [],
    );
    for (const [cloud, own] of Object.entries(OWN_SDK)) {
      const sdks = lists.providers[cloud]!.packages.filter((p) => SDKS.test(p));
      assert.ok(
        sdks.some((p) => own!.test(p)),
        `${cloud}: ${sdks.join(', ')}`,
      );
      for (const [other, theirs] of Object.entries(OWN_SDK))
        if (other !== cloud)
          assert.deepEqual(
            sdks.filter((p) => theirs!.test(p)),
            [],
            `${cloud} carries ${other}'s SDK`,
          );
    }
  });

  it('what program.cjs imports statically (compiled before the node listens) holds gRPC but not protobufjs, which only the etcd client loads, nor zod', async () => {
    const reached = await reachedFromMain(() => false);
    const text = (await Promise.all([...reached].map((f) => fs.readFile(path.join(NODE_PROGRAM_DIR, f), 'utf8')))).join(
      '\n',
    );
    assert.match(text, /"node_modules\/@grpc\/grpc-js\/build\/src\/server\.js"/);
    for (const pkg of ['protobufjs', '@grpc/proto-loader', 'long'])
      assert.doesNotMatch(text, new RegExp(`"node_modules/${pkg}/`), pkg);
    // zod (a third of it before) loads with the first schema after the node listens (lib/json-shape.ts says why).
    assert.doesNotMatch(text, /\bZodType\b/, 'zod');
  });

  // A node's platform loads before it listens; zod's chunk (its compile and its module initialization) cost a local
  // worker about 80 ms of CPU of its start (docs/workflows/mini.md, "How long it takes").
  for (const { provider, platformFunction, issuerVia } of [
    {
      provider: 'qemu',
      platformFunction: 'qemuNodePlatform',
      issuerVia: 'its issuer does not load the document decoder',
    },
    { provider: 'local', platformFunction: 'localNodePlatform', issuerVia: 'its environment is checked by hand' },
  ]) {
    it(`a ${provider} node's platform (loaded before it listens) imports no zod: ${issuerVia}`, async () => {
      // A local node loads the whole folder (it is no image provider of providers.json).
      const chunks =
        provider === 'local'
          ? (await fs.readdir(NODE_PROGRAM_DIR)).filter((f) => f.endsWith('.cjs'))
          : lists.providers[provider]!.files.filter((f) => f.endsWith('.cjs'));
      const texts = new Map(
        await Promise.all(
          chunks.map(async (f) => [f, await fs.readFile(path.join(NODE_PROGRAM_DIR, f), 'utf8')] as const),
        ),
      );
      const platform = chunks.filter((f) => new RegExp(`\\bfunction ${platformFunction}\\(`).test(texts.get(f)!));
      assert.equal(platform.length, 1, `one chunk defines ${platformFunction}`);
      const reached = new Set<string>();
      const todo = [...platform];
      while (todo.length > 0) {
        const file = todo.pop()!;
        if (reached.has(file)) continue;
        reached.add(file);
        todo.push(...(await chunkImports(file)).static);
      }
      assert.ok(
        [...reached].some((f) => /\bVtpmIssuer=class\b/.test(texts.get(f)!)),
        'the issuer is reached',
      );
      for (const file of reached) assert.doesNotMatch(texts.get(file)!, /\bZodType\b/, file);
    });
  }

  it("each image provider's node starts from its files alone and reaches its platform's metadata service", async () => {
    const work = await fs.mkdtemp(path.join(os.tmpdir(), 'node-program-files-'));
    const boot: Record<string, unknown> = {
      qemu: { metadataUrl: 'http://127.0.0.1:1', nodeIp: '127.0.0.1' },
      aws: { imdsEndpoint: 'http://127.0.0.1:1' },
      azure: { imdsEndpoint: 'http://127.0.0.1:1' },
      gcp: { metadataEndpoint: 'http://127.0.0.1:1' },
    };
    try {
      await Promise.all(
        IMAGE_PROVIDERS.map(async (provider) => {
          const dir = path.join(work, provider);
          for (const rel of await nodeProgramFiles(NODE_PROGRAM_DIR, provider)) {
            await fs.mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
            await fs.copyFile(path.join(NODE_PROGRAM_DIR, rel), path.join(dir, rel));
          }
          const config = path.join(work, `${provider}.json`);
          await fs.writeFile(
            config,
            JSON.stringify({
              csp: provider,
              attestationVariant: IMAGE_VARIANTS[provider],
              providerOptions: boot[provider],
              paths: { nodeDir: path.join(work, `${provider}-node`) },
            }),
          );
          const child = spawn(process.execPath, [path.join(dir, ENTRY)], {
            cwd: dir,
            env: { PATH: process.env.PATH, NODE_PATH: '', CONSTELLATION_BOOT_CONFIG: config },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          let output = '';
          child.stdout.on('data', (d: Buffer) => (output += d.toString()));
          child.stderr.on('data', (d: Buffer) => (output += d.toString()));
          const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
          assert.equal(code, 1, `${provider}: ${output}`);
          const line = JSON.parse(output.trim().split('\n').at(-1)!) as { reason: string };
          assert.doesNotMatch(line.reason, /Cannot find module|ERR_MODULE_NOT_FOUND/, provider);
          assert.match(
            line.reason,
            /says this node runs on \w+, but \w+'s metadata service does not confirm it/,
            `${provider}: ${line.reason}`,
          );
        }),
      );
    } finally {
      await fs.rm(work, { recursive: true, force: true });
    }
  });

  it('an image build refuses a bundle without the lists, a provider they do not list, a listed file missing or outside the folder', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'node-program-lists-'));
    try {
      await fs.writeFile(path.join(dir, 'main.cjs'), '');
      await assert.rejects(
        nodeProgramFiles(dir, 'qemu'),
        (err: unknown) =>
          err instanceof UserError && /no providers\.json/.test(err.message) && /npm run build/.test(err.hint ?? ''),
      );
      await fs.writeFile(
        path.join(dir, 'providers.json'),
        JSON.stringify({
          loader: 'main.cjs',
          providers: { aws: { entry: 'main.cjs', files: ['main.cjs', 'gone.cjs'], packages: [] } },
        }),
      );
      await assert.rejects(nodeProgramFiles(dir, 'qemu'), /lists no files for provider "qemu"/);
      await assert.rejects(nodeProgramFiles(dir, 'aws'), /lacks gone\.cjs/);
      for (const outside of ['../main.cjs', '/etc/passwd']) {
        await fs.writeFile(
          path.join(dir, 'providers.json'),
          JSON.stringify({
            loader: 'main.cjs',
            providers: { aws: { entry: 'main.cjs', files: [outside], packages: [] } },
          }),
        );
        await assert.rejects(nodeProgramFiles(dir, 'aws'), /is not a list of files per provider/, outside);
      }
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
