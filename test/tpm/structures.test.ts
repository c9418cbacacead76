import assert from 'node:assert/strict';
import { describe, it } from 'mocha';
import { TPM_ALG, TPM_ECC, TPMA_OBJECT } from '../../lib/tpm/constants.js';
import { TpmFormatError, TpmReader, TpmWriter } from '../../lib/tpm/marshal.js';
import {
  encodeTpmPublic,
  encodeTpmSignature,
  parseTpmAttest,
  parseTpmPublic,
  parseTpmSignature,
  readPcrSelections,
  tpmName,
  writePcrSelections,
  type TpmPublic,
} from '../../lib/tpm/structures.js';
import { AK_TEMPLATE } from '../../lib/tpm/client.js';

describe('TPM structures', () => {
  it('marshals a TPML_PCR_SELECTION as the specification lays it out and reads it back', () => {
    const w = new TpmWriter();
    writePcrSelections(w, [
      { hashAlg: TPM_ALG.SHA256, pcrs: [0, 1, 15] },
      { hashAlg: TPM_ALG.SHA384, pcrs: [23] },
    ]);
    const bytes = w.finish();
    assert.equal(Buffer.from(bytes).toString('hex'), '00000002' + '000b' + '03' + '038000' + '000c' + '03' + '000080');
    assert.deepEqual(readPcrSelections(new TpmReader(bytes)), [
      { hashAlg: TPM_ALG.SHA256, pcrs: [0, 1, 15] },
      { hashAlg: TPM_ALG.SHA384, pcrs: [23] },
    ]);
    assert.throws(() => writePcrSelections(new TpmWriter(), [{ hashAlg: TPM_ALG.SHA256, pcrs: [24] }]), TpmFormatError);
  });

  it('round-trips RSA and ECC TPMT_PUBLIC areas', () => {
    const rsa: TpmPublic = {
      type: TPM_ALG.RSA,
      nameAlg: TPM_ALG.SHA256,
      objectAttributes: TPMA_OBJECT.sign | TPMA_OBJECT.restricted,
      authPolicy: new Uint8Array([1, 2, 3]),
      parameters: {
        symmetric: { algorithm: TPM_ALG.NULL },
        scheme: { scheme: TPM_ALG.RSASSA, hashAlg: TPM_ALG.SHA256 },
        keyBits: 2048,
        exponent: 0,
      },
      unique: { n: new Uint8Array(256).fill(7) },
    };
    assert.deepEqual(parseTpmPublic(encodeTpmPublic(rsa)), rsa);
    const ecc: TpmPublic = {
      ...AK_TEMPLATE,
      parameters: {
        symmetric: { algorithm: TPM_ALG.AES, keyBits: 128, mode: TPM_ALG.CFB },
        scheme: { scheme: TPM_ALG.NULL },
        curveId: TPM_ECC.NIST_P384,
        kdf: { scheme: TPM_ALG.NULL },
      },
    };
    assert.deepEqual(parseTpmPublic(encodeTpmPublic(ecc)), ecc);
    assert.equal(tpmName(encodeTpmPublic(ecc)).length, 34);
  });

  it('refuses truncated, oversized and trailing input', () => {
    const bytes = encodeTpmPublic(AK_TEMPLATE);
    assert.throws(() => parseTpmPublic(bytes.subarray(0, bytes.length - 1)), /truncated/);
    assert.throws(() => parseTpmPublic(new Uint8Array([...bytes, 0])), /trailing/);
    assert.throws(() => parseTpmPublic(new Uint8Array([0, 0x25, ...bytes.subarray(2)])), /not supported/);
    assert.throws(() => parseTpmSignature(new Uint8Array([0, 0x10])), TpmFormatError);
    assert.throws(
      () => parseTpmAttest(new Uint8Array([0xff, 0x54, 0x43, 0x46, 0x80, 0x18])),
      /not TPM_GENERATED_VALUE/,
    );
  });

  it('round-trips ECDSA and RSA signatures', () => {
    const ecdsa = {
      sigAlg: TPM_ALG.ECDSA,
      hashAlg: TPM_ALG.SHA256,
      r: new Uint8Array(32).fill(1),
      s: new Uint8Array(31).fill(2),
    } as const;
    assert.deepEqual(parseTpmSignature(encodeTpmSignature(ecdsa)), ecdsa);
    const rsa = { sigAlg: TPM_ALG.RSASSA, hashAlg: TPM_ALG.SHA384, sig: new Uint8Array(256).fill(3) } as const;
    assert.deepEqual(parseTpmSignature(encodeTpmSignature(rsa)), rsa);
  });
});
