/**
 * Key derivation throughput: the join service derives one state-disk key per join, the bootstrapper the
 * measurement secret, clusterID and PCR 15 once per boot. Targets are generous floors (a join storm of
 * a thousand nodes must not wait on HKDF); ratios above 1 beat them.
 */
import {
  deriveClusterId,
  deriveMeasurementSecret,
  deriveStateDiskKey,
  expectedPcr15,
  generateMasterSecret,
} from '../lib/kms/index.js';

const TARGET_DISK_KEYS_PER_SECOND = 10_000;
const TARGET_CLUSTER_CHAINS_PER_SECOND = 5_000;

function perSecond(iterations: number, run: (i: number) => void): number {
  for (let i = 0; i < Math.min(iterations, 1000); i++) run(i); // warm up
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) run(i);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return iterations / seconds;
}

export default async function (out: (line: string) => void): Promise<void> {
  const master = generateMasterSecret();
  const salt = new Uint8Array(32).fill(1);
  const uuid = (i: number) => `00000000-0000-0000-0000-${i.toString(16).padStart(12, '0')}`;

  const diskKeys = perSecond(50_000, (i) => deriveStateDiskKey(master, uuid(i)));
  out(
    `state-disk key derivations: ${Math.round(diskKeys)}/s (target ${TARGET_DISK_KEYS_PER_SECOND}/s, ratio ${(diskKeys / TARGET_DISK_KEYS_PER_SECOND).toFixed(2)})`,
  );

  const chains = perSecond(20_000, () => expectedPcr15(deriveClusterId(deriveMeasurementSecret(master), salt)));
  out(
    `measurement secret -> clusterID -> PCR 15: ${Math.round(chains)}/s (target ${TARGET_CLUSTER_CHAINS_PER_SECOND}/s, ratio ${(chains / TARGET_CLUSTER_CHAINS_PER_SECOND).toFixed(2)})`,
  );
}
