/**
 * A control plane joining on GCP is identified by its attestation (providers/gcp/instance-identity.ts, the gcp-*
 * variants' AK trust) against the fake Compute API: the AK must be the one GCP's shielded VM identity returns for
 * the instance the document names, and the join service then asks Compute who that instance is in its cluster.
 */
import assert from 'node:assert/strict';
import { gcpSevEsTrust } from '../../../lib/attestation/variants/gcp-sev-es.js';
import { GcpInfrastructure } from '../../../providers/gcp/infrastructure.js';
import { gcpInstanceIdentity } from '../../../providers/gcp/instance-identity.js';
import { shieldedIdentityClient } from '../../../providers/gcp/shielded-identity.js';
import { BootstrapTokenIssuer, MemoryTokenSink } from '../../../joinservice/bootstrap-token.js';
import { JoinTicketIssuer } from '../../../joinservice/ticket-issuer.js';
import type { JoinHello } from '../../../proto/gen/constellation/join.js';
import { AttestationError } from '../../../lib/attestation/types.js';
import { documentWith, makeAk, rejectsWith, type TestAk } from '../../attestation/variants/cloud-helpers.js';
import { FakeGcp } from '../../fakes/gcp/server.js';
import { createRequest, PROJECT, providerContext, ZONE } from './support.js';

const UID = 'a1b2c3d4';
const measurements = { '4': { expected: '00'.repeat(32), warnOnly: false } };
const spkiPem = (ak: TestAk) => ak.key.export({ type: 'spki', format: 'pem' }).toString();
const hello = (nodeName: string, isControlPlane: boolean) => ({ nodeName, isControlPlane }) as JoinHello;

describe('gcp provider: instance identity for control-plane tickets', function () {
  this.timeout(30_000);
  let fake: FakeGcp;
  let instances: { name: string; role: string; privateIp: string }[];
  let other: { name: string };
  const issuer = new JoinTicketIssuer({
    tokens: new BootstrapTokenIssuer({ sink: new MemoryTokenSink() }),
    clock: () => new Date(),
  });

  before(async () => {
    fake = await FakeGcp.start();
    const infra = new GcpInfrastructure(fake.providerOptions());
    const ctx = providerContext();
    await infra.create(createRequest(), ctx);
    instances = await infra.listInstances(ctx);
    const otherCtx = providerContext();
    await infra.create(createRequest({ uid: 'other000' }), otherCtx);
    other = (await infra.listInstances(otherCtx))[0]!;
  });
  after(async () => {
    await fake.close();
  });

  const identify = (uid = UID) => gcpInstanceIdentity(fake.providerOptions(), async () => uid);
  const trust = () =>
    gcpSevEsTrust(
      { measurements },
      { gcpShieldedIdentity: shieldedIdentityClient(fake.providerOptions()), gcpInstanceIdentity: identify() },
    );
  const instanceInfo = (name: string) => ({ projectId: PROJECT, zone: ZONE, instanceName: name });

  it('names an instance of its own cluster with its name, address and the role its template gave it', async () => {
    for (const role of ['control-plane', 'worker'] as const) {
      const instance = instances.find((i) => i.role === role)!;
      assert.deepEqual(await identify()(instanceInfo(instance.name)), {
        name: instance.name,
        role,
        addresses: [instance.privateIp],
      });
    }
  });

  it("names nobody for another cluster's instance or one Compute does not know", async () => {
    assert.equal(await identify()(instanceInfo(other.name)), undefined);
    assert.equal(await identify('ffffffff')(instanceInfo(instances[0]!.name)), undefined);
    assert.equal(await identify()(instanceInfo('constell-nope')), undefined);
  });

  it('a control plane attesting with the AK GCP registered for it gets a control-plane ticket', async () => {
    const cp = instances.find((i) => i.role === 'control-plane')!;
    const ak = makeAk();
    fake.setShieldedIdentity(cp.name, { ekPub: spkiPem(ak) });
    const instance = await trust()(documentWith('gcp-sev-es', instanceInfo(cp.name)), ak.akPublic);
    assert.deepEqual(instance, { name: cp.name, role: 'control-plane', addresses: [cp.privateIp] });
    issuer.checkIdentity(hello(cp.name, true), instance ?? undefined);
  });

  it('a node claiming another instance (a control plane) is refused: GCP registered another AK for it', async () => {
    const [cp, worker] = [
      instances.find((i) => i.role === 'control-plane')!,
      instances.find((i) => i.role === 'worker')!,
    ];
    const [cpAk, workerAk] = [makeAk(), makeAk()];
    fake.setShieldedIdentity(cp.name, { ekPub: spkiPem(cpAk) });
    fake.setShieldedIdentity(worker.name, { ekPub: spkiPem(workerAk) });
    await rejectsWith(
      trust()(documentWith('gcp-sev-es', instanceInfo(cp.name)), workerAk.akPublic),
      new RegExp(`not the one GCP registered for instance ${cp.name}`),
    );
  });

  it('a genuine worker asking for a control-plane ticket is refused: the provider made it a worker', async () => {
    const worker = instances.find((i) => i.role === 'worker')!;
    const ak = makeAk();
    fake.setShieldedIdentity(worker.name, { ekPub: spkiPem(ak) });
    const instance = await trust()(documentWith('gcp-sev-es', instanceInfo(worker.name)), ak.akPublic);
    assert.equal(instance?.role, 'worker');
    assert.throws(
      () => issuer.checkIdentity(hello(worker.name, true), instance ?? undefined),
      (err: unknown) =>
        err instanceof AttestationError &&
        /the provider created instance "[^"]+" as a worker node: the cluster's CA keys go only to control-plane nodes/.test(
          err.message,
        ),
    );
    issuer.checkIdentity(hello(worker.name, false), instance ?? undefined);
  });
});
