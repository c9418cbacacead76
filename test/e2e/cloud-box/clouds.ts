/**
 * The clouds of the cloud-in-a-box test, each behind one small adapter: how `create`, `status` and `terminate` reach
 * its fake, which instances are running, how a node of that cloud is set up (its metadata endpoint, credentials,
 * what its vTPM holds), what the verifier side (init) needs, and how to launch extra workers.
 *   aws    the built CLI in a child process (the SDK finds the fake through AWS_ENDPOINT_URL and static keys)
 *   gcp    the CLI's orchestration (cli/cluster) in process with the provider pointed at the fake; nodes reach the
 *          Compute API with application default credentials from their (fake) metadata server
 *   azure  as gcp; each node has its own fake IMDS (instance document, THIM certificates); its vTPM holds what
 *          Azure's paravisor puts there (a persistent RSA AK, the HCL report with the SNP report binding it)
 */
import assert from 'node:assert/strict';
import { createHash, createPrivateKey } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { parse, parseDocument, type Document } from 'yaml';
import { createCluster } from '../../../cli/cluster/create.js';
import { withWorkspaceSession } from '../../../cli/cluster/session.js';
import { clusterStatus } from '../../../cli/cluster/status.js';
import { terminateCluster } from '../../../cli/cluster/terminate.js';
import {
  AZURE_AK_HANDLE,
  AZURE_HCL_REPORT_INDEX,
  encodeHclReport,
  GCE_AK_TEMPLATE_INDEX_RSA,
} from '../../../lib/attestation/cloud-evidence.js';
import { certificatesDer } from '../../../lib/attestation/snp/certs.js';
import type { ValidatorDeps } from '../../../lib/attestation/types.js';
import { parseTpmPublic, publicKeyFromTpmPublic } from '../../../lib/tpm/structures.js';
import { CONFIG_FILE, STATE_FILE } from '../../../lib/workspace/files.js';
import awsProvider from '../../../providers/aws/index.js';
import { AwsInfrastructure } from '../../../providers/aws/infrastructure.js';
import type { InfrastructureProvider } from '../../../providers/contract.js';
import { AzureInfrastructure } from '../../../providers/azure/infrastructure.js';
import { parseAzureOptions } from '../../../providers/azure/options.js';
import { GcpInfrastructure } from '../../../providers/gcp/infrastructure.js';
import { shieldedIdentityClient } from '../../../providers/gcp/shielded-identity.js';
import { makeSnpReport, type EndorsementKey } from '../../attestation/snp/fixtures.js';
import { launchInstance } from '../../fakes/aws/ec2.js';
import {
  FAKE_CREDENTIALS,
  FAKE_IMAGE,
  startFakeAws,
  type FakeAws,
  type FakeAwsOptions,
} from '../../fakes/aws/server.js';
import { targetsBehind } from '../../fakes/aws/elb.js';
import {
  FakeArm,
  FAKE_TENANT,
  FAKE_TOKEN as FAKE_ARM_TOKEN,
  type FakeArmOptions,
} from '../../fakes/azure/arm-server.js';
import { startFakeImds, type FakeImds } from '../../fakes/azure/imds-server.js';
import { imdsTestRoots } from '../../fakes/azure/imds-pki.js';
import { FakeGcp, type FakeGcpOptions } from '../../fakes/gcp/server.js';
import { runCli } from '../../support/cli.js';
import { RSA_AK_TEMPLATE } from '../../tpm/support.js';
import type { BoxInstance, NodeSettings } from './box.js';
import type { BoxTee } from './node-program.js';
import { fillImageMeasurements } from '../../support/image-measurements.js';
import type { InjectedErrors } from '../../fakes/injected.js';

const AZ_SUBSCRIPTION = '00000000-1111-2222-3333-444444444444';
const AZ_GROUP = 'box-rg';
const AZ_IMAGE = '/CommunityGalleries/box/Images/constellation/Versions/1.0.0';
/** The images an upgrade in the box moves to. */
export const GCP_NEW_IMAGE = 'projects/box/global/images/constellation-box-v2';
export const AZ_NEW_IMAGE = '/CommunityGalleries/box/Images/constellation/Versions/1.1.0';

export interface NodeStatusJson {
  nodes: { name: string; role: string; address: string; state: string; reason?: string }[];
}

