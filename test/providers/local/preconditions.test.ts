import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isUserError } from '../../../lib/errors.js';
import { LOCAL_PROGRAMS, localProblems, requireLocalPreconditions } from '../../../providers/local/preconditions.js';

describe('providers/local/preconditions', () => {
  let dir: string;
  let bin: string;
  let program: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'local-pre-'));
    bin = path.join(dir, 'bin');
    await fs.mkdir(bin);
    for (const name of Object.keys(LOCAL_PROGRAMS))
      await fs.writeFile(path.join(bin, name), '#!/bin/sh\n', { mode: 0o755 });
    program = path.join(dir, 'main.js');
    await fs.writeFile(program, '');
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  const everything = () => ({
    uid: 0,
    searchPath: bin,
    fuseDevice: program,
    runtimeRoot: path.join(dir, 'run', 'constellation'),
    nodeProgram: program,
  });

  it('finds nothing missing when root, the programs, /dev/fuse, the runtime folder and the node program are there', async () => {
    await fs.mkdir(path.join(dir, 'run'));
    assert.deepEqual(await localProblems(everything()), []);
  });

  it('names every missing piece at once, each with its fix, and refuses before anything is done', async () => {
    await fs.rm(path.join(bin, 'swtpm'));
    await fs.rm(path.join(bin, 'etcd'));
    const options = {
      ...everything(),
      uid: 1000,
      fuseDevice: path.join(dir, 'no-fuse'),
      nodeProgram: path.join(dir, 'no-build.js'),
    };
    const problems = await localProblems(options);
    assert.deepEqual(
      problems.map((p) => p.problem),
      [
        'it needs root: every node runs in its own network namespace, which only root can make',
        'swtpm, etcd are not installed',
        `${path.join(dir, 'no-fuse')} does not exist (the nodes' encrypted state directories are FUSE mounts)`,
        `the node program ${path.join(dir, 'no-build.js')} is not built`,
      ],
    );
    assert.match(problems[1].fix, /npm run setup.*swtpm, etcd-server/);
    await assert.rejects(requireLocalPreconditions(options), (err: unknown) => {
      assert.ok(isUserError(err));
      assert.match(err.message, /nothing was started or written/);
      assert.match(err.hint ?? '', /^Run the command as root, e\.g\. with sudo; Run `npm run setup`/);
      return true;
    });
  });

  it('says only that root is needed when that is all', async () => {
    await fs.mkdir(path.join(dir, 'run'));
    await assert.rejects(
      requireLocalPreconditions({ ...everything(), uid: 1000 }),
      /^UserError: The local provider needs root: its nodes run in their own network namespaces\. Nothing was started or written\.$/,
    );
  });
});
