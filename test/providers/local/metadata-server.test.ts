/** The metadata server in-process: identity by source address, AK registry, and a control API only the CLI can use. */
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { requestJson } from '../../../providers/local/http-json.js';
import { CloudRegistry, createMetadataServer } from '../../../providers/local/metadata-server.js';
import { LocalNodeMetadata, localAkRegistry } from '../../../providers/local/node-metadata.js';
import { CloudControl } from '../../../providers/local/cloud.js';
import { loopbackPrefixes } from './support.js';

describe('local provider: metadata server', () => {
  const token = 'c'.repeat(64);
  const ak = Buffer.from('an AK public area').toString('base64');
  let server: Server;
  let url: string;
  let prefix: string;
  let control: CloudControl;

  before(async () => {
    prefix = loopbackPrefixes()[0];
    server = createMetadataServer({ registry: new CloudRegistry(), gateway: `${prefix}.1`, controlToken: token });
    await new Promise<void>((resolve) => server.listen(0, `${prefix}.1`, resolve));
    url = `http://${prefix}.1:${(server.address() as AddressInfo).port}`;
    control = new CloudControl(url, token);
    await control.setCluster({ initSecretHash: '$2a$10$hash', joinServiceKey: 'c2VydmljZS1rZXk=' });
    await control.registerNode('control-plane-0', {
      role: 'control-plane',
      group: 'cp',
      address: `${prefix}.10`,
      akPublic: ak,
    });
    await control.registerNode('worker-0', { role: 'worker', group: 'w', address: `${prefix}.100`, akPublic: ak });
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('tells each node who it is by its source address', async () => {
    const worker = new LocalNodeMetadata({ metadataUrl: url, nodeIp: `${prefix}.100` });
    assert.deepEqual(await worker.self(), {
      name: 'worker-0',
      providerId: 'local://worker-0',
      role: 'worker',
      vpcIp: `${prefix}.100`,
    });
    const cp = new LocalNodeMetadata({ metadataUrl: url, nodeIp: `${prefix}.10` });
    assert.equal((await cp.self()).name, 'control-plane-0');
    assert.deepEqual(
      (await cp.peers()).map((p) => [p.name, p.vpcIp]),
      [
        ['control-plane-0', `${prefix}.10`],
        ['worker-0', `${prefix}.100`],
      ],
    );
    assert.equal(await cp.loadBalancerEndpoint(), `${prefix}.1`);
    assert.equal(await cp.initSecretHash(), '$2a$10$hash');
    assert.equal(await cp.joinServiceKey(), 'c2VydmljZS1rZXk=');
    const stranger = new LocalNodeMetadata({ metadataUrl: url, nodeIp: `${prefix}.77` });
    await assert.rejects(stranger.self(), /403|not the address of a node/);
  });

  it('serves registered AKs with their role and address, and nothing for unknown instances', async () => {
    const registry = localAkRegistry(url);
    const worker = await registry.lookup('worker-0');
    assert.ok(worker, 'worker-0 is registered');
    assert.equal(Buffer.from(worker.akPublic).toString('base64'), ak);
    assert.equal(worker.role, 'worker');
    assert.deepEqual(worker.addresses, [`${prefix}.100`]);
    assert.equal((await registry.lookup('control-plane-0'))?.role, 'control-plane');
    assert.equal(await registry.lookup('worker-1'), undefined);
  });

  it('refuses control requests without the token, and bad registrations', async () => {
    const body = { role: 'worker' as const, group: 'w', address: `${prefix}.101`, akPublic: ak };
    await assert.rejects(requestJson(`${url}/v1/control/nodes/evil`, { method: 'PUT', body }), /control token/);
    await assert.rejects(
      requestJson(`${url}/v1/control/nodes/evil`, { method: 'PUT', body, token: 'd'.repeat(64) }),
      /control token/,
    );
    await assert.rejects(requestJson(`${url}/v1/control/nodes/worker-0`, { method: 'DELETE' }), /control token/);
    assert.equal(await localAkRegistry(url).lookup('evil'), undefined);
    await assert.rejects(control.registerNode('evil', { ...body, address: 'not an ip' } as never), /address/);
    await assert.rejects(
      control.registerNode('evil', { ...body, role: 'admin', akPublic: 'not base64!' } as never),
      /role: must be "control-plane" or "worker"; akPublic: must be non-empty base64/,
    );
    await assert.rejects(
      control.registerNode('evil', { ...body, address: `${prefix}.10` }),
      /belongs to control-plane-0/,
    );
  });

  it('forgets an unregistered node', async () => {
    await control.registerNode('worker-9', { role: 'worker', group: 'w', address: `${prefix}.109`, akPublic: ak });
    assert.ok(await localAkRegistry(url).lookup('worker-9'));
    await control.unregisterNode('worker-9');
    assert.equal(await localAkRegistry(url).lookup('worker-9'), undefined);
    await assert.rejects(
      new LocalNodeMetadata({ metadataUrl: url, nodeIp: `${prefix}.109` }).self(),
      /403|not the address/,
    );
  });

  it('answers a path with a malformed %-escape with 400 and says so, not with a server error', async () => {
    const response = await fetch(`${url}/v1/ak/%E0%A4%A`);
    assert.equal(response.status, 400);
    assert.match(
      ((await response.json()) as { error: string }).error,
      /the path segment "%E0%A4%A" is not validly URL-encoded/,
    );
  });

  it('answers a control body with a "constructor" key with 400 naming the key', async () => {
    const response = await fetch(`${url}/v1/control/nodes/evil`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"role":"worker","group":"w","address":"127.0.0.1","akPublic":"AA==","constructor":null}',
    });
    assert.equal(response.status, 400);
    assert.match(
      ((await response.json()) as { error: string }).error,
      /request body has the key "constructor", which is not allowed/,
    );
  });

  it('needs METADATA_URL and NODE_IP on the node side', () => {
    assert.throws(() => new LocalNodeMetadata({ metadataUrl: '', nodeIp: '' }), /needs METADATA_URL/);
  });
});
