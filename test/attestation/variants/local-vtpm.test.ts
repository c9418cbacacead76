import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'mocha';
import {
  createValidator,
  localInstanceInfo,
  VtpmIssuer,
  type AkRegistry,
  type VtpmAttestation,
} from '../../../lib/attestation/index.js';
import { IMAGE_PCRS } from '../../../lib/attestation/measurements.js';
import { TPM_ALG } from '../../../lib/tpm/constants.js';
import { AK_TEMPLATE, TpmClient } from '../../../lib/tpm/client.js';
import { encodeTpmPublic } from '../../../lib/tpm/structures.js';
import { powerCycleSwtpm } from '../../../lib/tpm/swtpm.js';
import { startTestTpm, type TestTpm } from '../../tpm/support.js';

describe('local-vtpm variant', () => {
  let tpm: TestTpm;
  let client: TpmClient;
  let ak: Uint8Array;
  const registered = new Map<string, Uint8Array>();
  const akRegistry: AkRegistry = {
    lookup: async (instance) => {
      const akPublic = registered.get(instance);
      return akPublic && { akPublic };
    },
  };
  // Every image PCR (a validator refuses less) and PCR 15: a fresh TPM, nothing extended.
  const measurements = Object.fromEntries(
    [...IMAGE_PCRS, 15].map((i) => [String(i), { expected: '00'.repeat(32), warnOnly: false }]),
  );
  const issuerFor = (instance: string) =>
    new VtpmIssuer({ variant: 'local-vtpm', tpm: client, instanceInfo: localInstanceInfo(instance) });

  before(async () => {
    tpm = await startTestTpm('local-vtpm-');
    client = await TpmClient.connect(tpm.swtpm.serverSocket);
    const key = await client.createAttestationKey(); // what the provider registers at node creation
    ak = key.publicArea;
    await client.flushContext(key.handle);
    registered.set('node-1', ak);
  });
  after(async () => {
    client?.close();
    await tpm?.cleanup();
  });

  it('accepts a node whose AK is the one registered for it', async () => {
    const validator = await createValidator('local-vtpm', { measurements }, { akRegistry });
    assert.equal(validator.variant, 'local-vtpm');
    const nonce = randomBytes(32);
    const doc = await issuerFor('node-1').issue(new Uint8Array([1, 2, 3]), nonce);
    assert.equal(Buffer.from(doc.instanceInfo, 'base64').toString(), '{"instance":"node-1"}');
    const result = await validator.validate(doc, nonce);
    assert.deepEqual(result.userData, new Uint8Array([1, 2, 3]));
  });

  it('asks the registry once per document, and names the instance with its registered role and addresses', async () => {
    // The local registry is an HTTP request to the metadata server per lookup (on the join service's thread).
    const asked: string[] = [];
    const counting: AkRegistry = {
      lookup: async (instance) => {
        asked.push(instance);
        return { akPublic: ak, role: 'worker', addresses: ['10.0.0.7'] };
      },
    };
    const validator = await createValidator('local-vtpm', { measurements }, { akRegistry: counting });
    const nonce = randomBytes(32);
    const result = await validator.validate(await issuerFor('node-1').issue(new Uint8Array(0), nonce), nonce);
    assert.deepEqual(asked, ['node-1']);
    assert.deepEqual(result.instance, { name: 'node-1', role: 'worker', addresses: ['10.0.0.7'] });
  });

  it('rejects an instance without a registered AK', async () => {
    const validator = await createValidator('local-vtpm', { measurements }, { akRegistry });
    const nonce = randomBytes(32);
    const doc = await issuerFor('node-9').issue(new Uint8Array(0), nonce);
    await assert.rejects(validator.validate(doc, nonce), /no attestation key is registered for instance "node-9"/);
  });

  it('rejects an AK that differs from the registered one by a byte', async () => {
    registered.set(
      'node-2',
      Uint8Array.from(ak, (b, i) => (i === ak.length - 1 ? b ^ 1 : b)),
    );
    const validator = await createValidator('local-vtpm', { measurements }, { akRegistry });
    const nonce = randomBytes(32);
    const doc = await issuerFor('node-2').issue(new Uint8Array(0), nonce);
    await assert.rejects(validator.validate(doc, nonce), /differs from the one registered for instance "node-2"/);
  });

  it('rejects a document that swaps in the registered AK of an instance whose TPM it does not hold', async () => {
    // node-3's registered AK is another TPM's key; the document claims it, but its quote is signed by our AK.
    const other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
    const otherAk = encodeTpmPublic({
      ...AK_TEMPLATE,
      unique: { x: Buffer.from(other.x!, 'base64url'), y: Buffer.from(other.y!, 'base64url') },
    });
    registered.set('node-3', otherAk);
    const validator = await createValidator('local-vtpm', { measurements }, { akRegistry });
    const nonce = randomBytes(32);
    const doc = await issuerFor('node-3').issue(new Uint8Array(0), nonce);
    await assert.rejects(validator.validate(doc, nonce), /differs from the one registered/);
    (doc.attestation as VtpmAttestation).akPublic = Buffer.from(otherAk).toString('base64');
    await assert.rejects(validator.validate(doc, nonce), /signature does not verify with the attestation key/);
  });

  it('rejects malformed instance info and a missing registry', async () => {
    const nonce = randomBytes(32);
    const doc = await new VtpmIssuer({
      variant: 'local-vtpm',
      tpm: client,
      instanceInfo: new TextEncoder().encode('node-1'),
    }).issue(new Uint8Array(0), nonce);
    const validator = await createValidator('local-vtpm', { measurements }, { akRegistry });
    await assert.rejects(validator.validate(doc, nonce), /instanceInfo is not UTF-8 JSON/);
    const noRegistry = await createValidator('local-vtpm', { measurements }, {});
    const good = await issuerFor('node-1').issue(new Uint8Array(0), nonce);
    await assert.rejects(noRegistry.validate(good, nonce), /no AK registry/);
  });

  it('keeps attesting after a TPM reset: the issuer re-creates its AK, the PCRs are measured anew', async () => {
    const issuer = issuerFor('node-1');
    const validator = await createValidator('local-vtpm', { measurements }, { akRegistry });
    await client.pcrExtend(15, [{ hashAlg: TPM_ALG.SHA256, digest: new Uint8Array(32).fill(7) }]);
    let nonce = randomBytes(32);
    await assert.rejects(
      validator.validate(await issuer.issue(new Uint8Array(0), nonce), nonce),
      /PCR 15: expected 0{64}, got [0-9a-f]{64} \(enforced\)/,
    );
    await powerCycleSwtpm(tpm.swtpm.ctrlSocket, { client });
    nonce = randomBytes(32);
    const result = await validator.validate(await issuer.issue(new Uint8Array(0), nonce), nonce);
    assert.equal(result.comparisons[0].match, true);
  });

  it('registry: names the known variants when asked for an unknown one', async () => {
    await assert.rejects(createValidator('qemu-tdx', { measurements }, {}), (err: Error & { hint?: string }) => {
      assert.match(err.message, /Unknown attestation variant "qemu-tdx"/);
      assert.match(
        err.hint ?? '',
        /local-vtpm, qemu-vtpm, aws-sev-snp, aws-nitro-tpm, azure-sev-snp, azure-tdx, azure-trustedlaunch, gcp-sev-es, gcp-sev-snp/,
      );
      return true;
    });
  });
});