export interface BoxCloud {
  readonly variant: string;
  /** Which key signs this cloud's SNP reports. */
  readonly signingKind: 'vcek' | 'vlek';
  /** `config generate` for the cloud, the fields only an account knows, 1 control plane + 2 workers, the TCB. */
  configure(doc: Document, tcb: EndorsementKey['tcb']): void;
  create(): Promise<{ clusterEndpoint: string }>;
  running(): BoxInstance[];
  node(instance: BoxInstance, tee: BoxTee): Promise<NodeSettings>;
  /** The provider's infrastructure side, pointed at the fake (verify --all lists the nodes through it). */
  readonly infrastructure: InfrastructureProvider;
  /** What `init` validates the first node with (the test ARK added by the caller). */
  validatorDeps(): Promise<Partial<ValidatorDeps>>;
  status(): Promise<NodeStatusJson>;
  addWorkers(count: number): Promise<BoxInstance[]>;
  terminate(): Promise<void>;
  /** How long the fake itself waited on purpose so far (configured latency, long-running operations), ms. */
  fakeDelayMs(): number;
  /** The instances the cloud's load balancer sends new connections to, where the fake models it (AWS). */
  lbTargets?(): string[];
  /** What the fake still holds after terminate (empty: nothing left). */
  leftovers(): string[];
  /** What the fake answered on purpose, as the cloud does at times (eventual consistency, throttling), per kind. */
  readonly injected: InjectedErrors;
  close(): Promise<void>;
}

export async function generateConfig(
  workspace: string,
  provider: string,
  variant: string,
  edit: (doc: Document) => void,
): Promise<void> {
  const gen = await runCli(['config', 'generate', provider, '--attestation', variant, '-C', workspace]);
  assert.equal(gen.code, 0, gen.stderr);
  // The image's measurements, which the box's nodes reproduce (box.ts extends PCR 4, 9, 11 as their boot).
  await fillImageMeasurements(workspace);
  const file = path.join(workspace, CONFIG_FILE);
  const doc = parseDocument(await fs.readFile(file, 'utf8'));
  doc.setIn(['nodeGroups', 'control_plane_default', 'initialCount'], 1);
  doc.setIn(['nodeGroups', 'worker_default', 'initialCount'], 2);
  edit(doc);
  await fs.writeFile(file, doc.toString());
}

function setTcb(doc: Document, key: string, tcb: EndorsementKey['tcb']): void {
  for (const [k, v] of Object.entries({
    bootloaderVersion: tcb.bootloader,
    teeVersion: tcb.tee,
    snpVersion: tcb.snp,
    microcodeVersion: tcb.microcode,
  }))
    doc.setIn(['attestation', key, k], v);
}

const clusterEndpoint = async (workspace: string) =>
  (
    parse(await fs.readFile(path.join(workspace, STATE_FILE), 'utf8')) as {
      infrastructure: { clusterEndpoint: string };
    }
  ).infrastructure.clusterEndpoint;

export type AwsBoxCloud = BoxCloud & { readonly fake: FakeAws; readonly env: Record<string, string> };

