import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  watch,
  writeFileSync,
} from 'node:fs';

import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, it } from 'mocha';
import { canConnect } from '../../lib/process.js';
import { hashAlgName, TPM_ALG } from '../../lib/tpm/constants.js';
import { TpmClient } from '../../lib/tpm/client.js';
import { parseTpmAttest } from '../../lib/tpm/structures.js';
import {
  powerCycleSwtpm,
  readAttestationKey,
  startSwtpm,
  stopSwtpm,
  SwtpmError,
  type SwtpmHandle,
} from '../../lib/tpm/swtpm.js';
import { hex } from './support.js';

/** The active PCR banks and the number of PCRs of each, e.g. [['sha256', 24]]. */
async function banksOf(serverSocket: string): Promise<[string, number][]> {
  const client = await TpmClient.connect(serverSocket, { flushLeftovers: false });
  try {
    return (await client.pcrBanks()).map((b) => [hashAlgName(b.hashAlg), b.pcrs.length]);
  } finally {
    client.close();
  }
}

/**
 * Runs `use` with a swtpm of our own on `stateDir`, started as a bare `swtpm socket` (no PCR allocation), and stops
 * it: a state made this way has swtpm's default PCR banks, as a start that was killed before its allocation leaves it.
 */
async function withRawSwtpm<T>(stateDir: string, use: (serverSocket: string) => Promise<T>): Promise<T> {
  mkdirSync(stateDir, { recursive: true });
  const serverSocket = path.join(stateDir, 'raw.sock');
  const ctrlSocket = `${serverSocket}.ctrl`;
  const child = spawn(
    'swtpm',
    [
      'socket',
      '--tpm2',
      '--tpmstate',
      `dir=${stateDir}`,
      '--server',
      `type=unixio,path=${serverSocket}`,
      '--ctrl',
      `type=unixio,path=${ctrlSocket}`,
      '--flags',
      'not-need-init,startup-clear',
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    for (const socket of [ctrlSocket, serverSocket]) while (!(await canConnect(socket))) await sleep(10);
    return await use(serverSocket);
  } finally {
    await stopSwtpm({ ctrlSocket, pid: child.pid!, exited });
    rmSync(serverSocket, { force: true });
    rmSync(ctrlSocket, { force: true });
  }
}

/** The real swtpm's path, for a stand-in that counts its starts. */
function realSwtpm(): string {
  const found = (process.env.PATH ?? '')
    .split(':')
    .map((dir) => path.join(dir, 'swtpm'))
    .find((file) => existsSync(file));
  assert.ok(found, 'swtpm is installed');
  return found;
}

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

  it('makes a new TPM with exactly the SHA-256 and SHA-384 PCR banks in the one swtpm that serves it', async () => {
    const stateDir = path.join(dir, 'fresh');
    const socketDir = path.join(dir, 'fresh-sockets');
    mkdirSync(stateDir);
    mkdirSync(socketDir);
    // A stand-in swtpm on PATH counts the swtpm processes started; watches record every name that ever appeared.
    const bin = path.join(dir, 'bin');
    const starts = path.join(dir, 'swtpm-starts');
    mkdirSync(bin, { recursive: true });
    writeFileSync(path.join(bin, 'swtpm'), `#!/bin/sh\necho "$*" >> '${starts}'\nexec '${realSwtpm()}' "$@"\n`);
    chmodSync(path.join(bin, 'swtpm'), 0o755);
    const seen = new Set<string>();
    const watchers = [stateDir, socketDir].map((d) => watch(d, (_, name) => name && seen.add(name)));
    const savedPath = process.env.PATH;
    process.env.PATH = `${bin}:${savedPath}`;
    let h: SwtpmHandle;
    try {
      h = await startSwtpm({ stateDir, socketDir });
    } finally {
      process.env.PATH = savedPath;
      for (const w of watchers) w.close();
    }
    try {
      assert.equal(readFileSync(starts, 'utf8').trim().split('\n').length, 1, 'one swtpm process');
      assert.deepEqual(
        [...seen].filter((name) => /manufacture|mfg\.sock/.test(name)),
        [],
        'no manufacture folder or socket',
      );
      assert.deepEqual(await banksOf(h.serverSocket), [
        ['sha256', 24],
        ['sha384', 24],
      ]);
      assert.deepEqual(readdirSync(socketDir).sort(), ['swtpm.sock', 'swtpm.sock.ctrl']);
    } finally {
      await h.stop();
    }
  });

  it('repairs the PCR banks of a state that never had them allocated, keeping its endorsement seed (the AK)', async () => {
    const stateDir = path.join(dir, 'unallocated');
    const { banks, ak } = await withRawSwtpm(stateDir, async (socket) => ({
      banks: await banksOf(socket),
      ak: await readAttestationKey(socket),
    }));
    assert.notDeepEqual(banks, [
      ['sha256', 24],
      ['sha384', 24],
    ]);
    const h = await startSwtpm({ stateDir });
    try {
      assert.deepEqual(await banksOf(h.serverSocket), [
        ['sha256', 24],
        ['sha384', 24],
      ]);
      assert.deepEqual(await readAttestationKey(h.serverSocket), ak);
    } finally {
      await h.stop();
    }
    // Another start finds the banks right and leaves the state as it is.
    const again = await startSwtpm({ stateDir, pcrBanks: ['sha256', 'sha384'] });
    try {
      assert.deepEqual(await banksOf(again.serverSocket), [
        ['sha256', 24],
        ['sha384', 24],
      ]);
      assert.deepEqual(await readAttestationKey(again.serverSocket), ak);
    } finally {
      await again.stop();
    }
  });

  it('sets other PCR banks when asked at a later start (socket)', async () => {
    const stateDir = path.join(dir, 'rebank');
    const first = await startSwtpm({ stateDir });
    const ak = await readAttestationKey(first.serverSocket);
    await first.stop();
    const h = await startSwtpm({ stateDir, pcrBanks: ['sha256'] });
    try {
      assert.deepEqual(await banksOf(h.serverSocket), [['sha256', 24]]);
      assert.deepEqual(await readAttestationKey(h.serverSocket), ak);
    } finally {
      await h.stop();
    }
  });

  it('starts on a state directory that an earlier manufacture left its work folder and sockets in (socket)', async () => {
    const stateDir = path.join(dir, 'leftovers');
    const socketDir = path.join(dir, 'leftovers-sockets');
    mkdirSync(path.join(stateDir, 'manufacture'), { recursive: true });
    writeFileSync(path.join(stateDir, 'manufacture', 'tpm2-00.permall'), 'half-made');
    mkdirSync(socketDir);
    writeFileSync(path.join(socketDir, 'mfg.sock'), '');
    writeFileSync(path.join(socketDir, 'mfg.sock.ctrl'), '');
    const h = await startSwtpm({ stateDir, socketDir });
    try {
      assert.deepEqual(await banksOf(h.serverSocket), [
        ['sha256', 24],
        ['sha384', 24],
      ]);
      assert.ok(!existsSync(path.join(stateDir, 'manufacture')));
      assert.deepEqual(readdirSync(socketDir).sort(), ['swtpm.sock', 'swtpm.sock.ctrl']);
    } finally {
      await h.stop();
    }
  });

  it('manufactures the new TPM of a VM with exactly its PCR banks before QEMU attaches, leaving nothing of the manufacture behind', async () => {
    const stateDir = path.join(dir, 'vm');
    const socketDir = path.join(dir, 'vm-sockets');
    // What a manufacture killed half-way leaves: a work folder and sockets, but no state file in the state directory.
    mkdirSync(path.join(stateDir, 'manufacture'), { recursive: true });
    writeFileSync(path.join(stateDir, 'manufacture', 'tpm2-00.permall'), 'half-made');
    mkdirSync(socketDir);
    writeFileSync(path.join(socketDir, 'mfg.sock'), '');
    const h = await startSwtpm({ stateDir, socketDir, attach: 'vm' });
    try {
      assert.ok(existsSync(path.join(stateDir, 'tpm2-00.permall')), 'the state is made before QEMU attaches');
      assert.ok(!existsSync(path.join(stateDir, 'manufacture')));
      assert.deepEqual(readdirSync(socketDir).sort(), ['swtpm.sock.ctrl']);
    } finally {
      await h.stop();
    }
    // The banks as QEMU's firmware finds them: read by a swtpm that allocates nothing.
    assert.deepEqual(await withRawSwtpm(stateDir, banksOf), [
      ['sha256', 24],
      ['sha384', 24],
    ]);
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
