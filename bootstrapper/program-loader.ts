/**
 * The node program's entry in its bundle (dist/node-program/main.cjs, made from this file by
 * scripts/bundle-node-program.mjs): loads the bundle's CommonJS files (program.cjs and its chunk-<hash>.cjs) itself,
 * each through `vm.Script` with V8's code cache for it (<file>.cache beside it) when there is one, and starts the
 * node (program.cjs's main()).
 *
 * Why: Node.js 20 has no code cache for ES modules (`module.enableCompileCache` came in Node.js 22), and compiling
 * JavaScript was the largest JavaScript cost of a node's start under emulation in a VM
 * (docs/workflows/node-images.md, "The node program's start in the VM"). A code cache holds V8's bytecode of the
 * functions of a file, so V8 deserializes instead of parsing and compiling them.
 *
 * The caches are made at build time (makeCodeCaches, below) by the Node.js binary the images run, with every function
 * compiled and nothing run, from the same wrapped source this loader compiles: V8 checks that its version, its flags
 * and the source's length match, and otherwise rejects the cache (`cachedDataRejected`); the file is then compiled
 * from its source as without a cache, and the loader says on stderr how many were rejected (no content). A cache is
 * code: it is a file of the measured node program folder like the chunks (docs/workflows/local-provider.md, "Boot
 * measurements"), and it is made reproducibly (`--random-seed`, see makeCodeCaches).
 *
 * The bundle's ES modules were turned into CommonJS by the bundle step (each file keeps its `"use strict"` semantics
 * through the wrapper below); `require("./chunk-<hash>.cjs")` in them is served here, so each file runs once, and
 * anything else (Node.js's modules, koffi.node) by Node.js's require from the bundle's folder.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';

/** The node program's main module in the bundle's folder (esbuild's entry chunk, as CommonJS). */
export const PROGRAM_FILE = 'program.cjs';
/** The suffix of a file's code cache beside it. */
export const CACHE_SUFFIX = '.cache';

const CHUNK = /^\.\/(chunk-[A-Z0-9]+\.cjs)$/;

/**
 * A file's source as the loader compiles it: a function of CommonJS's names and `__importMetaUrl` (the bundle step
 * replaces `import.meta.url` by it), strict as the ES module it was. The same text at build and run time.
 */
export function wrap(source: string): string {
  return `(function (exports, require, module, __filename, __dirname, __importMetaUrl) {"use strict";${source}\n})`;
}

export interface LoadedBundle {
  /** Runs a file of the bundle (once; later calls return its exports). */
  load(rel: string): Record<string, unknown>;
  /** How many files had a cache that V8 rejected. */
  rejected(): number;
}

/** A loader for the bundle in `dir`. */
export function bundleLoader(dir: string): LoadedBundle {
  const nodeRequire = createRequire(path.join(dir, PROGRAM_FILE));
  const modules = new Map<string, { exports: Record<string, unknown> }>();
  let rejected = 0;
  const chunkRequire = (id: string): unknown => {
    const chunk = CHUNK.exec(id);
    return chunk ? load(chunk[1]!) : nodeRequire(id);
  };
  function load(rel: string): Record<string, unknown> {
    const known = modules.get(rel);
    if (known) return known.exports;
    const file = path.join(dir, rel);
    const module = { exports: {} as Record<string, unknown> };
    modules.set(rel, module);
    let cachedData: Buffer | undefined;
    try {
      cachedData = fs.readFileSync(file + CACHE_SUFFIX);
    } catch {
      // no cache for this file: compiled from its source
    }
    const script = new vm.Script(wrap(fs.readFileSync(file, 'utf8')), { filename: file, cachedData });
    if (cachedData && script.cachedDataRejected) rejected++;
    const fn = script.runInThisContext() as (...args: unknown[]) => void;
    try {
      fn.call(module.exports, module.exports, chunkRequire, module, file, dir, pathToFileURL(file).href);
    } catch (err) {
      modules.delete(rel); // as Node.js's require: a file that threw is run again by the next require
      throw err;
    }
    return module.exports;
  }
  return { load, rejected: () => rejected };
}

/**
 * Writes <file>.cache for each file (relative to `dir`), holding the bytecode of all its functions, compiling them
 * without running anything. Run by the bundle step in a Node.js started with `--random-seed=1`: V8 seeds its string
 * hashes from the random seed, and with a fixed seed the caches are the same bytes on every build (with a random one
 * they differ). V8 leaves the random seed out of the flags a cache must match, so a node started without it (a
 * random hash seed, as always) accepts them. Every function is compiled (`--no-lazy`) and the flags are set back
 * before the caches are made, so they carry the default flags a node runs with.
 */
export function makeCodeCaches(dir: string, files: readonly string[]): void {
  v8.setFlagsFromString('--no-lazy');
  const scripts: Array<[string, vm.Script]> = [];
  try {
    for (const rel of files) {
      // Named by its path in the folder: the cache holds the name (V8 gives the script the loader's name when it
      // takes the cache), and the bytes must not depend on where the bundle was built.
      const source = wrap(fs.readFileSync(path.join(dir, rel), 'utf8'));
      scripts.push([rel, new vm.Script(source, { filename: rel })]);
    }
  } finally {
    v8.setFlagsFromString('--lazy');
  }
  for (const [rel, script] of scripts) fs.writeFileSync(path.join(dir, rel + CACHE_SUFFIX), script.createCachedData());
}

/**
 * Starts the node program of the bundle in `dir`: what main.cjs's main() does, whether Node.js runs main.cjs or the
 * local launcher imports it and calls main() (providers/local/launcher.ts).
 */
export function runBundledProgram(dir: string): Promise<void> {
  const bundle = bundleLoader(dir);
  const program = bundle.load(PROGRAM_FILE) as { main: () => Promise<void> };
  if (bundle.rejected() > 0)
    process.stderr.write(
      `node program: V8 rejected the code cache of ${bundle.rejected()} files (compiled from source instead)\n`,
    );
  return program.main();
}
