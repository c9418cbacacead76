/** Evidence pieces the cloud-variant tests share: AKs as TPMT_PUBLIC, documents around an instanceInfo. */
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { TPM_ALG, TPMA_OBJECT } from '../../../lib/tpm/constants.js';
import { encodeTpmPublic } from '../../../lib/tpm/structures.js';
import { AttestationError, type AttestationDocument } from '../../../lib/attestation/types.js';

export interface TestAk {
  akPublic: Uint8Array;
  key: KeyObject;
  /** n and e as base64url, as in Azure's runtime data. */
  jwk: { n: string; e: string };
}

/** An RSA AK's TPMT_PUBLIC from a modulus (exponent 65537, encoded as 0 like real TPMs do). */
export function akFromModulus(n: Uint8Array): Uint8Array {
  return encodeTpmPublic({
    type: TPM_ALG.RSA,
    nameAlg: TPM_ALG.SHA256,
    objectAttributes:
      TPMA_OBJECT.fixedTPM |
      TPMA_OBJECT.fixedParent |
      TPMA_OBJECT.sensitiveDataOrigin |
      TPMA_OBJECT.userWithAuth |
      TPMA_OBJECT.restricted |
      TPMA_OBJECT.sign,
    authPolicy: new Uint8Array(0),
    parameters: {
      symmetric: { algorithm: TPM_ALG.NULL },
      scheme: { scheme: TPM_ALG.RSASSA, hashAlg: TPM_ALG.SHA256 },
      keyBits: n.length * 8,
      exponent: 0,
    },
    unique: { n },
  });
}

/** A fresh RSA AK (1024 bits: real AKs have 2048, but key generation would dominate the tests' time). */
export function makeAk(): TestAk {
  const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
  const jwk = publicKey.export({ format: 'jwk' }) as { n: string; e: string };
  return { akPublic: akFromModulus(Buffer.from(jwk.n, 'base64url')), key: publicKey, jwk: { n: jwk.n, e: jwk.e } };
}

export const b64 = (b: Uint8Array | string) => Buffer.from(b).toString('base64');

/** A document carrying `instanceInfo`; the vTPM part is not looked at by the AK trust rules under test. */
export function documentWith(variant: string, instanceInfo: unknown): AttestationDocument {
  return {
    variant,
    attestation: { akPublic: '', quotes: [] },
    instanceInfo: b64(JSON.stringify(instanceInfo)),
    userData: '',
  };
}

/** Resolves when `p` rejects with an AttestationError whose message matches `re`. */
export async function rejectsWith(p: Promise<unknown>, re: RegExp): Promise<void> {
  await assert.rejects(p, (err: Error) => {
    assert.ok(err instanceof AttestationError, `expected an AttestationError, got ${String(err)}`);
    assert.match(err.message, re);
    return true;
  });
}
