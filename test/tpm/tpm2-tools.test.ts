import assert from 'node:assert/strict';
import { writeFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'mocha';
import { verifyTpmQuote } from '../../lib/attestation/tpm-quote.js';
import { TPM_ALG } from '../../lib/tpm/constants.js';
import { TpmClient } from '../../lib/tpm/client.js';
import { parseTpmPublic, publicKeyFromTpmPublic } from '../../lib/tpm/structures.js';
import { startTestTpm, tpm2, tpm2ToolsPcrFile, type TestTpm } from './support.js';

describe('cross-check with tpm2-tools', () => {
  let tpm: TestTpm;
  const indices = [0, 1, 4, 9, 11, 15];

  before(async () => {
    tpm = await startTestTpm('tpm2tools-');
    const client = await TpmClient.connect(tpm.swtpm.serverSocket);
    await client.pcrExtend(9, [{ hashAlg: TPM_ALG.SHA256, digest: new Uint8Array(32).fill(0x42) }]);
    client.close(); // swtpm serves one connection: tpm2-tools needs it now
  });
  after(async () => {
    await tpm?.cleanup();
  });

  it('tpm2_checkquote accepts a quote made by our client', async () => {
    const client = await TpmClient.connect(tpm.swtpm.serverSocket);
    const nonce = Buffer.from('c0ffee00112233445566778899aabbcc', 'hex');
    let ak: Uint8Array;
    try {
      const key = await client.createAttestationKey();
      ak = key.publicArea;
      const { quote, signature } = await client.quote(key.handle, nonce, TPM_ALG.SHA256, indices);
      const pcrs = await client.pcrRead(TPM_ALG.SHA256, indices);
      await client.flushContext(key.handle);
      writeFileSync(path.join(tpm.dir, 'ours.msg'), quote);
      writeFileSync(path.join(tpm.dir, 'ours.sig'), signature);
      writeFileSync(path.join(tpm.dir, 'ours.pcrs'), tpm2ToolsPcrFile(TPM_ALG.SHA256, pcrs));
    } finally {
      client.close();
    }
    const pem = publicKeyFromTpmPublic(parseTpmPublic(ak)).export({ type: 'spki', format: 'pem' });
    writeFileSync(path.join(tpm.dir, 'ours.pem'), pem);
    const args = [
      '-u',
      'ours.pem',
      '-m',
      'ours.msg',
      '-s',
      'ours.sig',
      '-f',
      'ours.pcrs',
      '-g',
      'sha256',
      '-q',
      nonce.toString('hex'),
    ];
    const ok = await tpm2(tpm.swtpm.serverSocket, 'tpm2_checkquote', args, tpm.dir);
    assert.equal(ok.code, 0, ok.stderr);

    const wrongNonce = await tpm2(tpm.swtpm.serverSocket, 'tpm2_checkquote', [...args.slice(0, -1), '00'], tpm.dir);
    assert.notEqual(wrongNonce.code, 0);
  });

  it('our verifier accepts a quote made by tpm2_quote, and tpm2-tools derive the same AK from our template', async () => {
    const run = async (tool: string, args: string[]) => {
      const r = await tpm2(tpm.swtpm.serverSocket, tool, args, tpm.dir);
      assert.equal(r.code, 0, `${tool}: ${r.stderr}`);
      // Without a resource manager every tool leaves its objects loaded.
      await tpm2(tpm.swtpm.serverSocket, 'tpm2_flushcontext', ['-t'], tpm.dir);
    };
    await run('tpm2_createprimary', [
      '-C',
      'e',
      '-G',
      'ecc256:ecdsa-sha256:null',
      '-a',
      'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|sign|noda',
      '-c',
      'ak.ctx',
    ]);
    await run('tpm2_readpublic', ['-c', 'ak.ctx', '-f', 'tss', '-o', 'ak.pub']);
    await run('tpm2_quote', [
      '-c',
      'ak.ctx',
      '-l',
      `sha256:${indices.join(',')}`,
      '-q',
      'abcdef',
      '-m',
      'theirs.msg',
      '-s',
      'theirs.sig',
      '-g',
      'sha256',
    ]);
    const akPublic = new Uint8Array(readFileSync(path.join(tpm.dir, 'ak.pub')).subarray(2)); // TPM2B_PUBLIC -> TPMT_PUBLIC
    const quote = new Uint8Array(readFileSync(path.join(tpm.dir, 'theirs.msg')));
    const signature = new Uint8Array(readFileSync(path.join(tpm.dir, 'theirs.sig')));

    const client = await TpmClient.connect(tpm.swtpm.serverSocket);
    try {
      const pcrs = await client.pcrRead(TPM_ALG.SHA256, indices);
      const attest = verifyTpmQuote({
        akPublic,
        quote,
        signature,
        pcrs,
        hashAlg: TPM_ALG.SHA256,
        qualifyingData: Buffer.from('abcdef', 'hex'),
      });
      assert.deepEqual(attest.quote.pcrSelect[0].pcrs, indices);
      const ours = await client.createAttestationKey();
      assert.deepEqual(ours.publicArea, akPublic);
      pcrs.set(9, new Uint8Array(32));
      assert.throws(
        () =>
          verifyTpmQuote({
            akPublic,
            quote,
            signature,
            pcrs,
            hashAlg: TPM_ALG.SHA256,
            qualifyingData: Buffer.from('abcdef', 'hex'),
          }),
        /PCR values do not match/,
      );
    } finally {
      client.close();
    }
  });
});
