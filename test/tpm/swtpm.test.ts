import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'mocha';
import { hashAlgName, TPM_ALG } from '../../lib/tpm/constants.js';
import { TpmClient } from '../../lib/tpm/client.js';
import { parseTpmAttest } from '../../lib/tpm/structures.js';
import { powerCycleSwtpm, startSwtpm, SwtpmError, type SwtpmHandle } from '../../lib/tpm/swtpm.js';
import { hex } from './support.js';

describe('swtpm lifecycle', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'swtpm-life-'));
  const running: SwtpmHandle[] = [];
  const start = async () => {
    const h = await startSwtpm({ stateDir: path.join(dir, 'tpm') });
    running.push(h);
    return h;
  };
  after(async () => {
    for (const h of running) await h.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function resetCountAndPcr15(socket: string): Promise<{ resetCount: number; pcr15: string; ak: Uint8Array }> {
    const client = await TpmClient.connect(socket);
    try {
      const ak = await client.createAttestationKey();
      const q = await client.quote(ak.handle, new Uint8Array(0), TPM_ALG.SHA256, [15]);
      const pcr15 = hex((await client.pcrRead(TPM_ALG.SHA256, [15])).get(15)!);
      await client.flushContext(ak.handle);
      return { resetCount: parseTpmAttest(q.quote).clockInfo.resetCount, pcr15, ak: ak.publicArea };
    } finally {
      client.close();
    }
  }

  it('power-cycles: PCRs back to zero, the reset counter counts the reboot, the AK stays', async () => {
    const h = await start();
    assert.ok(existsSync(h.serverSocket) && existsSync(h.ctrlSocket));
    const client = await TpmClient.connect(h.serverSocket);
    await client.pcrExtend(15, [{ hashAlg: TPM_ALG.SHA256, digest: new Uint8Array(32).fill(9) }]);
    client.close();
    const before = await resetCountAndPcr15(h.serverSocket);
    assert.notEqual(before.pcr15, '00'.repeat(32));

    await powerCycleSwtpm(h.ctrlSocket);
    const afterReset = await resetCountAndPcr15(h.serverSocket);
    assert.equal(afterReset.pcr15, '00'.repeat(32));
    // Unobfuscated (endorsement-hierarchy AK): the counter moves by exactly one.
    assert.equal(afterReset.resetCount, before.resetCount + 1);
    assert.deepEqual(afterReset.ak, before.ak);
  });

  it('keeps the endorsement seed across a stop and a restart, and stop is idempotent', async () => {
    const first = running[0];
    const ak = (await resetCountAndPcr15(first.serverSocket)).ak;
    await first.stop();
    await first.stop();
    assert.throws(() => process.kill(first.pid, 0), /ESRCH/);
    const second = await start();
    assert.deepEqual((await resetCountAndPcr15(second.serverSocket)).ak, ak);
  });

  it('manufactures a new TPM with exactly the SHA-256 and SHA-384 PCR banks, leaving nothing of the manufacture behind', async () => {
    const stateDir = path.join(dir, 'fresh');
    const socketDir = path.join(dir, 'fresh-sockets');
    // What a manufacture killed half-way leaves: a work folder and sockets, but no state file in the state directory.
    mkdirSync(path.join(stateDir, 'manufacture'), { recursive: true });
    writeFileSync(path.join(stateDir, 'manufacture', 'tpm2-00.permall'), 'half-made');
    mkdirSync(socketDir);
    writeFileSync(path.join(socketDir, 'mfg.sock'), '');
    const h = await startSwtpm({ stateDir, socketDir });
    try {
      const client = await TpmClient.connect(h.serverSocket);
      try {
        const banks = (await client.pcrBanks()).map((b) => [hashAlgName(b.hashAlg), b.pcrs.length]);
        assert.deepEqual(banks, [
          ['sha256', 24],
          ['sha384', 24],
        ]);
      } finally {
        client.close();
      }
      assert.ok(!existsSync(path.join(stateDir, 'manufacture')));
      assert.deepEqual(readdirSync(socketDir).sort(), ['swtpm.sock', 'swtpm.sock.ctrl']);
    } finally {
      await h.stop();
    }
  });

  it('refuses a state directory whose socket path would be too long, naming the longest that fits (91 bytes)', async () => {
    await assert.rejects(startSwtpm({ stateDir: path.join(dir, 'x'.repeat(120)) }), (err: unknown) => {
      assert.ok(err instanceof SwtpmError);
      assert.match(err.message, /too long for a unix socket/);
      assert.match(err.hint ?? '', /at most 91 bytes/);
      return true;
    });
  });

  it('keeps its state in a long state directory and its sockets in a short socket folder', async () => {
    const stateDir = path.join(dir, 'y'.repeat(150));
    const h = await startSwtpm({ stateDir, socketDir: path.join(dir, 's') });
    try {
      assert.equal(h.ctrlSocket, path.join(dir, 's', 'swtpm.sock.ctrl'));
      assert.ok(existsSync(path.join(stateDir, 'tpm2-00.permall')), 'the state is in the state directory');
      assert.match((await resetCountAndPcr15(h.serverSocket)).pcr15, /^0+$/);
    } finally {
      await h.stop();
    }
  });

  it('refuses to start a second swtpm on a state directory in use, leaving the first one serving', async () => {
    const live = running[running.length - 1];
    await assert.rejects(startSwtpm({ stateDir: path.join(dir, 'tpm') }), /already running/);
    const client = await TpmClient.connect(live.serverSocket);
    assert.equal((await client.pcrRead(TPM_ALG.SHA256, [0])).size, 1);
    client.close();
  });
});
