/**
 * The TPM features cloud nodes need, against a real swtpm: the TPM as a character device (/dev/tpmrm0 on a VM;
 * here a raw pty relayed to swtpm), NV indices (Azure's HCL report, GCE's AK template) and a platform's
 * persistent AK (Azure's paravisor key) or an AK from a template the platform stores.
 */
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'mocha';
import { TPM_ALG, TPM_HR } from '../../lib/tpm/constants.js';
import { AK_TEMPLATE, TpmClient, TpmError } from '../../lib/tpm/client.js';
import { encodeTpmPublic, parseTpmPublic } from '../../lib/tpm/structures.js';
import { startPtyTpmDevice, type PtyTpmDevice } from './pty-device.js';
import { hex, startTestTpm, type TestTpm } from './support.js';

describe('TpmClient over a TPM character device', () => {
  let tpm: TestTpm;
  let device: PtyTpmDevice;
  before(async () => {
    tpm = await startTestTpm();
    device = await startPtyTpmDevice(tpm.swtpm.serverSocket);
  });
  after(async () => {
    await device?.close();
    await tpm?.cleanup();
  });

  it('opens the device by path, reads PCRs and quotes with the AK', async () => {
    assert.ok(statSync(device.path).isCharacterDevice(), `${device.path} is a character device`);
    const client = await TpmClient.connect(device.path);
    try {
      const pcrs = await client.pcrRead(TPM_ALG.SHA256, [...Array(24).keys()]);
      assert.equal(pcrs.size, 24);
      const ak = await client.attestationKey();
      const { quote } = await client.quote(ak.handle, randomBytes(32), TPM_ALG.SHA256, [0, 15]);
      assert.ok(quote.length > 0);
    } finally {
      client.close();
    }
  });
});

describe('TpmClient: NV indices and platform attestation keys', () => {
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

  it('defines, writes and reads back an NV index larger than one transfer', async () => {
    const index = 0x01400001;
    const data = randomBytes(1700);
    await client.nvDefine(index, data.length);
    await client.nvWrite(index, data);
    const pub = await client.nvReadPublic(index);
    assert.equal(pub.dataSize, 1700);
    assert.equal(hex(await client.nvRead(index)), hex(data));
    assert.equal(hex(await client.nvRead(index, 32)), hex(data.subarray(0, 32)));
    await client.nvUndefine(index);
    await assert.rejects(client.nvReadPublic(index), TpmError);
  });

  it('uses a key the platform made persistent as the AK, and survives a renew', async () => {
    const made = await client.createAttestationKey();
    const persistent = TPM_HR.PERSISTENT + 3;
    await client.evictControl(made.handle, persistent);
    await client.flushContext(made.handle);
    client.useAttestationKey({ kind: 'persistent', handle: persistent });
    const ak = await client.attestationKey();
    assert.equal(ak.handle, persistent);
    assert.equal(hex(ak.publicArea), hex(made.publicArea));
    const renewed = await client.attestationKey({ renew: true });
    assert.equal(renewed.handle, persistent, 'a persistent AK is never flushed');
    await client.quote(renewed.handle, randomBytes(16), TPM_ALG.SHA256, [0]);
    client.useAttestationKey({ kind: 'template', template: AK_TEMPLATE });
  });

  it('derives the AK from a raw template read from NV (as GCE stores its AK template)', async () => {
    const index = 0x01c10003;
    const template = encodeTpmPublic(AK_TEMPLATE);
    await client.nvDefine(index, template.length);
    await client.nvWrite(index, template);
    client.useAttestationKey({ kind: 'template', template: await client.nvRead(index) });
    const fromNv = await client.attestationKey();
    client.useAttestationKey({ kind: 'template', template: AK_TEMPLATE });
    const fromCode = await client.attestationKey();
    assert.equal(parseTpmPublic(fromNv.publicArea).type, TPM_ALG.ECC);
    assert.equal(hex(fromNv.publicArea), hex(fromCode.publicArea), 'same template, same primary key');
  });
});
