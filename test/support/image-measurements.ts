/**
 * Measurements for tests of cloud configs: `config generate` writes all-zero placeholders that `config validate` and
 * `create` refuse for the enforced PCRs boot extends (4, 9, 11), so a test that runs a cloud config fills them as
 * a user does with their image's measurements. The values are what a TPM reads after one extend of BOOT_DIGEST
 * into a reset PCR, so a test node whose vTPM gets `extendBootPcrs` (playing the image's boot) matches them.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { parseDocument } from 'yaml';
import type { TpmClient } from '../../lib/tpm/client.js';

export const BOOT_PCRS = [4, 9, 11] as const;
/** What the test image's "boot" extends into each of PCR 4, 9, 11. */
export const BOOT_DIGEST = createHash('sha256').update('constellation test image boot').digest();
/** The PCR value after that one extend: SHA-256(32 zero bytes || BOOT_DIGEST), lowercase hex. */
export const BOOTED_PCR_VALUE = createHash('sha256')
  .update(Buffer.concat([Buffer.alloc(32), BOOT_DIGEST]))
  .digest('hex');

/** Sets PCR 4, 9 and 11 of the config's attestation variant in the workspace's config file to BOOTED_PCR_VALUE. */
export async function fillImageMeasurements(
  workspaceDir: string,
  file = path.join(workspaceDir, 'constellation-conf.yaml'),
): Promise<void> {
  const doc = parseDocument(await fs.readFile(file, 'utf8'));
  const attestation = doc.get('attestation') as { items: Array<{ key: { value: string } | string }> };
  for (const item of attestation.items) {
    const key = typeof item.key === 'string' ? item.key : item.key.value;
    for (const pcr of BOOT_PCRS)
      if (doc.hasIn(['attestation', key, 'measurements', pcr]))
        doc.setIn(['attestation', key, 'measurements', pcr, 'expected'], BOOTED_PCR_VALUE);
  }
  await fs.writeFile(file, doc.toString());
}

/** Plays the image's boot on a test node's vTPM: extends BOOT_DIGEST into PCR 4, 9 and 11. */
export async function extendBootPcrs(tpm: Pick<TpmClient, 'pcrExtend'>): Promise<void> {
  for (const pcr of BOOT_PCRS) await tpm.pcrExtend(pcr, [{ hashAlg: 0x000b, digest: BOOT_DIGEST }]);
}