/** AWS; `fakeOptions` adds what the fake models beyond the default (eventual consistency, drain time). */
export async function awsCloud(
  workspace: string,
  octet: number,
  fakeOptions: Partial<FakeAwsOptions> = {},
): Promise<AwsBoxCloud> {
  const fake: FakeAws = await startFakeAws({
    lroMs: 0,
    privateIpBase: `127.${octet}`,
    publicIpBase: `127.${octet + 1}`,
    ...fakeOptions,
  });
  const env = {
    AWS_ENDPOINT_URL: fake.url,
    AWS_ACCESS_KEY_ID: FAKE_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: FAKE_CREDENTIALS.secretAccessKey,
    AWS_REGION: 'us-east-2',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/credentials',
    AWS_CONFIG_FILE: '/nonexistent/config',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
  const cli = async (...args: string[]) => {
    const res = await runCli([...args, '-C', workspace], { env });
    assert.ok(
      res.code === 0 || (args[0] === 'status' && res.code === 3),
      `${args.join(' ')}: ${res.stderr}${res.stdout}`,
    );
    return res;
  };
  const asBox = (i: { id: string; privateIp: string; tags: Record<string, string> }): BoxInstance => ({
    id: i.id,
    ip: i.privateIp,
    role: i.tags['constellation-role'] === 'control-plane' ? 'control-plane' : 'worker',
  });
  let endpoint = '';
  return {
    fake,
    env,
    variant: 'aws-sev-snp',
    signingKind: 'vlek',
    configure(doc, tcb) {
      doc.setIn(['image'], FAKE_IMAGE);
      doc.setIn(['provider', 'aws', 'iamProfileControlPlane'], 'box-control-plane');
      doc.setIn(['provider', 'aws', 'iamProfileWorkerNodes'], 'box-worker');
      setTcb(doc, 'awsSEVSNP', tcb);
    },
    async create() {
      await cli('create', '-y');
      endpoint = await clusterEndpoint(workspace);
      return { clusterEndpoint: endpoint };
    },
    lbTargets: () => (endpoint ? targetsBehind(fake.state, endpoint, 30090) : []),
    infrastructure: new AwsInfrastructure({
      endpoint: fake.url,
      credentials: FAKE_CREDENTIALS,
      region: 'us-east-2',
      retryDelayMs: 20,
    }),
    running: () => [...fake.state.instances.values()].filter((i) => i.terminatedAt === undefined).map(asBox),
    node: async (instance, tee) => ({
      provider: 'aws',
      variant: 'aws-sev-snp',
      providerOptions: {
        endpoint: fake.url,
        credentials: FAKE_CREDENTIALS,
        imdsEndpoint: `${fake.url}/node/${instance.id}`,
        retryDelayMs: 20,
      },
      tee,
      trustedRoots: {},
      imageVersion: fake.state.instances.get(instance.id)?.imageId,
    }),
    validatorDeps: async () => awsProvider.attestationDeps!({ endpoint: fake.url, credentials: FAKE_CREDENTIALS }),
    status: async () => JSON.parse((await cli('status', '--json')).stdout) as NodeStatusJson,
    async addWorkers(count) {
      const template = [...fake.state.instances.values()].find((i) => i.tags['constellation-role'] === 'worker')!;
      return Array.from({ length: count }, () =>
        asBox(
          launchInstance(
            fake.state,
            template.launchTemplateId,
            template.subnetId,
            { ...template.tags },
            template.groupName,
          ),
        ),
      );
    },
    async terminate() {
      await cli('terminate', '-y');
    },
    fakeDelayMs: () => fake.requests.length * fake.latencyMs,
    leftovers: () => fake.live(),
    injected: fake.injected,
    close: () => fake.close(),
  };
}

/** create, status, more workers and terminate through the CLI's orchestration, in process, with `infra` at the fake. */
function orchestrated(workspace: string, infra: InfrastructureProvider, running: () => BoxInstance[]) {
  const session = <T>(command: string, fn: Parameters<typeof withWorkspaceSession<T>>[2]) =>
    withWorkspaceSession<T>(workspace, command, fn);
  const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined };
  return {
    async create() {
      await session('create', ({ workspaceDir, journal, log }) =>
        createCluster({ workspaceDir, provider: infra, journal, log }),
      );
      return { clusterEndpoint: await clusterEndpoint(workspace) };
    },
    status: () =>
      session('status', ({ workspaceDir, journal, log }) =>
        clusterStatus({ workspaceDir, provider: infra, journal, log, timeoutMs: 2000 }),
      ) as Promise<NodeStatusJson>,
    async addWorkers(count: number) {
      const before = new Set(running().map((i) => i.id));
      const workers = running().filter((i) => i.role === 'worker').length;
      await session('scale', ({ journal }) =>
        infra.scaleNodeGroup('worker_default', workers + count, { journal, log: quiet, workspaceDir: workspace }),
      );
      return running().filter((i) => !before.has(i.id));
    },
    async terminate() {
      await session('terminate', ({ workspaceDir, journal, log }) =>
        terminateCluster({ workspaceDir, journal, log, provider: infra }),
      );
    },
  };
}

export type GcpBoxCloud = BoxCloud & { readonly fake: FakeGcp; infrastructureFor(image?: string): GcpInfrastructure };

