import assert from 'node:assert/strict';
import { closestFlag, normalizeOutputFlags } from '../../cli/flag-conventions.js';
import { runCli } from '../support/cli.js';

describe('CLI conventions: --json and -o json alike, did-you-mean for a mistyped flag', () => {
  const withJson = { jsonFlag: true, ownOutput: false };
  const table: [string, string[], { jsonFlag: boolean; ownOutput: boolean }, string[]][] = [
    ['-o json → --json', ['status', '-o', 'json'], withJson, ['status', '--json']],
    ['--output json → --json', ['--output', 'json', '-C', 'x'], withJson, ['--json', '-C', 'x']],
    ['-ojson, --output=json → --json', ['-ojson', '--output=json'], withJson, ['--json', '--json']],
    ['-o of another format stays (refused as an unknown flag)', ['-o', 'yaml'], withJson, ['-o', 'yaml']],
    ['after -- nothing changes', ['--', '-o', 'json'], withJson, ['--', '-o', 'json']],
    ['verify (own -o): --json → --output=json', ['--json'], { jsonFlag: false, ownOutput: true }, ['--output=json']],
    ['verify (own -o): -o json stays', ['-o', 'json'], { jsonFlag: false, ownOutput: true }, ['-o', 'json']],
  ];
  for (const [title, argv, shape, want] of table) {
    it(title, () => assert.deepEqual(normalizeOutputFlags(argv, shape), want));
  }

  it('names the closest flag: a typo, a prefix, a word of a longer flag; nothing for what is not near', () => {
    const flags = ['control-plane-nodes', 'worker-nodes', 'image', 'yes', 'y', 'json', 'workspace', 'C'];
    assert.equal(closestFlag('--jsn', flags), '--json');
    assert.equal(closestFlag('--imgae', flags), '--image');
    assert.equal(closestFlag('--workers', flags), '--worker-nodes');
    assert.equal(closestFlag('--control', flags), '--control-plane-nodes');
    assert.equal(closestFlag('--frobnicate', flags), undefined);
  });

  it('the CLI refuses a mistyped flag with exit 2 and the flag it means', async function () {
    this.timeout(30_000);
    const res = await runCli(['mini', 'up', '--workers', '2', '-C', '/nonexistent-workspace']);
    assert.equal(res.code, 2);
    assert.equal(
      res.stderr,
      'Error: --workers is not a flag of `constellation mini up`.\nHint: Did you mean --worker-nodes? `constellation mini up --help` lists its flags.\n',
    );
  });

  it('the CLI takes -o json where it takes --json', async function () {
    this.timeout(30_000);
    const res = await runCli(['version', '-o', 'json']);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(typeof JSON.parse(res.stdout).version, 'string');
  });
});
