/** The cloud daemon's config (cloud.json, written by ./cloud.ts), checked by hand when the daemon starts. */
import assert from 'node:assert/strict';
import { parseCloudConfig } from '../../../providers/local/cloud-daemon.js';

describe('local provider: cloud daemon config', () => {
  const good = {
    prefix: '10.213.5',
    metadataPort: 8080,
    loadBalancerPorts: [6443, 9000, 30090, 30081, 9999],
    controlTokenFile: '/ws/constellation-local/control-token',
  };

  it('takes what the CLI side writes, with and without dhcp, and nothing else', () => {
    assert.deepEqual(parseCloudConfig(good), good);
    assert.deepEqual(parseCloudConfig({ ...good, dhcp: true }), { ...good, dhcp: true });
    assert.deepEqual(parseCloudConfig({ ...good, extra: 'ignored' }), good);
  });

  const bad: [string, unknown, RegExp][] = [
    ['not an object', [good], /must hold an object/],
    ['a prefix that is not three octets', { ...good, prefix: '10.213' }, /prefix must be/],
    ['a metadata port out of range', { ...good, metadataPort: 70000 }, /metadataPort must be a port/],
    ['a load-balancer port that is no number', { ...good, loadBalancerPorts: [6443, '9000'] }, /loadBalancerPorts/],
    ['no control token file', { ...good, controlTokenFile: undefined }, /controlTokenFile must be/],
    ['dhcp that is no boolean', { ...good, dhcp: 'yes' }, /dhcp must be/],
  ];
  for (const [what, value, message] of bad) {
    it(`refuses ${what}, naming the field`, () => assert.throws(() => parseCloudConfig(value), message));
  }
});
