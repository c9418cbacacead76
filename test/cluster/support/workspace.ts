/** A temporary workspace with a fresh local config, and the measurements a stand-in node shows. */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Measurements } from '../../../lib/attestation/types.js';
import { generateConfigFiles } from '../../../lib/config/index.js';

export async function tempDir(prefix = 'cl-cluster-'): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), prefix));
}

export async function localWorkspace(): Promise<string> {
  const dir = await tempDir();
  await generateConfigFiles(dir, 'local');
  return dir;
}

const hex = (byte: string) => byte.repeat(32);

/** PCRs 4, 9, 11 of a pretend node image (what a measuring provider reports at create). */
export const IMAGE_MEASUREMENTS: Measurements = {
  '4': { expected: hex('04'), warnOnly: false },
  '9': { expected: hex('09'), warnOnly: false },
  '11': { expected: hex('0b'), warnOnly: false },
};

/** What a node of that image shows: 4, 9, 11 as measured, 8, 12, 13, 15 zero. */
export const NODE_PCRS: Record<string, string> = {
  '4': hex('04'),
  '8': hex('00'),
  '9': hex('09'),
  '11': hex('0b'),
  '12': hex('00'),
  '13': hex('00'),
  '15': hex('00'),
};
