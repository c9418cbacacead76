/**
 * The node side of the GCP provider against the fake metadata server and Compute API: self, peers,
 * load-balancer endpoint, init-secret hash, and the shielded-VM identity lookup of the attestation variants.
 */
import assert from 'node:assert/strict';
import provider from '../../../providers/gcp/index.js';
import { GcpInfrastructure } from '../../../providers/gcp/infrastructure.js';
import { GcpNodeMetadata } from '../../../providers/gcp/metadata.js';
import { pemToDer } from '../../../providers/gcp/shielded-identity.js';
import { namePrefix } from '../../../providers/gcp/plan.js';
import type { GcpShieldedIdentityClient } from '../../../lib/attestation/variants/gcp-sev-es.js';
import { FakeGcp } from '../../fakes/gcp/server.js';
import { createRequest, INIT_SECRET_HASH, JOIN_SERVICE_KEY, PROJECT, providerContext, ZONE } from './support.js';

describe('GCP node metadata (fake metadata server and Compute API)', () => {
  let fake: FakeGcp;
  let endpoint: string;
  let self: { name: string; ip: string };

  before(async () => {
    fake = await FakeGcp.start();
    const infra = new GcpInfrastructure(fake.providerOptions());
    endpoint = (await infra.create(createRequest(), providerContext())).clusterEndpoint;
    // A second cluster in the same project: its nodes are not peers.
    await infra.create(createRequest({ uid: 'other000' }), providerContext());
    const worker = (await infra.listInstances(providerContext(await journalWithGroups(infra)))).find(
      (i) => i.role === 'worker',
    )!;
    self = { name: worker.name, ip: worker.privateIp };
    fake.setMetadataInstance({ project: PROJECT, zone: ZONE, name: self.name });
  });
  after(async () => {
    await fake.close();
  });

  /** A journal that knows the first cluster's groups (listInstances reads them from it). */
  async function journalWithGroups(infra: GcpInfrastructure) {
    const ctx = providerContext();
    await infra.create(createRequest(), ctx);
    return ctx.journal;
  }

  it('answers self, load balancer and init-secret hash from the metadata server', async () => {
    const metadata = new GcpNodeMetadata(fake.providerOptions());
    assert.deepEqual(await metadata.self(), {
      name: self.name,
      providerId: `gce://${PROJECT}/${ZONE}/${self.name}`,
      role: 'worker',
      vpcIp: self.ip,
    });
    assert.equal(await metadata.loadBalancerEndpoint(), endpoint);
    assert.equal(await metadata.initSecretHash(), INIT_SECRET_HASH);
    assert.equal(await metadata.joinServiceKey(), JOIN_SERVICE_KEY);
  });

  it('gives the cloud controller manager the project and the network tag the nodes carry', async () => {
    const values = await new GcpNodeMetadata(fake.providerOptions()).cloudControllerValues();
    assert.deepEqual(values, { cloud: 'gcp', projectId: PROJECT, nodeTag: namePrefix('a1b2c3d4') });
    const tags = (fake.compute.list('instances') as { name: string; tags?: { items?: string[] } }[]).find(
      (i) => i.name === self.name,
    )?.tags?.items;
    assert.ok(
      values.cloud === 'gcp' && tags?.includes(values.nodeTag),
      `the instance's tags ${JSON.stringify(tags)} hold the node tag`,
    );
  });

  it('lists the peers of its own cluster only', async () => {
    const metadata = new GcpNodeMetadata(fake.providerOptions());
    const peers = await metadata.peers();
    assert.equal(peers.length, 5);
    assert.ok(
      peers.every(
        (p) => p.name.startsWith('constell-a1b2c3d4-') && p.providerId.startsWith(`gce://${PROJECT}/${ZONE}/`),
      ),
    );
    assert.equal(peers.filter((p) => p.role === 'control-plane').length, 3);
    assert.ok(peers.some((p) => p.name === self.name));
  });

  it('sends the Metadata-Flavor header and reports a missing attribute', async () => {
    const metadata = new GcpNodeMetadata({ ...fake.providerOptions(), metadataEndpoint: `${fake.url}/` });
    fake.setMetadataInstance({ project: PROJECT, zone: ZONE, name: 'no-such-instance' });
    try {
      await assert.rejects(metadata.joinServiceKey(), /metadata server/);
      // No init-secret hash reads as an initialized cluster (markInitialized takes it away): such a node serves no Init.
      assert.equal(await metadata.initSecretHash(), '');
    } finally {
      fake.setMetadataInstance({ project: PROJECT, zone: ZONE, name: self.name });
    }
  });

  it('looks up the shielded-VM identity for the attestation validators', async () => {
    const ekPub = '-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n';
    const ekCert = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n';
    fake.setShieldedIdentity(self.name, { ekPub, ekCert });
    const deps = await provider.attestationDeps!(fake.providerOptions());
    const lookup = deps.gcpShieldedIdentity as GcpShieldedIdentityClient;
    const identity = await lookup({ projectId: PROJECT, zone: ZONE, instanceName: self.name });
    assert.deepEqual(identity.akCertDer, pemToDer(ekCert));
    assert.deepEqual((identity as { akSpkiDer?: Uint8Array }).akSpkiDer, pemToDer(ekPub));
    await assert.rejects(
      lookup({ projectId: PROJECT, zone: ZONE, instanceName: 'nope' }),
      /shielded VM identity of nope failed/,
    );
  });
});
