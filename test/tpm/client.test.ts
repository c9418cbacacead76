import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'mocha';
import { verifyTpmQuote } from '../../lib/attestation/tpm-quote.js';
import { TPM_ALG, TPM_CAP, TPM_HR, TPM_PT } from '../../lib/tpm/constants.js';
import { TpmClient, TpmError } from '../../lib/tpm/client.js';
import { parseTpmPublic } from '../../lib/tpm/structures.js';
import { hex, startTestTpm, type TestTpm } from './support.js';

const sha = (alg: string, ...parts: Uint8Array[]) => {
  const h = createHash(alg);
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
};

describe('TpmClient against a real swtpm', () => {
  let tpm: TestTpm;
  let client: TpmClient;

  before(async () => {
    tpm = await startTestTpm();
    client = await TpmClient.connect(tpm.swtpm.serverSocket);
  });
  after(async () => {
    client?.close();
    await tpm?.cleanup();
  });

  it('starts up (again) and reports its TPM 2.0 properties and PCR banks', async () => {
    await client.startup(); // swtpm already ran Startup: TPM_RC_INITIALIZE is tolerated
    const cap = await client.getCapability(TPM_CAP.TPM_PROPERTIES, TPM_PT.FAMILY_INDICATOR, 1);
    assert.equal(Buffer.from(cap.properties!.get(TPM_PT.FAMILY_INDICATOR)!.toString(16), 'hex').toString(), '2.0\0');
    const banks = await client.pcrBanks();
    assert.deepEqual(
      banks.map((b) => b.hashAlg),
      [TPM_ALG.SHA256, TPM_ALG.SHA384],
    );
    assert.equal(banks[0].pcrs.length, 24);
  });

  it('reads all 24 PCRs of a bank in calls of at most 8', async () => {
    const pcrs = await client.pcrRead(TPM_ALG.SHA384, [...Array(24).keys()]);
    assert.equal(pcrs.size, 24);
    assert.equal(hex(pcrs.get(16)!), '00'.repeat(48));
    assert.equal(hex(pcrs.get(17)!), 'ff'.repeat(48)); // locality PCRs reset to all ones
  });

  it('extends PCRs with given digests and with PCR_Event data', async () => {
    const digest = sha('sha256', new TextEncoder().encode('measured thing'));
    await client.pcrExtend(15, [{ hashAlg: TPM_ALG.SHA256, digest }]);
    const after15 = await client.pcrRead(TPM_ALG.SHA256, [15]);
    assert.equal(hex(after15.get(15)!), hex(sha('sha256', new Uint8Array(32), digest)));

    const data = new TextEncoder().encode('event data');
    const digests = await client.pcrEvent(10, data);
    const sha384 = digests.find((d) => d.hashAlg === TPM_ALG.SHA384)!;
    assert.equal(hex(sha384.digest), hex(sha('sha384', data)));
    const pcr10 = await client.pcrRead(TPM_ALG.SHA384, [10]);
    assert.equal(hex(pcr10.get(10)!), hex(sha('sha384', new Uint8Array(48), sha384.digest)));

    await assert.rejects(
      client.pcrExtend(15, [{ hashAlg: TPM_ALG.SHA256, digest: new Uint8Array(20) }]),
      /must be 32 bytes/,
    );
    await assert.rejects(client.pcrExtend(24, [{ hashAlg: TPM_ALG.SHA256, digest }]), /PCR index/);
  });

  it('creates the same restricted ECC signing AK every time', async () => {
    const a = await client.createAttestationKey();
    const b = await client.createAttestationKey();
    assert.notEqual(a.handle, b.handle);
    assert.deepEqual(a.publicArea, b.publicArea);
    const pub = parseTpmPublic(a.publicArea);
    assert.equal(pub.type, TPM_ALG.ECC);
    const read = await client.readPublic(a.handle);
    assert.deepEqual(read.publicArea, a.publicArea);
    assert.equal(read.name.length, 34);
    await client.flushContext(a.handle);
    await client.flushContext(b.handle);
  });

  it('quotes PCRs so that the quote verifies against the values read', async () => {
    const ak = await client.createAttestationKey();
    const nonce = sha('sha256', new TextEncoder().encode('nonce'));
    const indices = [0, 4, 9, 10, 11, 15, 23];
    const { quote, signature } = await client.quote(ak.handle, nonce, TPM_ALG.SHA256, indices);
    const pcrs = await client.pcrRead(TPM_ALG.SHA256, indices);
    const attest = verifyTpmQuote({
      akPublic: ak.publicArea,
      quote,
      signature,
      pcrs,
      hashAlg: TPM_ALG.SHA256,
      qualifyingData: nonce,
    });
    assert.deepEqual(attest.quote.pcrSelect, [{ hashAlg: TPM_ALG.SHA256, pcrs: indices }]);
    await client.flushContext(ak.handle);
  });

  it('serializes concurrent commands through one queue', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => client.pcrRead(TPM_ALG.SHA256, [i % 24])));
    results.forEach((r, i) => assert.ok(r.has(i % 24)));
  });

  it('names the command and the TPM error code when the TPM refuses', async () => {
    await assert.rejects(client.readPublic(0x80fffff0), (err: unknown) => {
      assert.ok(err instanceof TpmError);
      assert.match(err.message, /^TPM2_ReadPublic failed: TPM_RC_\w+ at handle 1 \(0x/);
      return true;
    });
  });

  it('flushes transient objects a previous owner left behind when it connects', async () => {
    await client.createAttestationKey();
    await client.createAttestationKey();
    assert.equal((await client.listHandles(TPM_HR.TRANSIENT)).length >= 2, true);
    client.close();
    client = await TpmClient.connect(tpm.swtpm.serverSocket);
    assert.deepEqual(await client.listHandles(TPM_HR.TRANSIENT), []);
  });
});
