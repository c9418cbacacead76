/**
 * Deeply nested flow collections never reach the YAML parser, which recursed on them until V8 aborted the process
 * (found by the state-yaml fuzz target): the config, the state file and a kubeconfig to merge into are refused
 * with our errors, in linear time; brackets in quoted scalars and comments do not count.
 */
import assert from 'node:assert/strict';
import { parseConfig } from '../../lib/config/parse.js';
import { ConfigError } from '../../lib/config/errors.js';
import { UserError } from '../../lib/errors.js';
import { parseState } from '../../lib/workspace/state.js';
import { MAX_FLOW_NESTING, yamlNestingProblem } from '../../lib/yaml-nesting.js';

describe('YAML nesting guard', () => {
  it('refuses more open flow collections than the limit, and only then', () => {
    assert.equal(yamlNestingProblem(`${'['.repeat(MAX_FLOW_NESTING)}${']'.repeat(MAX_FLOW_NESTING)}`), undefined);
    assert.match(yamlNestingProblem('['.repeat(MAX_FLOW_NESTING + 1)) ?? '', /more than 64 levels deep/);
    // What the fuzz target found: braces after a flow map's first pair, tabs in between.
    assert.match(
      yamlNestingProblem(`{"key":"AA==",${'{'.repeat(800)}${'\t'.repeat(100)}${'{'.repeat(800)}`) ?? '',
      /more than 64/,
    );
  });

  it('counts as the parser does: brackets in quoted scalars and comments are text', () => {
    const brackets = '['.repeat(100);
    assert.equal(
      yamlNestingProblem(`a: "${brackets}"\nb: '${brackets}'\n# ${brackets}\nc: [1, ["]]]", {d: e}]]\n`),
      undefined,
    );
    // Closing brackets hidden in quoted scalars do not hide real nesting.
    assert.match(yamlNestingProblem('["]",'.repeat(100)) ?? '', /more than 64/);
  });

  it('is linear: 1 MiB of open brackets is refused in well under a second', () => {
    const started = performance.now();
    assert.ok(yamlNestingProblem('['.repeat(1 << 20)));
    assert.ok(performance.now() - started < 1000);
  });

  it('keeps the config and the state file from the parser, with their own errors', () => {
    const deep = `${'['.repeat(5000)}`;
    assert.throws(
      () => parseConfig(deep),
      (err: unknown) => err instanceof ConfigError && /not valid YAML: it nests flow collections/.test(err.message),
    );
    assert.throws(
      () => parseState(deep),
      (err: unknown) =>
        err instanceof UserError && /The state file .* is not valid YAML: it nests flow collections/.test(err.message),
    );
  });
});
