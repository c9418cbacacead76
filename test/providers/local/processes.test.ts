/** Detached processes: they survive their parent's handle, are recognised by their owner mark, and only ours are stopped. */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  findOwnedProcesses,
  isAlive,
  isOwnedBy,
  processesByOwner,
  setSessionNice,
  spawnDetached,
  stopOwnedProcesses,
  type DetachedSpawn,
  type StartupMessage,
} from '../../../providers/local/processes.js';
import { tempDir } from './support.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'detached-child.ts');

describe('local provider: detached processes', function () {
  this.timeout(30_000);
  let tmp: string;
  let owner: string;
  let stranger: ChildProcess | undefined;

  beforeEach(async () => {
    tmp = await tempDir('cl-proc-');
    owner = path.join(tmp, 'nodes', 'n1');
    await fs.mkdir(owner, { recursive: true });
  });

  afterEach(async () => {
    await stopOwnedProcesses(tmp, []);
    stranger?.kill('SIGKILL');
    await fs.rm(tmp, { recursive: true, force: true });
  });

  const start = (mode: string, options: Pick<DetachedSpawn, 'sessionNice' | 'spawned'> = {}) =>
    spawnDetached({ file: CHILD, args: [mode], owner, cwd: owner, logFile: path.join(owner, 'log'), ...options });
  const grandchildOf = (started: { message: StartupMessage }) =>
    (started.message as { grandchildPid?: number }).grandchildPid as number;

  it('starts a detached process that reports ready, recognised as owned by its folder and the folders above', async () => {
    const { pid, message } = await start('ready');
    assert.equal(message.type, 'ready');
    const grandchild = grandchildOf({ message });
    assert.equal(await isOwnedBy(pid, owner), true);
    assert.equal(await isOwnedBy(grandchild, owner), true, 'children inherit the owner mark');
    assert.equal(await isOwnedBy(pid, tmp), true);
    assert.equal(await isOwnedBy(pid, path.join(tmp, 'nodes', 'n2')), false);
    assert.equal(await isOwnedBy(pid, `${owner}0`), false, 'a folder name prefix is another folder');
    const found = await findOwnedProcesses(owner);
    // (tsx may add its esbuild service process: ours too, by inheritance)
    assert.ok(found.includes(pid) && found.includes(grandchild), `found ${found.join(', ')}`);
    assert.equal((await findOwnedProcesses(path.join(tmp, 'nodes', 'n2'))).length, 0);
    // One sweep for every node (create): the same processes, under their node's folder, and no other folder.
    const byOwner = await processesByOwner(tmp);
    assert.deepEqual([...byOwner.keys()], [owner]);
    assert.deepEqual(
      byOwner.get(owner)?.sort((a, b) => a - b),
      found.sort((a, b) => a - b),
    );
  });

  it("starts a process in a session of lower CPU priority, and sets that session's priority back", async function () {
    if (!existsSync(`/proc/${process.pid}/autogroup`)) this.skip(); // a kernel without autogroups: nothing to set
    const autogroup = async (pid: number) => (await fs.readFile(`/proc/${pid}/autogroup`, 'utf8')).trim();
    const own = await autogroup(process.pid);
    const { pid, message } = await start('ready', { sessionNice: 10 });
    assert.match(await autogroup(pid), /nice 10$/);
    assert.match(await autogroup(grandchildOf({ message })), /nice 10$/, 'its children share its session');
    assert.equal(await autogroup(process.pid), own, "this process's session is left alone");
    await setSessionNice(pid, 0);
    assert.match(await autogroup(pid), /nice 0$/);
    await setSessionNice(2 ** 22 + 1, 0); // no such process: nothing happens
  });

  it("starts a process without Node.js's own variables of this process's environment, and with the rest", async () => {
    const dropped = {
      NODE_OPTIONS: '--no-warnings',
      NODE_EXTRA_CA_CERTS: path.join(tmp, 'none.pem'),
      NODE_TLS_REJECT_UNAUTHORIZED: '0',
      UV_THREADPOOL_SIZE: '2',
      OPENSSL_CONF: path.join(tmp, 'none.cnf'),
    };
    const variables = { ...dropped, CONSTELLATION_TEST_KEPT: 'kept' };
    const before = Object.fromEntries(Object.keys(variables).map((name) => [name, process.env[name]]));
    Object.assign(process.env, variables);
    let pid: number;
    try {
      ({ pid } = await start('ready'));
    } finally {
      for (const [name, value] of Object.entries(before))
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
    }
    const environ = (await fs.readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');
    const names = environ.map((entry) => entry.slice(0, entry.indexOf('=')));
    for (const name of Object.keys(dropped)) assert.ok(!names.includes(name), `${name} reached the process`);
    assert.ok(environ.includes('CONSTELLATION_TEST_KEPT=kept'));
    assert.ok(environ.includes(`PATH=${process.env.PATH}`));
    assert.ok(environ.includes(`CONSTELLATION_LOCAL_OWNER=${owner}`));
  });

  it('tells when the process runs, before its startup message arrives', async () => {
    const seen: string[] = [];
    const { pid, message } = await start('ready', { spawned: () => seen.push('spawned') });
    seen.push(`startup message: ${message.type}`);
    assert.deepEqual(seen, ['spawned', 'startup message: ready']);
    await stopOwnedProcesses(owner, [pid]);
  });

  it('stops a process and its children, but keeps what it is told to keep', async () => {
    const first = await start('ready');
    const second = await start('ready');
    await stopOwnedProcesses(owner, [first.pid], { keep: [second.pid, grandchildOf(second)] });
    assert.equal(await isAlive(first.pid), false);
    assert.equal(await isAlive(grandchildOf(first)), false);
    assert.equal(await isAlive(second.pid), true);
    await stopOwnedProcesses(owner, []);
    assert.equal(await isAlive(second.pid), false, 'found without a recorded PID');
  });

  it('stops the recorded process first (once, however often it was recorded), then what is left, file system servers last', async () => {
    // The bug this prevents: gocryptfs unmounted a state disk while its etcd member still wrote to it.
    const log = path.join(tmp, 'order.log');
    const server = path.join(tmp, 'gocryptfs');
    await fs.symlink(process.execPath, server);
    const { pid } = await spawnDetached({
      file: CHILD,
      args: ['ordered', log, server],
      owner,
      cwd: owner,
      logFile: path.join(owner, 'log'),
    });
    // Recorded twice (the cluster record and the journal): still one SIGTERM.
    await stopOwnedProcesses(owner, [pid, pid]);
    assert.deepEqual((await fs.readFile(log, 'utf8')).trim().split('\n'), ['node program', 'writer', 'server']);
    assert.deepEqual(await findOwnedProcesses(owner), []);
  });

  it('never stops a recorded PID that is not ours (any more)', async () => {
    stranger = spawn('sleep', ['600'], { stdio: 'ignore' });
    await new Promise((resolve) => stranger?.once('spawn', resolve));
    const pid = stranger.pid as number;
    assert.equal(await isOwnedBy(pid, owner), false);
    await stopOwnedProcesses(owner, [pid]);
    assert.equal(await isAlive(pid), true);
    assert.equal(await isOwnedBy(process.pid, owner), false);
    assert.equal(await isAlive(2 ** 22 + 1), false);
  });

  it('passes on a failure report, with its code', async () => {
    const { message } = await start('fail');
    assert.deepEqual(message, { type: 'error', message: 'could not do it', code: 'EADDRINUSE' });
  });
});
