/**
 * Attestation kits for the channel tests and the bench: an issuer for the node, a validator factory for the
 * verifier, and the node's PCR values. The software stand-in always works; the swtpm kit needs swtpm.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Issuer, Measurements, Validator } from '../../../lib/attestation/types.js';
import * as localVtpm from '../../../lib/attestation/variants/local-vtpm.js';
import { VtpmIssuer } from '../../../lib/attestation/vtpm-issuer.js';
import { TpmClient } from '../../../lib/tpm/client.js';
import { TPM_ALG } from '../../../lib/tpm/constants.js';
import { startSwtpm, type SwtpmHandle } from '../../../lib/tpm/swtpm.js';
import { FakeAttester, FakeValidator } from './fake-attestation.js';

export interface AttestationKit {
  description: string;
  issuer: Issuer;
  /** PCR index -> the node's actual value (hex) in the bank the validator compares. */
  pcrs: Record<string, string>;
  /** PCR indices the measurements name (each covered by the quote). */
  measured: number[];
  validator(measurements: Measurements, options?: { trustAk?: boolean }): Validator;
  close(): Promise<void>;
}

export function softwareKit(): AttestationKit {
  const pcrs = Object.fromEntries(
    [4, 8, 9, 11, 12, 13, 15].map((i) => [String(i), Buffer.alloc(32, i).toString('hex')]),
  );
  const issuer = new FakeAttester(pcrs);
  return {
    description: 'software stand-in (ECDSA P-256 "AK", no TPM)',
    issuer,
    pcrs,
    measured: [4, 8, 9, 11, 12, 13],
    validator: (measurements, options) =>
      new FakeValidator(measurements, options?.trustAk === false ? [] : [issuer.akPublic]),
    close: async () => undefined,
  };
}

/**
 * A real local-vtpm node: its own swtpm (in a temp dir), PCRs 4, 9 and 11 extended like a node image, the
 * VtpmIssuer quoting all SHA-256 PCRs, and the local-vtpm validator with an AK registry that knows this node.
 */
export async function swtpmKit(): Promise<AttestationKit> {
  const stateDir = await mkdtemp(path.join(os.tmpdir(), 'atls-swtpm-'));
  let swtpm: SwtpmHandle | undefined;
  let tpm: TpmClient | undefined;
  const close = async () => {
    tpm?.close();
    await swtpm?.stop();
    await rm(stateDir, { recursive: true, force: true });
  };
  try {
    swtpm = await startSwtpm({ stateDir });
    tpm = await TpmClient.connect(swtpm.serverSocket);
    // Every image PCR is measured (validators refuse an incomplete set); 8, 12 and 13 stay zero, as on a node.
    const measured = [4, 8, 9, 11, 12, 13];
    for (const index of [4, 9, 11]) {
      await tpm.pcrExtend(index, [
        { hashAlg: TPM_ALG.SHA256, digest: createHash('sha256').update(`image part ${index}`).digest() },
      ]);
    }
    const values = await tpm.pcrRead(TPM_ALG.SHA256, [...Array(24).keys()]);
    const pcrs = Object.fromEntries([...values].map(([i, v]) => [String(i), Buffer.from(v).toString('hex')]));
    const instance = 'atls-test-node';
    const issuer = new VtpmIssuer({
      variant: localVtpm.VARIANT,
      tpm,
      instanceInfo: localVtpm.localInstanceInfo(instance),
    });
    const probe = await issuer.issue(new Uint8Array(32), new Uint8Array(32));
    const ak = new Uint8Array(Buffer.from((probe.attestation as { akPublic: string }).akPublic, 'base64'));
    return {
      description: 'swtpm-backed local-vtpm (VtpmIssuer, one SHA-256 quote of 24 PCRs)',
      issuer,
      pcrs,
      measured,
      validator: (measurements, options) =>
        localVtpm.createValidator(
          { measurements },
          {
            akRegistry: {
              lookup: async (name) => (name === instance && options?.trustAk !== false ? { akPublic: ak } : undefined),
            },
          },
        ),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Whether swtpm is installed (the Debian package; `npm run system-deps` installs it). */
export function hasSwtpm(): boolean {
  return spawnSync('swtpm', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** The best kit this machine offers: swtpm-backed where swtpm is installed, else the software stand-in. */
export async function openAttestationKit(): Promise<AttestationKit> {
  return hasSwtpm() ? swtpmKit() : softwareKit();
}
