/**
 * The edges a new user meets in the first hour, each through the built CLI as a user runs it: preconditions checked
 * before anything is written (root, the workspace's owner), errors that name the cause and the fix instead of "This
 * is a bug", commands that refuse a folder without a cluster alike, declined questions that end alike, and no
 * debug log left in a folder that is no workspace. The cases that need a running cluster are in
 * test/e2e/first-hour.test.ts.
 * Some cases run the CLI as another user (nobody, uid 65534): the test runs as root, as the local provider needs.
 */
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { editConfig } from '../../lib/config/edit.js';
import { CLI, REPO_ROOT, runCli, type CliResult } from '../support/cli.js';
import { imageMeasurements } from '../support/measurements.js';

const NOBODY = 65534;
const BUG = /This is a bug/;

/** Runs the built CLI as `uid` (and its group) without a terminal. */
function runCliAs(uid: number, args: string[], cwd = os.tmpdir()): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [CLI, ...args],
      { cwd, uid, gid: uid, env: { ...process.env, HOME: '/nonexistent' } },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}

/** Runs the built CLI on a terminal (script(1) gives it one) and types `input`. */
function runCliOnTerminal(args: string[], input: string): CliResult {
  const command = [process.execPath, CLI, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ');
  const res = spawnSync('script', ['-qec', command, '/dev/null'], {
    input,
    encoding: 'utf8',
    cwd: REPO_ROOT,
    timeout: 30_000,
  });
  return { code: res.status ?? 1, stdout: res.stdout, stderr: res.stderr };
}

describe('the first hour (CLI)', function () {
  this.timeout(60_000);
  let dir: string;

  before(function () {
    assert.equal(
      process.getuid?.(),
      0,
      'these tests run as root (as npm test does here): they run the CLI as another user and own files for others',
    );
  });
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'first-hour-'));
    await fs.chmod(dir, 0o755); // other users may pass through to their folders
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  describe('preconditions come first', () => {
    it('mini up as a non-root user refuses, saying it needs root, before it makes the workspace or anything in it', async () => {
      const ws = path.join(dir, 'my-cluster');
      const res = await runCliAs(NOBODY, ['mini', 'up', '-C', ws]);
      assert.equal(res.code, 1);
      assert.match(res.stderr, /needs root/);
      assert.match(res.stderr, /[Nn]othing was started or written/);
      assert.match(res.stderr, /Hint: Run the command as root/);
      assert.doesNotMatch(res.stderr, BUG);
      assert.equal(await exists(ws), false, 'the workspace folder was not made');
    });

    it('as root, mini up refuses a workspace folder another user owns, naming the owner and the chown that fixes it', async () => {
      const ws = path.join(dir, 'theirs');
      await fs.mkdir(ws);
      await fs.chown(ws, NOBODY, NOBODY);
      const res = await runCli(['mini', 'up', '-C', ws]);
      assert.equal(res.code, 1);
      assert.match(res.stderr, /belong to another user/);
      assert.match(res.stderr, new RegExp(`${ws} \\(owner: nobody, uid ${NOBODY}\\)`));
      assert.match(res.stderr, new RegExp(`Hint: .*chown -R root:root ${ws}`));
      assert.deepEqual(await fs.readdir(ws), [], 'nothing was written into it');
    });

    it('as root, mini up refuses a root-owned workspace that holds a file of another user (a non-root run left it)', async () => {
      const ws = path.join(dir, 'left-behind');
      await fs.mkdir(ws);
      const config = path.join(ws, 'constellation-conf.yaml');
      await fs.writeFile(config, 'version: v1\n');
      await fs.chown(config, NOBODY, NOBODY);
      const res = await runCli(['mini', 'up', '-C', ws]);
      assert.equal(res.code, 1);
      assert.match(res.stderr, new RegExp(`${config} \\(owner: nobody`));
      assert.match(res.stderr, /Hint: These were left by a run as another user/);
      assert.deepEqual(await fs.readdir(ws), ['constellation-conf.yaml'], 'nothing else was written');
    });
  });

  describe('errors that say what to do', () => {
    it('a workspace below a folder the user may not enter: permission denied, with the fix, not a bug', async () => {
      const locked = path.join(dir, 'locked');
      await fs.mkdir(locked, { mode: 0o700 });
      for (const args of [['status'], ['config', 'generate', 'local'], ['init']]) {
        const res = await runCliAs(NOBODY, [...args, '-C', path.join(locked, 'ws')]);
        assert.equal(res.code, 1, args.join(' '));
        assert.match(res.stderr, /[Pp]ermission denied/, args.join(' '));
        assert.match(res.stderr, /Hint: Use a (workspace )?folder you own/, args.join(' '));
        assert.doesNotMatch(res.stderr, BUG, args.join(' '));
      }
    });

    it('a workspace the user may not write to: says so, with its owner and the fix, not a bug', async () => {
      const ws = path.join(dir, 'read-only');
      await fs.mkdir(ws, { mode: 0o555 });
      const generate = await runCliAs(NOBODY, ['config', 'generate', 'local', '-C', ws]);
      assert.equal(generate.code, 1);
      assert.match(generate.stderr, /Permission denied: cannot open .*read-only.* \(you are nobody, uid 65534\)/);
      assert.doesNotMatch(generate.stderr, BUG);
      const init = await runCliAs(NOBODY, ['init', '-C', ws]);
      assert.equal(init.code, 1);
      assert.match(
        init.stderr,
        new RegExp(`The workspace ${ws} is not writable by you \\(nobody, uid 65534\\); it belongs to root`),
      );
      assert.doesNotMatch(init.stderr, BUG);
    });

    it('recover in a workspace whose cluster was terminated: there is nothing to recover, and what to do instead', async () => {
      await configGenerate(dir);
      const res = await runCli(['recover', '-C', dir]);
      assert.equal(res.code, 1);
      assert.match(res.stderr, /has no cluster: it was terminated, or never created\. There is nothing to recover\./);
      assert.match(res.stderr, /Hint: .*A terminated cluster cannot be recovered/);
      assert.doesNotMatch(res.stderr, BUG);
    });

    it('verify -e … --cluster-id in a workspace that holds only the config asks the node (unreachable here), not a bug', async () => {
      await configGenerate(dir);
      // A generated local config has no image PCRs yet (create measures the build): verify says so, not a bug.
      const bare = await runCli(['verify', '-C', dir, '-e', '127.0.0.1:1', '--cluster-id', 'ab'.repeat(32)]);
      assert.equal(bare.code, 1);
      assert.match(bare.stderr, /The measurements are incomplete: PCR 4, 9, 11 are missing/);
      assert.doesNotMatch(bare.stderr, BUG);
      // With the image's measurements in the config (as after create, or fetch-measurements), it asks the node.
      await editConfig(dir, { measurements: imageMeasurements('5a') });
      const res = await runCli(['verify', '-C', dir, '-e', '127.0.0.1:1', '--cluster-id', 'ab'.repeat(32)]);
      assert.equal(res.code, 1);
      assert.match(res.stdout, /127\.0\.0\.1:1\s+UNREACHABLE/);
      assert.doesNotMatch(res.stderr, BUG);
    });
  });

  describe('a folder without a cluster', () => {
    it('terminate and mini down refuse it alike, before asking, and leave nothing behind', async () => {
      for (const args of [['terminate', '-y'], ['mini', 'down', '-y'], ['terminate'], ['mini', 'down']]) {
        const res = await runCli([...args, '-C', dir]);
        assert.equal(res.code, 1, args.join(' '));
        assert.match(
          res.stderr,
          new RegExp(`The workspace ${dir} has no cluster: there is nothing to (terminate|remove)\\.`),
          args.join(' '),
        );
        assert.match(res.stderr, /Hint: Run the command in the cluster's workspace/, args.join(' '));
      }
      assert.deepEqual(await fs.readdir(dir), []);
    });

    it('status, verify, recover, init and upgrade check outside a workspace leave no constellation-debug.log', async () => {
      for (const args of [['status'], ['verify'], ['recover'], ['init'], ['upgrade', 'check'], ['terminate', '-y']]) {
        const res = await runCli([...args, '-C', dir]);
        assert.notEqual(res.code, 0, args.join(' '));
        assert.deepEqual(await fs.readdir(dir), [], `${args.join(' ')} left nothing behind`);
      }
    });

    it('a workspace keeps its debug log', async () => {
      await configGenerate(dir);
      await runCli(['status', '-C', dir]);
      assert.ok((await fs.readdir(dir)).includes('constellation-debug.log'));
    });
  });

  describe('declining a question', () => {
    it('ends mini down, terminate and mini up the same way: the message alone, exit code 1, nothing changed', async () => {
      await configGenerate(dir);
      // A state with a cluster identity: terminate has something to ask about.
      const state = path.join(dir, 'constellation-state.yaml');
      await fs.writeFile(state, (await fs.readFile(state, 'utf8')).replace(/uid: ""/, 'uid: "0123abcd"'));
      const before = (await fs.readdir(dir)).sort();
      for (const [args, message] of [
        [['mini', 'down'], 'Nothing was removed.'],
        [['terminate'], 'Nothing was terminated.'],
        [['mini', 'up'], 'Nothing was changed.'],
      ] as const) {
        const res = runCliOnTerminal([...args, '-C', dir], 'n\r');
        assert.equal(res.code, 1, `${args.join(' ')}: ${res.stdout}`);
        assert.match(res.stdout, new RegExp(`\\n(\\x1b\\[\\?25h)?${message.replace('.', '\\.')}`), args.join(' '));
        assert.doesNotMatch(res.stdout, /Error:/, args.join(' '));
      }
      assert.deepEqual(
        (await fs.readdir(dir)).filter((f) => f !== 'constellation-debug.log').sort(),
        before.filter((f) => f !== 'constellation-debug.log'),
      );
    });
  });
});

async function configGenerate(ws: string): Promise<void> {
  const res = await runCli(['config', 'generate', 'local', '-C', ws]);
  assert.equal(res.code, 0, res.stderr);
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}
