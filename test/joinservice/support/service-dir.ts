/** A join service directory in a temp dir, as init writes it, for tests and the bench. */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Measurements } from '../../../lib/attestation/types.js';
import { generateMasterSecret, generateMeasurementSalt, type MasterSecret } from '../../../lib/kms/index.js';
import { createClusterPki, type PkiFiles } from '../../../lib/pki/cluster-pki.js';
import { writeServiceFiles, type ServiceFileContents } from '../../../joinservice/service-files.js';

export const TEST_NOW = new Date('2030-01-02T03:04:05.000Z');

export interface TestServiceDir {
  dir: string;
  contents: ServiceFileContents;
  masterSecret: MasterSecret;
  pki: PkiFiles;
  remove(): Promise<void>;
}

export async function makeServiceDir(measurements: Measurements, variant = 'local-vtpm'): Promise<TestServiceDir> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'joinservice-'));
  const masterSecret = generateMasterSecret();
  const pki = createClusterPki({ clock: () => TEST_NOW, clusterName: 'test' });
  const contents: ServiceFileContents = {
    attestation: { variant, config: { measurements } },
    masterSecret,
    measurementSalt: generateMeasurementSalt(),
    cluster: { apiServerEndpoint: '127.0.0.1:6443', kubernetesVersion: 'v1.31.1' },
    pki,
  };
  await writeServiceFiles(dir, contents);
  return { dir, contents, masterSecret, pki, remove: () => fs.rm(dir, { recursive: true, force: true }) };
}
