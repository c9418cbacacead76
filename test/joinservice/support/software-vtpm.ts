/**
 * A local-vtpm node whose TPM is software: an ECC P-256 attestation key with the real AK template and quotes
 * that are real TPMS_ATTEST/TPMT_SIGNATURE structures, so the real local-vtpm validator checks them exactly
 * as it checks swtpm's. Used where many nodes must attest fast (the join-storm bench, protocol tests); the
 * swtpm-backed tests show the same service against real TPMs.
 */
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { localInstanceInfo, VARIANT } from '../../../lib/attestation/variants/local-vtpm.js';
import { qualifyingData, encodeVtpmAttestation } from '../../../lib/attestation/vtpm-document.js';
import { pcrDigest } from '../../../lib/attestation/tpm-quote.js';
import type {
  AkRegistry,
  AttestationDocument,
  Issuer,
  Measurements,
  RegisteredInstance,
} from '../../../lib/attestation/types.js';
import { AK_TEMPLATE } from '../../../lib/tpm/client.js';
import { TPM_ALG, TPM_GENERATED_VALUE, TPM_ST } from '../../../lib/tpm/constants.js';
import { TpmWriter } from '../../../lib/tpm/marshal.js';
import {
  encodeTpmPublic,
  encodeTpmSignature,
  tpmName,
  writePcrSelections,
  type TpmPublic,
} from '../../../lib/tpm/structures.js';

/** PCR values of a node running the expected image: PCRs 4, 9, 11 measured, all others zero. */
export function imagePcrs(image = 'node image v1'): Map<number, Uint8Array> {
  const pcrs = new Map<number, Uint8Array>();
  for (let i = 0; i < 24; i++) pcrs.set(i, new Uint8Array(32));
  for (const i of [4, 9, 11]) pcrs.set(i, new Uint8Array(createHash('sha256').update(`${image} part ${i}`).digest()));
  return pcrs;
}

/** Measurements that accept exactly `pcrs` on 4, 8, 9, 11, 12, 13 (enforced) and warn on 15. */
export function measurementsFor(pcrs: Map<number, Uint8Array>): Measurements {
  const out: Measurements = {};
  for (const i of [4, 8, 9, 11, 12, 13, 15])
    out[String(i)] = { expected: Buffer.from(pcrs.get(i)!).toString('hex'), warnOnly: i === 15 };
  return out;
}

export class SoftwareVtpm implements Issuer {
  readonly variant = VARIANT;
  readonly akPublic: Uint8Array;
  private readonly key: KeyObject;
  private readonly name: Uint8Array;

  constructor(
    readonly instance: string,
    readonly pcrs: Map<number, Uint8Array> = imagePcrs(),
  ) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const jwk = publicKey.export({ format: 'jwk' });
    this.key = privateKey;
    const template = AK_TEMPLATE as Extract<TpmPublic, { unique: { x: Uint8Array } }>;
    this.akPublic = encodeTpmPublic({
      ...template,
      unique: { x: Buffer.from(jwk.x!, 'base64url'), y: Buffer.from(jwk.y!, 'base64url') },
    });
    this.name = tpmName(this.akPublic);
  }

  async issue(userData: Uint8Array, nonce: Uint8Array): Promise<AttestationDocument> {
    const instanceInfo = localInstanceInfo(this.instance);
    const indices = [...this.pcrs.keys()].sort((a, b) => a - b);
    const attest = new TpmWriter()
      .u32(TPM_GENERATED_VALUE)
      .u16(TPM_ST.ATTEST_QUOTE)
      .tpm2b(this.name)
      .tpm2b(qualifyingData(instanceInfo, userData, nonce));
    attest.u64(1000n).u32(0).u32(0).u8(1).u64(0n);
    writePcrSelections(attest, [{ hashAlg: TPM_ALG.SHA256, pcrs: indices }]);
    attest.tpm2b(
      pcrDigest(
        TPM_ALG.SHA256,
        indices.map((i) => this.pcrs.get(i)!),
      ),
    );
    const quote = attest.finish();
    const rs = sign('sha256', quote, { key: this.key, dsaEncoding: 'ieee-p1363' });
    const signature = encodeTpmSignature({
      sigAlg: TPM_ALG.ECDSA,
      hashAlg: TPM_ALG.SHA256,
      r: rs.subarray(0, 32),
      s: rs.subarray(32),
    });
    return {
      variant: VARIANT,
      attestation: encodeVtpmAttestation({
        akPublic: this.akPublic,
        quotes: [{ hashAlg: TPM_ALG.SHA256, quote, signature, pcrs: this.pcrs }],
      }),
      instanceInfo: Buffer.from(instanceInfo).toString('base64'),
      userData: Buffer.from(userData).toString('base64'),
    };
  }
}

/** The address a test node has unless it says otherwise (kubeletCsr's default IP SAN). */
export const TEST_NODE_IP = '10.0.0.7';

/** The provider's record of which AK, role and addresses each instance has (what the local metadata server answers). */
export class TestAkRegistry implements AkRegistry {
  private readonly nodes = new Map<
    string,
    { akPublic: Uint8Array; role: 'control-plane' | 'worker'; addresses: string[] }
  >();

  register(
    instance: string,
    akPublic: Uint8Array,
    role: 'control-plane' | 'worker' = 'worker',
    addresses: string[] = [TEST_NODE_IP],
  ): void {
    this.nodes.set(instance, { akPublic, role, addresses });
  }

  async lookup(instance: string): Promise<RegisteredInstance | undefined> {
    return this.nodes.get(instance);
  }
}
