/**
 * A control plane joining on Azure is identified by its attestation (providers/azure/instance-identity.ts): the
 * document's instanceInfo.identity (resource id and vmId from IMDS, covered by the quote) is looked up in the fake
 * ARM, and only a VM of this cluster's scale sets with that vmId is named, with its scale set's role. The vmId
 * counts only when IMDS's attested document (signed by the test PKI standing in for Microsoft's) vouches for it.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { azureImdsNonce } from '../../../lib/attestation/azure-attested-document.js';
import { azureAttestedInstance } from '../../../lib/attestation/variants/cloud-common.js';
import { AttestationError } from '../../../lib/attestation/types.js';
import { AzureInfrastructure } from '../../../providers/azure/infrastructure.js';
import { azureInstanceIdentity } from '../../../providers/azure/instance-identity.js';
import { parseAzureOptions } from '../../../providers/azure/options.js';
import type { Instance } from '../../../providers/contract.js';
import { BootstrapTokenIssuer, MemoryTokenSink } from '../../../joinservice/bootstrap-token.js';
import { JoinTicketIssuer } from '../../../joinservice/ticket-issuer.js';
import type { JoinHello } from '../../../proto/gen/constellation/join.js';
import { FakeArm } from '../../fakes/azure/arm-server.js';
import {
  attestedContent,
  imdsTestIntermediateDer,
  imdsTestRoots,
  makeImdsSigner,
  signAttestedContent,
  type ImdsSigner,
} from '../../fakes/azure/imds-pki.js';
import { testContext } from './context.js';
import { createRequest, RESOURCE_GROUP, SUBSCRIPTION } from './fixtures.js';

const hello = (nodeName: string, isControlPlane: boolean) => ({ nodeName, isControlPlane }) as JoinHello;

describe('azure provider: instance identity for control-plane tickets', function () {
  this.timeout(30_000);
  let fake: FakeArm;
  let instances: Instance[];
  const uid = createRequest().uid;
  const issuer = new JoinTicketIssuer({
    tokens: new BootstrapTokenIssuer({ sink: new MemoryTokenSink() }),
    clock: () => new Date(),
  });

  /** The node's AK (what the document's nonce is derived from). */
  const ak = new Uint8Array([1, 2, 3, 4]);
  let signer: ImdsSigner;

  before(async () => {
    signer = await makeImdsSigner();
    fake = await FakeArm.start();
    fake.seed(`/subscriptions/${SUBSCRIPTION}/resourceGroups/${RESOURCE_GROUP}`, {
      location: 'westeurope',
      properties: { provisioningState: 'Succeeded' },
    });
    fake.seedGalleryImage(SUBSCRIPTION, 'westeurope', createRequest().image);
    const infra = new AzureInfrastructure(parseAzureOptions(fake.providerOptions()));
    const ctx = testContext();
    await infra.create(createRequest(), ctx);
    instances = await infra.listInstances(ctx);
  });
  after(async () => {
    await fake?.stop();
  });

  const identify = (cluster = { uid, subscriptionId: SUBSCRIPTION }) =>
    azureInstanceIdentity(parseAzureOptions(fake.providerOptions()), async () => cluster);
  /** The VM as its IMDS names it: resource id and the vmId Azure gave it. */
  const imdsIdentity = (instance: Instance) => ({
    resourceId: instance.id,
    vmId: (fake.get(instance.id) as { properties: { vmId: string } }).properties.vmId,
  });

  it("names a VM of its own cluster with its computer name, address and its scale set's role", async () => {
    for (const role of ['control-plane', 'worker'] as const) {
      const vm = instances.find((i) => i.role === role)!;
      assert.deepEqual(await identify()(imdsIdentity(vm)), { name: vm.name, role, addresses: [vm.privateIp] });
    }
  });

  it('names nobody for another cluster, another subscription, a VM ARM does not know, or another vmId under the same resource id', async () => {
    const cp = instances.find((i) => i.role === 'control-plane')!;
    assert.equal(await identify({ uid: 'ffffffff', subscriptionId: SUBSCRIPTION })(imdsIdentity(cp)), undefined);
    assert.equal(
      await identify({ uid, subscriptionId: '99999999-1111-2222-3333-444444444444' })(imdsIdentity(cp)),
      undefined,
    );
    assert.equal(
      await identify()({
        resourceId: cp.id.replace(/\/virtualMachines\/\d+$/, '/virtualMachines/999'),
        vmId: imdsIdentity(cp).vmId,
      }),
      undefined,
    );
    assert.equal(await identify()({ resourceId: cp.id, vmId: '00000000-0000-4000-8000-00000000dead' }), undefined);
  });

  /** instanceInfo.identity as the node sends it: IMDS's names plus the attested document vouching for `vouchedVmId`. */
  const attestedIdentity = (instance: Instance, vouchedVmId = imdsIdentity(instance).vmId) => ({
    ...imdsIdentity(instance),
    attested: {
      signature: signAttestedContent(
        attestedContent({ nonce: azureImdsNonce(ak), vmId: vouchedVmId, subscriptionId: SUBSCRIPTION }),
        signer,
      ),
      intermediates: [new X509Certificate(Buffer.from(imdsTestIntermediateDer())).toString()],
    },
  });

  it("a control plane's attested identity gets a control-plane ticket; a worker claiming a control plane's VM, or asking as itself, does not", async () => {
    const [cp, worker] = [
      instances.find((i) => i.role === 'control-plane')!,
      instances.find((i) => i.role === 'worker')!,
    ];
    const deps = { azureInstanceIdentity: identify(), azureImdsRoots: imdsTestRoots() };
    const cpInstance = await azureAttestedInstance({ identity: attestedIdentity(cp) }, ak, deps);
    issuer.checkIdentity(hello(cp.name, true), cpInstance);

    // A worker whose document named the control plane's VM (its IMDS never would) names that VM; its join request
    // carries its own node name, which is not the attested instance's.
    const claimed = await azureAttestedInstance({ identity: attestedIdentity(cp) }, ak, deps);
    assert.throws(
      () => issuer.checkIdentity(hello(worker.name, true), claimed),
      (err: unknown) =>
        err instanceof AttestationError &&
        new RegExp(`names node "${worker.name}", but the attestation comes from instance "${cp.name}"`).test(
          err.message,
        ),
    );

    const workerInstance = await azureAttestedInstance({ identity: attestedIdentity(worker) }, ak, deps);
    assert.throws(
      () => issuer.checkIdentity(hello(worker.name, true), workerInstance),
      /as a worker node: the cluster's CA keys go only to control-plane nodes/,
    );
    // Without an identity in the document nothing is named, so no control-plane ticket either.
    const unnamed = await azureAttestedInstance({}, ak, deps);
    assert.throws(
      () => issuer.checkIdentity(hello(cp.name, true), unnamed),
      /the attestation does not identify the instance/,
    );
  });

  it("refuses a VM identity that IMDS's attested document does not vouch for, or that comes without one", async () => {
    const cp = instances.find((i) => i.role === 'control-plane')!;
    const deps = { azureInstanceIdentity: identify(), azureImdsRoots: imdsTestRoots() };
    await assert.rejects(
      azureAttestedInstance({ identity: imdsIdentity(cp) }, ak, deps),
      /without IMDS's attested document, so nothing vouches for its vmId/,
    );
    await assert.rejects(
      azureAttestedInstance({ identity: attestedIdentity(cp, '00000000-0000-4000-8000-00000000dead') }, ak, deps),
      /names VM 00000000-0000-4000-8000-00000000dead, not /,
    );
    await assert.rejects(
      azureAttestedInstance({ identity: attestedIdentity(cp) }, new Uint8Array([9]), deps),
      /not the one derived from this node's attestation key/,
    );
    // The shipped roots (Microsoft's) do not trust the test PKI.
    await assert.rejects(
      azureAttestedInstance({ identity: attestedIdentity(cp) }, ak, { azureInstanceIdentity: identify() }),
      /does not chain to a trusted root/,
    );
  });
});
