/**
 * Node side of the Azure provider: what a bootstrapper asks about itself and its cluster. "Self", the init
 * secret hash and the join-service key come from the instance metadata service (IMDS, http://169.254.169.254, header Metadata: true),
 * whose tags are the scale set's tags; peers and the load balancer come from Azure Resource Manager, found by
 * the cluster's uid tag in the node's resource group, authenticated as the node's managed identity with a token
 * from IMDS (./managed-identity.ts).
 */
import type { CloudControllerValues, InstanceMetadata, NodeMetadata, NodeRole } from '../contract.js';
import { X509Certificate } from 'node:crypto';
import {
  attestedDocumentSigner,
  type AzureAttestedDocumentEvidence,
} from '../../lib/attestation/azure-attested-document.js';
import { UserError } from '../../lib/errors.js';
import { createAzureClients, type AzureClients } from './clients.js';
import { nodeCredentialOptions } from './managed-identity.js';
import { toUserError } from './errors.js';
import { IMDS_ENDPOINT, type AzureProviderOptions } from './options.js';
import { parseResourceId, TAG_INIT_SECRET_HASH, TAG_JOIN_SERVICE_KEY, TAG_ROLE, TAG_UID } from './plan.js';
import { collect, listScaleSetMembers } from './scale-set-members.js';

const IMDS_API_VERSION = '2021-02-01';
const ATTESTED_API_VERSION = '2020-09-01';

/** The part of the IMDS instance document we read. */
interface ImdsInstance {
  compute: {
    name: string;
    resourceId: string;
    subscriptionId: string;
    resourceGroupName: string;
    location?: string;
    vmId?: string;
    osProfile?: { computerName?: string };
    tagsList?: { name: string; value: string }[];
  };
  network: { interface: { ipv4: { ipAddress: { privateIpAddress: string }[] } }[] };
}

/** Kubernetes' provider id of an Azure VM: "azure://" followed by the resource id (which starts with "/"). */
export function providerIdOf(resourceId: string): string {
  return `azure://${resourceId}`;
}

function roleOf(value: string | undefined): NodeRole {
  return value === 'control-plane' ? 'control-plane' : 'worker';
}

export class AzureNodeMetadata implements NodeMetadata {
  private instance?: Promise<ImdsInstance>;
  private armClients?: Promise<AzureClients>;

  constructor(private readonly options: AzureProviderOptions = {}) {}

  /** The IMDS instance document, fetched once (it does not change while the node runs). */
  private imds(): Promise<ImdsInstance> {
    this.instance ??= (async () => {
      const url = `${this.options.imdsEndpoint ?? IMDS_ENDPOINT}/metadata/instance?api-version=${IMDS_API_VERSION}`;
      let response: Response;
      try {
        response = await fetch(url, { headers: { Metadata: 'true' }, signal: AbortSignal.timeout(10_000) });
      } catch (err) {
        throw new UserError(
          `The Azure instance metadata service (${url}) is not reachable: ${(err as Error).message}`,
          {
            hint: 'The node-side Azure provider only works on an Azure VM.',
            cause: err,
          },
        );
      }
      if (!response.ok)
        throw new UserError(`The Azure instance metadata service answered ${response.status} ${response.statusText}.`);
      return (await response.json()) as ImdsInstance;
    })();
    this.instance.catch(() => (this.instance = undefined));
    return this.instance;
  }

  private async tag(name: string): Promise<string | undefined> {
    return (await this.imds()).compute.tagsList?.find((t) => t.name === name)?.value;
  }

  private async requiredTag(name: string): Promise<string> {
    const value = await this.tag(name);
    if (!value) throw new UserError(`This VM has no ${name} tag; it was not created by constellation.`);
    return value;
  }

  private async clients(): Promise<AzureClients> {
    const { compute } = await this.imds();
    this.armClients ??= createAzureClients(compute.subscriptionId, nodeCredentialOptions(this.options));
    return this.armClients;
  }

  async self(): Promise<InstanceMetadata> {
    const { compute, network } = await this.imds();
    return {
      name: compute.osProfile?.computerName || compute.name,
      providerId: providerIdOf(compute.resourceId),
      role: roleOf(await this.tag(TAG_ROLE)),
      vpcIp: network.interface[0]?.ipv4.ipAddress[0]?.privateIpAddress ?? '',
    };
  }

  /** '' once the cluster is initialized: markInitialized takes the tag off the scale sets, so no node added later serves Init. */
  async initSecretHash(): Promise<string> {
    await this.requiredTag(TAG_UID); // a VM constellation made, initialized or not
    return (await this.tag(TAG_INIT_SECRET_HASH)) ?? '';
  }

  async joinServiceKey(): Promise<string> {
    return this.requiredTag(TAG_JOIN_SERVICE_KEY);
  }

