/** kubeadm's rules for an in-place Kubernetes upgrade (lib/config/versions.ts checkKubernetesUpgrade), one line per case. */
import assert from 'node:assert/strict';
import { checkKubernetesUpgrade } from '../../lib/config/versions.js';
import { UserError } from '../../lib/errors.js';

describe("config: checkKubernetesUpgrade (kubeadm's version policy)", () => {
  const allowed: Array<[string, string, 'same' | 'patch' | 'minor']> = [
    ['v1.32.10', 'v1.32.10', 'same'],
    ['1.32.10', 'v1.32.10', 'same'],
    ['v1.32.9', 'v1.32.10', 'patch'],
    ['v1.31.14', 'v1.32.10', 'minor'],
    ['v1.31.1', 'v1.32.0', 'minor'],
  ];
  for (const [from, to, kind] of allowed) {
    it(`allows ${from} → ${to} (${kind})`, () => assert.equal(checkKubernetesUpgrade(from, to), kind));
  }

  const refused: Array<[string, string, RegExp, RegExp?]> = [
    [
      'v1.32.10',
      'v1.31.14',
      /^Kubernetes cannot go from v1\.32\.10 down to v1\.31\.14: kubeadm does not downgrade a cluster\.$/,
      /v1\.32\.10 or newer/,
    ],
    ['v1.32.10', 'v1.32.9', /from v1\.32\.10 down to v1\.32\.9/],
    [
      'v1.31.14',
      'v1.33.6',
      /^Kubernetes cannot go from v1\.31\.14 to v1\.33\.6 in one upgrade: kubeadm upgrades one minor version at a time\.$/,
      /Upgrade to v1\.32 first/,
    ],
    ['v1.33.6', 'v2.0.0', /from v1\.33\.6 to v2\.0\.0 in one upgrade/],
    ['v1.32', 'v1.33.6', /"v1\.32" is not a Kubernetes version/],
  ];
  for (const [from, to, message, hint] of refused) {
    it(`refuses ${from} → ${to}, naming both versions`, () => {
      assert.throws(
        () => checkKubernetesUpgrade(from, to),
        (err: unknown) =>
          err instanceof UserError && message.test(err.message) && (hint === undefined || hint.test(err.hint ?? '')),
      );
    });
  }
});
