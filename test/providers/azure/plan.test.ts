/** The Azure resource plan: confidential settings per variant, names, dependencies, config parsing. */
import assert from 'node:assert/strict';
import { baseName, imageReference, parseAzureConfig, planResources } from '../../../providers/azure/plan.js';
import { createRequest, IDENTITY, RESOURCE_GROUP, SUBSCRIPTION } from './fixtures.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function scaleSets(variant: string, instanceType: string, providerConfig: Json = {}) {
  const request = createRequest({ attestationVariant: variant });
  for (const g of request.nodeGroups) g.instanceType = instanceType;
  Object.assign(request.providerConfig, providerConfig);
  return planResources(request, parseAzureConfig(request.providerConfig)).flatMap((p) =>
    p.kind === 'azure:vmss' ? [p.body('ssh-rsa AAAA') as Json] : [],
  );
}

describe('azure plan', function () {
  it('runs TDX on DCes_v5 as a confidential VM and trusted launch without disk encryption', function () {
    const [tdx] = scaleSets('azure-tdx', 'Standard_DC4es_v5', { secureBoot: true });
    assert.equal(tdx.virtualMachineProfile.securityProfile.securityType, 'ConfidentialVM');
    assert.deepEqual(tdx.virtualMachineProfile.securityProfile.uefiSettings, {
      vTpmEnabled: true,
      secureBootEnabled: true,
    });
    assert.equal(
      tdx.virtualMachineProfile.storageProfile.osDisk.managedDisk.securityProfile.securityEncryptionType,
      'VMGuestStateOnly',
    );
    assert.throws(() => scaleSets('azure-tdx', 'Standard_DC4as_v5'), /cannot run azure-tdx/);

    const [tl] = scaleSets('azure-trustedlaunch', 'Standard_D4s_v5');
    assert.equal(tl.virtualMachineProfile.securityProfile.securityType, 'TrustedLaunch');
    assert.equal(tl.virtualMachineProfile.securityProfile.uefiSettings.vTpmEnabled, true);
    assert.equal(tl.virtualMachineProfile.storageProfile.osDisk.managedDisk.securityProfile, undefined);
  });

  it('orders scale sets after the network and load balancer, and the network after NAT and NSG', function () {
    const request = createRequest();
    const plan = planResources(request, parseAzureConfig(request.providerConfig));
    const deps = Object.fromEntries(plan.map((p) => [p.key, p.dependsOn]));
    assert.deepEqual(deps['vmss:worker_default'], ['vnet', 'load-balancer']);
    assert.deepEqual(deps.vnet, ['nat-gateway', 'network-security-group']);
    assert.deepEqual(deps['load-balancer'], ['public-ip:lb']);
    assert.deepEqual(deps['nat-gateway'], ['public-ip:nat']);
    assert.ok(plan.every((p) => p.id.startsWith(`/subscriptions/${SUBSCRIPTION}/resourceGroups/${RESOURCE_GROUP}`)));
  });

  it('derives valid names and accepts the image reference forms', function () {
    assert.equal(baseName({ name: 'My_Cluster!', uid: 'AB12' }), 'my-cluster-ab12');
    assert.deepEqual(
      imageReference('/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/galleries/g/images/i/versions/1'),
      {
        id: '/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/galleries/g/images/i/versions/1',
      },
    );
    assert.deepEqual(imageReference('/SharedGalleries/x/Images/y/Versions/1'), {
      sharedGalleryImageId: '/SharedGalleries/x/Images/y/Versions/1',
    });
    assert.throws(() => imageReference('ami-123'), /not an Azure image reference/);
  });

  it('accepts an identity name for userAssignedIdentity and names missing keys', function () {
    const config = parseAzureConfig({
      subscription: SUBSCRIPTION,
      location: 'westeurope',
      resourceGroup: RESOURCE_GROUP,
      userAssignedIdentity: 'constell-nodes',
    });
    assert.equal(config.userAssignedIdentity, IDENTITY);
    assert.equal(config.deployCSIDriver, false);
    assert.throws(() => parseAzureConfig({ subscription: SUBSCRIPTION }), /provider\.azure\.resourceGroup is not set/);
  });
});
