/** The local provider as the registry loads it, and its address plan. */
import assert from 'node:assert/strict';
import { loadProvider } from '../../../providers/registry.js';
import { LocalInfrastructure } from '../../../providers/local/infrastructure.js';
import { allocateHost, gatewayAddress, hostAddress, nodeAddress, nodePaths } from '../../../providers/local/layout.js';

describe('local provider: module and address plan', () => {
  it('loads by name, produces local-vtpm, and builds its infrastructure', async () => {
    const provider = await loadProvider('local');
    assert.equal(provider.name, 'local');
    assert.deepEqual(provider.attestationVariants, ['local-vtpm']);
    const infra = await provider.infrastructure({ nodeProgram: { entry: '/img/main.js', imageDir: '/img' } });
    // (no instanceof: mocha may load this file as CommonJS while the registry imports the ES module)
    assert.equal(infra.name, 'local');
    assert.equal(typeof (infra as LocalInfrastructure).rebootNodes, 'function');
    assert.deepEqual((infra as LocalInfrastructure).image, {
      nodeBinary: process.execPath,
      imageDir: '/img',
      entry: '/img/main.js',
    });
  });

  it('defaults the node program to the bundled bootstrapper in dist/node-program/', async () => {
    const infra = new LocalInfrastructure();
    assert.match(infra.image.entry, /\/dist\/node-program\/main\.cjs$/);
    assert.match(infra.image.imageDir, /\/dist\/node-program$/);
  });

  it('gives control planes .10+ and workers .100+, lowest free first; .1 is the gateway, .2 this machine', () => {
    assert.equal(allocateHost('control-plane', []), 10);
    assert.equal(allocateHost('control-plane', [10, 11, 100]), 12);
    assert.equal(allocateHost('worker', [10, 100, 102]), 101);
    assert.equal(nodeAddress('10.213.7', 101), '10.213.7.101');
    assert.equal(gatewayAddress('10.213.7'), '10.213.7.1');
    assert.equal(hostAddress('10.213.7'), '10.213.7.2');
    const full = Array.from({ length: 90 }, (_, i) => 10 + i);
    assert.throws(() => allocateHost('control-plane', full), /No free address/);
  });

  it('refuses node names that are not plain folder names', () => {
    assert.throws(() => nodePaths('/ws', '../evil'), /not a valid local node name/);
    assert.equal(nodePaths('/ws', 'worker-0').dir, '/ws/constellation-local/nodes/worker-0');
  });
});
