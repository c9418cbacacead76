import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { closestCommand } from '../../cli/hooks/command-not-found.js';
import { runCli } from '../support/cli.js';

describe('CLI conventions users expect', () => {
  it("-h and `help <command>` print the command's help, as --help does", async () => {
    const [short, long, help] = await Promise.all([
      runCli(['status', '-h']),
      runCli(['status', '--help']),
      runCli(['help', 'status']),
    ]);
    for (const res of [short, long, help]) {
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stdout, /Show every node of the cluster/);
      assert.match(res.stdout, /USAGE\n {2}\$ constellation status/);
    }
  });

  it('a mistyped command is refused with the closest command named and exit 2; nothing is run', async () => {
    const typo = await runCli(['mini', 'dwn']);
    assert.equal(typo.code, 2);
    assert.equal(
      typo.stderr,
      'Error: "mini dwn" is not a constellation command.\nHint: Did you mean `constellation mini down`?\n',
    );
    const far = await runCli(['frobnicate']);
    assert.equal(far.code, 2);
    assert.match(far.stderr, /Hint: `constellation --help` lists the commands\./);
  });

  it('suggests only commands near the typed name', () => {
    const ids = ['status', 'mini:down', 'mini:up', 'terminate'];
    assert.equal(closestCommand('staus', ids), 'status');
    assert.equal(closestCommand('mini:dwon', ids), 'mini:down');
    assert.equal(closestCommand('xyz', ids), undefined);
  });

  it("prints shell completion setup (oclif's autocomplete plugin), caching its scripts where XDG_CACHE_HOME says", async () => {
    const cache = await fs.mkdtemp(path.join(os.tmpdir(), 'cli-completion-'));
    try {
      const res = await runCli(['autocomplete', 'bash'], { env: { XDG_CACHE_HOME: cache } });
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stdout, /constellation autocomplete/);
    } finally {
      await fs.rm(cache, { recursive: true, force: true });
    }
  });
});
