/** A cluster store holding a join configuration as init writes it, in memory, for tests and the bench. */
import { randomBytes } from 'node:crypto';
import type { Measurements } from '../../../lib/attestation/types.js';
import { MemoryClusterStore } from '../../../lib/cluster-store/memory.js';
import type { JoinConfig } from '../../../lib/cluster-store/types.js';
import { generateMasterSecret, generateMeasurementSalt, type MasterSecret } from '../../../lib/kms/index.js';
import { createClusterPki, type PkiFiles } from '../../../lib/pki/cluster-pki.js';

export const TEST_NOW = new Date('2030-01-02T03:04:05.000Z');

export interface TestStore {
  store: MemoryClusterStore;
  contents: JoinConfig;
  masterSecret: MasterSecret;
  pki: PkiFiles;
}

export async function makeTestStore(measurements: Measurements, variant = 'local-vtpm'): Promise<TestStore> {
  const masterSecret = generateMasterSecret();
  const pki = createClusterPki({ clock: () => TEST_NOW, clusterName: 'test' });
  const contents: JoinConfig = {
    attestation: { variant, config: { measurements } },
    masterSecret,
    measurementSalt: generateMeasurementSalt(),
    joinServiceKey: new Uint8Array(randomBytes(32)),
    cluster: { apiServerEndpoint: '127.0.0.1:6443', kubernetesVersion: 'v1.31.1' },
    pki,
  };
  const store = new MemoryClusterStore();
  await store.writeJoinConfig(contents);
  return { store, contents, masterSecret, pki };
}
