/**
 * The CLI from its bundle (dist/cli-bundle/, made by scripts/bundle-cli.mjs; docs/architecture.md, "How the CLI
 * starts"). This module becomes the bundle's loader.cjs, which bin/constellation requires when the bundle exists.
 *
 * Why: a command's start was mostly Node.js loading modules. `mini up` resolved, read and compiled a few hundred ES
 * modules of dist/ and node_modules/ before its first step, and Node.js 20 keeps no code cache for ES modules.
 * The bundle is one CommonJS file, cli.cjs, with every command and what it loads on the way of a local cluster
 * (oclif, gRPC, zod, yaml, …), run through `vm.Script` with V8's code cache, as the node program is
 * (bootstrapper/program-loader.ts). What is large and used by few commands stays in node_modules/ and is loaded
 * from there on first use: the cloud SDKs, the Kubernetes client, etcd's client, esbuild, TypeScript.
 *
 * oclif finds the commands through its "explicit" strategy: the package.json it is given names commands.cjs beside
 * the bundle, whose COMMANDS are the bundle's command classes, by id. The rest of package.json (topics, plugins,
 * hooks) is read as without the bundle, and oclif.manifest.json still gives every command's flags and help.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import vm from 'node:vm';
import type { execute } from '@oclif/core';
import { bundleLoader, CACHE_SUFFIX, wrap } from '../bootstrapper/program-loader.js';

/** The bundle's main file, in its folder. */
export const CLI_BUNDLE_FILE = 'cli.cjs';
/** oclif's explicit command target, beside the bundle: exports COMMANDS. */
export const COMMANDS_FILE = 'commands.cjs';

interface CliBundle {
  execute: typeof execute;
  /** Every command class, by oclif command id ("mini:up"). */
  COMMANDS: Record<string, unknown>;
}

const loaded = new Map<string, CliBundle>();

/**
 * The bundle's `import()` (scripts/bundle-cli.mjs rewrites its dynamic imports to call this): Node.js 20 gives code
 * that vm.Script compiled with a code cache no import() of its own, while this module is loaded by Node.js itself.
 * Specifiers resolve from the bundle's folder, where this module is.
 */
export function importModule(specifier: string): Promise<unknown> {
  return import(specifier);
}

/** The exports of the bundle in `dir`, loaded once per process (bin/constellation and commands.cjs both ask). */
export function cliBundle(bundleDir: string): CliBundle {
  const dir = path.resolve(bundleDir);
  let bundle = loaded.get(dir);
  if (!bundle) {
    const loader = bundleLoader(dir);
    bundle = loader.load(CLI_BUNDLE_FILE) as unknown as CliBundle;
    // Another Node.js than the one that built the bundle: correct, only slower (each file compiled from source).
    if (loader.rejected() > 0 && process.env.DEBUG)
      process.stderr.write(`constellation: V8 rejected the code cache of the CLI bundle\n`);
    loaded.set(dir, bundle);
  }
  return bundle;
}

/** Runs the command line with the bundle in `dir`, for the package at `root`. */
export async function runBundledCli(root: string, dir: string): Promise<void> {
  const pjson = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    oclif: Record<string, unknown>;
  };
  pjson.oclif.commands = {
    strategy: 'explicit',
    target: `./${path.relative(root, path.join(dir, COMMANDS_FILE)).split(path.sep).join('/')}`,
    identifier: 'COMMANDS',
  };
  await cliBundle(dir).execute({ loadOptions: { root, pjson } as never });
}

/**
 * Writes the bundle's code cache (cli.cjs.cache; run by scripts/bundle-cli.mjs at build time): the bytecode of the
 * functions the bundle's load compiles, made by loading it once as bundleLoader does. Not every function, as the
 * node program's caches (makeCodeCaches): the bundle holds every command, V8 reads and deserializes a whole cache
 * on each start, and one of all functions (6.7 MB) made `version` about 90 ms slower than no bundle at all, while
 * this one (about 1 MB) left it as fast and `mini up` as fast as the whole one did.
 */
export function makeCliCodeCache(bundleDir: string): void {
  const file = path.join(bundleDir, CLI_BUNDLE_FILE);
  // Named by its name in the folder, as the node program's caches: V8 takes the loader's name with the cache.
  const script = new vm.Script(wrap(fs.readFileSync(file, 'utf8')), { filename: CLI_BUNDLE_FILE });
  const module = { exports: {} };
  const run = script.runInThisContext() as (...args: unknown[]) => void;
  run.call(module.exports, module.exports, createRequire(file), module, file, bundleDir, pathToFileURL(file).href);
  fs.writeFileSync(file + CACHE_SUFFIX, script.createCachedData());
}