  async peers(): Promise<InstanceMetadata[]> {
    const uid = await this.requiredTag(TAG_UID);
    const { resourceGroupName } = (await this.imds()).compute;
    const clients = await this.clients();
    try {
      const sets = (await collect(clients.compute.virtualMachineScaleSets.list(resourceGroupName))).filter(
        (s) => s.tags?.[TAG_UID] === uid,
      );
      const perSet = await Promise.all(
        sets.map(async (set) =>
          (await listScaleSetMembers(clients, resourceGroupName, set.name!)).map((m) => ({
            name: m.computerName,
            providerId: providerIdOf(m.id),
            role: roleOf(set.tags?.[TAG_ROLE]),
            vpcIp: m.privateIp,
          })),
        ),
      );
      return perSet.flat();
    } catch (err) {
      throw toUserError(err, "listing the cluster's VMs");
    }
  }

  /** The cluster's uid tag and the subscription of this VM (a join service names only VMs of both). */
  async cluster(): Promise<{ uid: string; subscriptionId: string }> {
    return { uid: await this.requiredTag(TAG_UID), subscriptionId: (await this.imds()).compute.subscriptionId };
  }

  /** This VM as IMDS names it: what its attestation carries so a join service can tell who it is. */
  async vmIdentity(): Promise<{ resourceId: string; vmId: string }> {
    const { resourceId, vmId } = (await this.imds()).compute;
    if (!vmId) throw new UserError('The Azure instance metadata service names no vmId for this VM.');
    return { resourceId, vmId };
  }

  /**
   * IMDS's attested document for `nonce` (lib/attestation/azure-attested-document.ts), with the intermediate
   * certificates its signer's Authority Information Access names, fetched as Azure's docs describe (the document
   * carries only the signer's certificate). A verifier checks them against its pinned roots, so where they come from
   * does not matter; an intermediate that cannot be fetched is left out, and the verifier then says the chain is broken.
   */
  async attestedDocument(nonce: string): Promise<AzureAttestedDocumentEvidence> {
    const url = `${this.options.imdsEndpoint ?? IMDS_ENDPOINT}/metadata/attested/document?api-version=${ATTESTED_API_VERSION}&nonce=${nonce}`;
    let response: Response;
    try {
      response = await fetch(url, { headers: { Metadata: 'true' }, signal: AbortSignal.timeout(10_000) });
    } catch (err) {
      throw new UserError(`The Azure instance metadata service (${url}) is not reachable: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (!response.ok)
      throw new UserError(
        `The Azure instance metadata service answered ${response.status} ${response.statusText} for the attested document.`,
      );
    const { signature } = (await response.json()) as { signature?: string };
    if (!signature)
      throw new UserError('The Azure instance metadata service returned an attested document without a signature.');
    const intermediates: string[] = [];
    let next = attestedDocumentSigner(signature);
    for (let hop = 0; hop < 2 && next?.infoAccess; hop++) {
      const caIssuers = /CA Issuers - URI:(\S+)/.exec(next.infoAccess)?.[1];
      if (!caIssuers || !/^https?:\/\//.test(caIssuers)) break;
      try {
        const got = await fetch(caIssuers, { signal: AbortSignal.timeout(10_000) });
        if (!got.ok) break;
        const cert = new X509Certificate(Buffer.from(await got.arrayBuffer()));
        intermediates.push(cert.toString());
        next = cert.subject === cert.issuer ? undefined : cert;
      } catch {
        break;
      }
    }
    return { signature, ...(intermediates.length > 0 ? { intermediates } : {}) };
  }

  /**
   * The cloud controller manager's values: subscription, resource group and location from IMDS, and the cluster's
   * network security group (the one tagged with its uid in the node's resource group) from ARM.
   */
  async cloudControllerValues(): Promise<CloudControllerValues> {
    const uid = await this.requiredTag(TAG_UID);
    const { subscriptionId, resourceGroupName, location } = (await this.imds()).compute;
    if (!location) throw new UserError('The Azure instance metadata service names no location for this VM.');
    const clients = await this.clients();
    let nsg: string | undefined;
    try {
      nsg = (await collect(clients.network.networkSecurityGroups.list(resourceGroupName))).find(
        (g) => g.tags?.[TAG_UID] === uid,
      )?.name;
    } catch (err) {
      throw toUserError(err, 'looking up the network security group');
    }
    if (!nsg)
      throw new UserError(`No network security group with ${TAG_UID}=${uid} in resource group ${resourceGroupName}.`);
    return { cloud: 'azure', subscriptionId, resourceGroup: resourceGroupName, location, securityGroupName: nsg };
  }

  async loadBalancerEndpoint(): Promise<string> {
    const uid = await this.requiredTag(TAG_UID);
    const { resourceGroupName } = (await this.imds()).compute;
    const clients = await this.clients();
    try {
      const lbs = (await collect(clients.network.loadBalancers.list(resourceGroupName))).filter(
        (lb) => lb.tags?.[TAG_UID] === uid,
      );
      const ipId = lbs[0]?.frontendIPConfigurations?.[0]?.publicIPAddress?.id;
      if (!ipId) throw new UserError(`No load balancer with ${TAG_UID}=${uid} in resource group ${resourceGroupName}.`);
      const { resourceGroup, name } = parseResourceId(ipId);
      const ip = await clients.network.publicIPAddresses.get(resourceGroup, name);
      if (!ip.ipAddress) throw new UserError(`The load balancer's public IP ${name} has no address yet.`);
      return ip.ipAddress;
    } catch (err) {
      throw toUserError(err, 'looking up the load balancer');
    }
  }
}