/** GCP; `fakeOptions` adds what the fake models beyond the default (operation time); `instanceBootMs` keeps new instances PROVISIONING. */
export async function gcpCloud(
  workspace: string,
  octet: number,
  fakeOptions: FakeGcpOptions & { instanceBootMs?: number } = {},
): Promise<GcpBoxCloud> {
  const { instanceBootMs, ...startOptions } = fakeOptions;
  const fake = await FakeGcp.start({
    privateIpBase: `127.${octet}.0`,
    publicIpBase: `127.${octet + 1}.0`,
    ...startOptions,
  });
  if (instanceBootMs) fake.compute.instanceBootMs = instanceBootMs;
  // Retries 20 ms to 200 ms apart: patient enough for inserts refused with resourceNotReady while another change to
  // the network runs (upGcpCluster makes create's operations take 200 ms).
  const options = fake.providerOptions({ retry: { attempts: 5, baseDelayMs: 20, maxDelayMs: 200 } });
  const infra = new GcpInfrastructure(options);
  const nodeEnv = {
    GCE_METADATA_HOST: fake.url.replace(/^http:\/\//, ''),
    METADATA_SERVER_DETECTION: 'assume-present',
    GOOGLE_APPLICATION_CREDENTIALS: '',
    GOOGLE_CLOUD_PROJECT: 'box-project',
  };
  const metadataOf = (i: Record<string, unknown> | undefined) =>
    (i?.metadata as { items?: { key: string; value: string }[] } | undefined)?.items ?? [];
  const instances = () =>
    fake.compute.list('instances').map((i) => {
      const labels = (i.labels ?? {}) as Record<string, string>;
      const metadata = metadataOf(i);
      const role = metadata.find((m) => m.key === 'constellation-role')?.value ?? labels['constellation-role'];
      return {
        id: String(i.name),
        ip: String((i.networkInterfaces as { networkIP: string }[])[0].networkIP),
        role: role === 'control-plane' ? 'control-plane' : 'worker',
      } as BoxInstance;
    });
  return {
    fake,
    // Polling every 100 ms as a CLI would poll a cloud, not the provider tests' 5 ms (which would spin the CPU here).
    infrastructureFor: (image?: string) =>
      new GcpInfrastructure({ ...options, pollIntervalMs: 100, ...(image ? { image } : {}) }),
    variant: 'gcp-sev-snp',
    signingKind: 'vcek',
    configure(doc, tcb) {
      doc.setIn(['image'], 'projects/box/global/images/constellation-box');
      doc.setIn(['provider', 'gcp', 'project'], 'box-project');
      doc.setIn(['provider', 'gcp', 'serviceAccountKeyPath'], 'gcp-key.json');
      doc.setIn(['provider', 'gcp', 'IAMServiceAccountVM'], 'vm@box-project.iam.gserviceaccount.com');
      setTcb(doc, 'gcpSEVSNP', tcb);
    },
    ...orchestrated(workspace, infra, instances),
    infrastructure: infra,
    running: instances,
    node: async (instance, tee) => ({
      provider: 'gcp',
      variant: 'gcp-sev-snp',
      // The VM's image reports its version (`status` compares it with the config's image): the instance template's.
      imageVersion: metadataOf(fake.compute.list('instances').find((i) => i.name === instance.id)).find(
        (m) => m.key === 'constellation-image',
      )?.value,
      providerOptions: {
        apiEndpoint: '127.0.0.1',
        port: Number(new URL(fake.url).port),
        protocol: 'http',
        metadataEndpoint: `${fake.url}/node/${instance.id}`,
        retry: { attempts: 5, baseDelayMs: 20, maxDelayMs: 100 },
      },
      tee,
      trustedRoots: {},
      env: nodeEnv,
      // GCE's vTPM: the AK template in NV; the shielded identity is the key made from it.
      async provision(tpm) {
        await tpm.nvDefine(GCE_AK_TEMPLATE_INDEX_RSA, RSA_AK_TEMPLATE.length);
        await tpm.nvWrite(GCE_AK_TEMPLATE_INDEX_RSA, RSA_AK_TEMPLATE);
        const ak = await tpm.createAttestationKey(RSA_AK_TEMPLATE);
        await tpm.flushContext(ak.handle);
        fake.setShieldedIdentity(instance.id, {
          ekPub: publicKeyFromTpmPublic(parseTpmPublic(ak.publicArea)).export({
            type: 'spki',
            format: 'pem',
          }) as string,
        });
      },
    }),
    validatorDeps: async () => ({ gcpShieldedIdentity: shieldedIdentityClient(options) }),
    fakeDelayMs: () => fake.requests.length * fake.latencyMs,
    leftovers: () => [...fake.compute.resources.keys()],
    injected: fake.injected,
    close: () => fake.close(),
  };
}

export type AzureBoxCloud = BoxCloud & {
  readonly fake: FakeArm;
  infrastructureFor(image?: string): AzureInfrastructure;
};

/** Azure; `fakeOptions` adds what the fake models beyond the default (VMs Creating until their node reports Ready). */
export async function azureCloud(
  workspace: string,
  octet: number,
  fakeOptions: FakeArmOptions = {},
): Promise<AzureBoxCloud> {
  const fake = await FakeArm.start({
    lroDurationMs: 1,
    privateIpBase: `127.${octet}.0`,
    publicIpBase: `127.${octet + 1}.0`,
    ...fakeOptions,
  });
  fake.seed(`/subscriptions/${AZ_SUBSCRIPTION}/resourceGroups/${AZ_GROUP}`, {
    location: 'westeurope',
    properties: { provisioningState: 'Succeeded' },
  });
  // The config's default location (config generate azure).
  fake.seedGalleryImage(AZ_SUBSCRIPTION, 'westus', AZ_IMAGE);
  const infra = new AzureInfrastructure(parseAzureOptions(fake.providerOptions()));
  const imdsServers: FakeImds[] = [];
  const vms = () =>
    [...fake.resources.values()]
      .filter((r) => /\/virtualMachineScaleSets\/[^/]+\/virtualMachines\/[^/]+$/i.test(r.id))
      .map((r) => {
        const scaleSet = fake.get(r.id.replace(/\/virtualMachines\/.*$/, '')) as { tags: Record<string, string> };
        const props = r.body.properties as { privateIp: string; vmId: string; osProfile: { computerName: string } };
        return {
          resourceId: r.id,
          name: String(r.body.name),
          computerName: props.osProfile.computerName,
          privateIp: props.privateIp,
          vmId: props.vmId,
          tags: scaleSet.tags,
        };
      });
  const running = () =>
    vms().map((v): BoxInstance => ({
      id: v.computerName,
      ip: v.privateIp,
      role: v.tags['constellation-role'] === 'control-plane' ? 'control-plane' : 'worker',
    }));
  return {
    fake,
    // Polling every 100 ms as a CLI would poll a cloud, not the provider tests' 2 ms.
    infrastructureFor: (image?: string) =>
      new AzureInfrastructure(
        parseAzureOptions(fake.providerOptions({ pollIntervalMs: 100, ...(image ? { image } : {}) })),
      ),
    variant: 'azure-sev-snp',
    signingKind: 'vcek',
    configure(doc, tcb) {
      doc.setIn(['image'], AZ_IMAGE);
      doc.setIn(['provider', 'azure', 'subscription'], AZ_SUBSCRIPTION);
      doc.setIn(['provider', 'azure', 'tenant'], FAKE_TENANT);
      doc.setIn(['provider', 'azure', 'resourceGroup'], AZ_GROUP);
      doc.setIn(
        ['provider', 'azure', 'userAssignedIdentity'],
        `/subscriptions/${AZ_SUBSCRIPTION}/resourceGroups/${AZ_GROUP}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/box-nodes`,
      );
      setTcb(doc, 'azureSEVSNP', tcb);
    },
    ...orchestrated(workspace, infra, running),
    infrastructure: infra,
    running,
    async node(instance, tee) {
      const vm = vms().find((v) => v.computerName === instance.id)!;
      // The node authenticates as its VM's managed identity: IMDS hands out a token only when the scale set carries one.
      const scaleSet = fake.get(vm.resourceId.replace(/\/virtualMachines\/.*$/, '')) as {
        identity?: { userAssignedIdentities?: Record<string, unknown> };
      };
      const managedIdentity =
        Object.keys(scaleSet.identity?.userAssignedIdentities ?? {}).length > 0 ? { token: FAKE_ARM_TOKEN } : undefined;
      const imds = await startFakeImds({
        ...vm,
        subscriptionId: AZ_SUBSCRIPTION,
        resourceGroupName: AZ_GROUP,
        managedIdentity,
        thim: { vcekCert: tee.certPem, certificateChain: tee.askPem + tee.arkPem },
      });
      imdsServers.push(imds);
      const { endpoint, tlsOptions, pollIntervalMs } = fake.providerOptions() as {
        endpoint: string;
        tlsOptions: { ca: string };
        pollIntervalMs: number;
      };
      return {
        provider: 'azure',
        variant: 'azure-sev-snp',
        // The VM's wire server is the fake ARM's: the node's Ready report is what ends the VM's provisioning there.
        providerOptions: {
          endpoint,
          tlsOptions,
          pollIntervalMs,
          imdsEndpoint: imds.url,
          wireServerEndpoint: `${fake.wireServerUrl}/node/${vm.computerName}`,
          retryOptions: { maxRetries: 3, retryDelayInMs: 20, maxRetryDelayInMs: 100 },
        },
        trustedRoots: {},
        // The fake IMDS signs the VM's attested document with the test PKI: the node's join service trusts its root.
        imdsRoots: imdsTestRoots(),
        // The VM's image reports its version (`status` compares it with the config's image): the scale set model's when the VM was made.
        imageVersion: (
          fake.get(vm.resourceId) as
            { properties?: { storageProfile?: { imageReference?: { communityGalleryImageId?: string } } } } | undefined
        )?.properties?.storageProfile?.imageReference?.communityGalleryImageId,
        // Azure's paravisor: its AK made persistent, and its HCL report whose SNP report binds the runtime data holding that AK.
        async provision(tpm) {
          const ak = await tpm.createAttestationKey(RSA_AK_TEMPLATE);
          await tpm.evictControl(ak.handle, AZURE_AK_HANDLE);
          await tpm.flushContext(ak.handle);
          const jwk = publicKeyFromTpmPublic(parseTpmPublic(ak.publicArea)).export({ format: 'jwk' }) as {
            n: string;
            e: string;
          };
          const runtimeData = Buffer.from(
            JSON.stringify({
              keys: [{ kid: 'HCLAkPub', key_ops: ['sign'], kty: 'RSA', e: jwk.e, n: jwk.n }],
              'vm-configuration': { 'tpm-enabled': true },
            }),
          );
          const reportData = tee.reportDataHex
            ? Buffer.from(tee.reportDataHex, 'hex')
            : Buffer.concat([createHash('sha256').update(runtimeData).digest(), Buffer.alloc(32)]);
          const key = {
            cert: { der: certificatesDer(tee.certPem)[0], pem: tee.certPem },
            privateKey: createPrivateKey(tee.keyPem),
            chipId: new Uint8Array(Buffer.from(tee.chipIdHex, 'hex')),
            tcb: tee.tcb,
          };
          const hcl = encodeHclReport({ kind: 'snp', teeReport: makeSnpReport({ reportData }, key), runtimeData });
          await tpm.nvDefine(AZURE_HCL_REPORT_INDEX, hcl.length);
          await tpm.nvWrite(AZURE_HCL_REPORT_INDEX, hcl);
        },
      };
    },
    validatorDeps: async () => ({}),
    fakeDelayMs: () =>
      fake.requests.length * fake.latencyMs +
      fake.requests.filter((r) => ['PUT', 'PATCH', 'DELETE'].includes(r.method)).length * fake.lroDurationMs,
    leftovers: () =>
      fake
        .resourceIds()
        .filter(
          (id) => id.toLowerCase() !== `/subscriptions/${AZ_SUBSCRIPTION}/resourcegroups/${AZ_GROUP}`.toLowerCase(),
        ),
    injected: fake.injected,
    async close() {
      for (const imds of imdsServers) await imds.stop();
      await fake.stop();
    },
  };
}

/** The clouds of `npm run e2e:clouds`, in order. */
export const BOX_CLOUDS: { name: string; make: (workspace: string, octet: number) => Promise<BoxCloud> }[] = [
  { name: 'aws', make: awsCloud },
  { name: 'gcp', make: gcpCloud },
  { name: 'azure', make: azureCloud },
];
