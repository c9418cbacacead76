/**
 * The cloud node platforms (providers/<cloud>/node-platform.ts) end to end on one node: the provider's metadata
 * service (the cloud's fake) names the node, a real swtpm plays the vTPM (with what the cloud provisions in it: GCE's
 * AK template in NV, Azure's paravisor AK and HCL report), the kernel's TEE interface is emulated with reports
 * signed by a test AMD chain, and the variant's validator — with the collaborators the platform's join service or
 * the CLI use — must accept the document the platform's issuer makes, and refuse evidence that does not bind the AK
 * or is signed outside the trusted chain.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'mocha';
import {
  AZURE_AK_HANDLE,
  AZURE_HCL_REPORT_INDEX,
  encodeHclReport,
  GCE_AK_TEMPLATE_INDEX_RSA,
} from '../../lib/attestation/cloud-evidence.js';
import { kdsVcekUrl, KDS_BASE_URL } from '../../lib/attestation/snp/kds.js';
import { kdsFetcher } from '../../lib/attestation/snp/kds-fetcher.js';
import { createValidator } from '../../lib/attestation/registry.js';
import { AttestationError, type Issuer, type ValidatorDeps } from '../../lib/attestation/types.js';
import { TpmClient } from '../../lib/tpm/client.js';
import { startSwtpm, type SwtpmHandle } from '../../lib/tpm/swtpm.js';
import { encodeTpmPublic, parseTpmPublic, publicKeyFromTpmPublic } from '../../lib/tpm/structures.js';
import awsProvider from '../../providers/aws/index.js';
import { AwsInfrastructure } from '../../providers/aws/infrastructure.js';
import { awsNodePlatform } from '../../providers/aws/node-platform.js';
import { azureNodePlatform } from '../../providers/azure/node-platform.js';
import { GcpInfrastructure } from '../../providers/gcp/infrastructure.js';
import { gcpNodePlatform } from '../../providers/gcp/node-platform.js';
import {
  makeEndorsementKey,
  makeSnpReport,
  makeSnpTestCa,
  type EndorsementKey,
  type SnpTestCa,
} from '../attestation/snp/fixtures.js';
import { emulatedTsm, snpGuest } from '../attestation/support/emulated-tee.js';
import { startFakeKds, type FakeKds } from '../fakes/amd/kds-server.js';
import { startFakeAws, type FakeAws } from '../fakes/aws/server.js';
import { RSA_AK_TEMPLATE } from '../tpm/support.js';
import { startFakeImds, type FakeImds } from '../fakes/azure/imds-server.js';
import { imdsTestRoots } from '../fakes/azure/imds-pki.js';
import { FakeGcp } from '../fakes/gcp/server.js';
import { context as awsContext, createRequest as awsRequest, fakeOptions as awsOptions } from './aws/support.js';
import { createRequest as gcpRequest, PROJECT, providerContext as gcpContext, ZONE } from './gcp/support.js';
import { imageMeasurements } from '../support/measurements.js';

const now = () => new Date('2026-06-01T00:00:00Z');
// Every image PCR (validators refuse less): these nodes' TPMs are fresh, nothing extended.
const measurements = imageMeasurements('00', { '15': { expected: '00'.repeat(32), warnOnly: true } });

async function issue(issuer: Issuer) {
  const nonce = randomBytes(32);
  return { document: await issuer.issue(randomBytes(32), nonce), nonce };
}

async function rejects(p: Promise<unknown>, re: RegExp) {
  await assert.rejects(p, (err: Error) => err instanceof AttestationError && re.test(err.message));
}

describe('cloud node platforms (fake clouds, swtpm, emulated TEE)', function () {
  this.timeout(60_000);
  let dir: string;
  let swtpm: SwtpmHandle;
  let tpm: TpmClient;
  let ca: SnpTestCa;
  let vcek: EndorsementKey;
  let vlek: EndorsementKey;

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'node-platforms-'));
    swtpm = await startSwtpm({ stateDir: path.join(dir, 'tpm') });
    tpm = await TpmClient.connect(swtpm.serverSocket);
    ca = makeSnpTestCa('Milan');
    vcek = makeEndorsementKey(ca);
    vlek = makeEndorsementKey(ca, { kind: 'vlek' });
  });
  after(async () => {
    tpm?.close();
    await swtpm?.stop();
    await fs.rm(dir, { recursive: true, force: true });
  });

  describe('aws', () => {
    let fake: FakeAws;
    before(async () => {
      fake = await startFakeAws({ lroMs: 5 });
      await new AwsInfrastructure(awsOptions(fake)).create(awsRequest(), awsContext());
      await new Promise((r) => setTimeout(r, 10));
      fake.imds.instanceId = [...fake.state.instances.values()].find(
        (i) => i.tags['constellation-role'] === 'control-plane',
      )!.id;
    });
    after(async () => fake?.close());

    it('aws-sev-snp: names the node from IMDS/EC2 and binds the AK into a VLEK-signed report the validator accepts', async () => {
      const tsm = emulatedTsm(snpGuest(ca, vlek, 'vlek'));
      const platform = await awsNodePlatform({
        variant: 'aws-sev-snp',
        paths: { tpm: swtpm.serverSocket },
        providerOptions: awsOptions(fake),
        tee: { tsm },
      });
      const me = fake.state.instances.get(fake.imds.instanceId!)!;
      assert.deepEqual(await platform.identity(), {
        name: `ip-${me.privateIp.replace(/\./g, '-')}.us-east-2.compute.internal`,
        ip: me.privateIp,
        role: 'control-plane',
      });
      assert.deepEqual(platform.stateDisk, { kind: 'luks', device: '/dev/sdb', mountPoint: '/var/run/state' });
      assert.equal(platform.kubernetesBackend, 'kubeadm');
      const issuer = await platform.issuer(tpm);
      const validator = await createValidator(
        'aws-sev-snp',
        { measurements },
        { now, amdRoots: ca.roots, ...(await platform.validatorDeps()) },
      );
      for (let i = 0; i < 2; i++) {
        const { document, nonce } = await issue(issuer);
        await validator.validate(document, nonce);
      }
      assert.equal(tsm.requests.length, 1, 'one report per AK: it binds the key, not the nonce');
    });

    it('aws-sev-snp: refuses a report that does not bind the AK, and one signed outside the trusted chain', async () => {
      const unbound = emulatedTsm(snpGuest(ca, vlek, 'vlek', { reportData: randomBytes(64) }));
      const other = makeSnpTestCa('Milan');
      const outside = emulatedTsm(
        snpGuest(other, makeEndorsementKey(other, { kind: 'vlek', issuerKey: other.asvkKey }), 'vlek'),
      );
      const validator = await createValidator('aws-sev-snp', { measurements }, { now, amdRoots: ca.roots });
      for (const [tsm, re] of [
        [unbound, /REPORT_DATA does not bind/],
        [outside, /not the trusted ARK|does not chain|not AMD's ARK|signature/i],
      ] as const) {
        const platform = await awsNodePlatform({
          variant: 'aws-sev-snp',
          paths: { tpm: swtpm.serverSocket },
          providerOptions: awsOptions(fake),
          tee: { tsm },
        });
        const { document, nonce } = await issue(await platform.issuer(tpm));
        await rejects(validator.validate(document, nonce), re);
      }
    });

    it('aws-nitro-tpm: sends the identity document; the validator looks its image up in EC2 through the provider', async () => {
      const platform = await awsNodePlatform({
        variant: 'aws-nitro-tpm',
        paths: { tpm: swtpm.serverSocket },
        providerOptions: awsOptions(fake),
      });
      const { document, nonce } = await issue(await platform.issuer(tpm));
      const info = JSON.parse(Buffer.from(document.instanceInfo, 'base64').toString()) as {
        imageId: string;
        region: string;
      };
      assert.equal(info.region, 'us-east-2');
      const deps = await awsProvider.attestationDeps!(awsOptions(fake));
      await (await createValidator('aws-nitro-tpm', { measurements }, deps)).validate(document, nonce);
      fake.state.images.set(info.imageId, { ...fake.state.images.get(info.imageId)!, tpmSupport: undefined });
      try {
        await rejects(
          (await createValidator('aws-nitro-tpm', { measurements }, await platform.validatorDeps())).validate(
            document,
            nonce,
          ),
          /not registered with NitroTPM support/,
        );
      } finally {
        fake.state.images.set(info.imageId, { ...fake.state.images.get(info.imageId)!, tpmSupport: 'v2.0' });
      }
      fake.state.images.delete(info.imageId);
      await rejects(
        (await createValidator('aws-nitro-tpm', { measurements }, deps)).validate(document, nonce),
        /does not exist/,
      );
    });
  });

  describe('gcp', () => {
    let fake: FakeGcp;
    let name: string;
    before(async () => {
      fake = await FakeGcp.start();
      const infra = new GcpInfrastructure(fake.providerOptions());
      const ctx = gcpContext();
      await infra.create(gcpRequest(), ctx);
      name = (await infra.listInstances(ctx)).find((i) => i.role === 'worker')!.name;
      fake.setMetadataInstance({ project: PROJECT, zone: ZONE, name });
      // GCE's vTPM: the AK template in NV; the shielded identity returns the key made from it.
      await tpm.nvDefine(GCE_AK_TEMPLATE_INDEX_RSA, RSA_AK_TEMPLATE.length);
      await tpm.nvWrite(GCE_AK_TEMPLATE_INDEX_RSA, RSA_AK_TEMPLATE);
      const ak = await tpm.createAttestationKey(RSA_AK_TEMPLATE);
      await tpm.flushContext(ak.handle);
      fake.setShieldedIdentity(name, {
        ekPub: publicKeyFromTpmPublic(parseTpmPublic(ak.publicArea)).export({ type: 'spki', format: 'pem' }) as string,
      });
    });
    after(async () => {
      await tpm.nvUndefine(GCE_AK_TEMPLATE_INDEX_RSA).catch(() => undefined);
      await fake?.close();
    });

    it('gcp-sev-snp: uses the AK GCE vouches for, names the instance and binds the AK into the SNP report', async () => {
      const tsm = emulatedTsm(snpGuest(ca, vcek));
      const platform = await gcpNodePlatform({
        variant: 'gcp-sev-snp',
        paths: { tpm: swtpm.serverSocket },
        providerOptions: fake.providerOptions(),
        tee: { tsm },
      });
      assert.equal((await platform.identity()).name, name);
      const { document, nonce } = await issue(await platform.issuer(tpm));
      const info = JSON.parse(Buffer.from(document.instanceInfo, 'base64').toString()) as Record<string, string>;
      assert.deepEqual([info.projectId, info.zone, info.instanceName], [PROJECT, ZONE, name]);
      const deps: ValidatorDeps = { now, amdRoots: ca.roots, ...(await platform.validatorDeps()) };
      await (await createValidator('gcp-sev-snp', { measurements }, deps)).validate(document, nonce);
      fake.setShieldedIdentity(name, {
        ekPub: publicKeyFromTpmPublic(parseTpmPublic(encodeTpmPublicOfNewKey())).export({
          type: 'spki',
          format: 'pem',
        }) as string,
      });
      await rejects(
        (await createValidator('gcp-sev-snp', { measurements }, deps)).validate(document, nonce),
        /not the one GCP registered/,
      );
    });
  });

  describe('azure', () => {
    let imds: FakeImds;
    let kds: FakeKds;
    before(async () => {
      imds = await startFakeImds({
        name: 'cp_0',
        computerName: 'constell-a1b2c3d4-cp000000',
        resourceId:
          '/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/constell-a1b2c3d4-cp/virtualMachines/0',
        subscriptionId: 'sub',
        resourceGroupName: 'rg',
        tags: { 'constellation-role': 'control-plane', 'constellation-uid': 'a1b2c3d4' },
        privateIp: '10.0.0.4',
      });
      kds = await startFakeKds();
      kds.addVcek(kdsVcekUrl('Milan', vcek.chipId, vcek.tcb).slice(KDS_BASE_URL.length), vcek.cert.der);
      // The paravisor: its AK made persistent, its HCL report (SNP report binding the runtime data with that AK) in NV.
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
      const reportData = Buffer.concat([createHash('sha256').update(runtimeData).digest(), Buffer.alloc(32)]);
      const hcl = encodeHclReport({ kind: 'snp', teeReport: makeSnpReport({ reportData }, vcek), runtimeData });
      await tpm.nvDefine(AZURE_HCL_REPORT_INDEX, hcl.length);
      await tpm.nvWrite(AZURE_HCL_REPORT_INDEX, hcl);
    });
    after(async () => {
      await imds?.stop();
      await kds?.close();
    });

    it('azure-sev-snp: quotes with the paravisor AK and sends the HCL report; the verifier fetches the VCEK from the KDS', async () => {
      const platform = await azureNodePlatform({
        variant: 'azure-sev-snp',
        paths: { tpm: swtpm.serverSocket, nodeDir: dir },
        providerOptions: { imdsEndpoint: imds.url, wireServerEndpoint: imds.url },
      });
      assert.deepEqual(await platform.identity(), {
        name: 'constell-a1b2c3d4-cp000000',
        ip: '10.0.0.4',
        role: 'control-plane',
      });
      // No guest agent runs: the node program told Azure's wire server that the VM is Ready.
      assert.equal(imds.readyReports, 1);
      const { document, nonce } = await issue(await platform.issuer(tpm));
      const fetch = kdsFetcher({ baseUrl: kds.url, cacheDir: path.join(dir, 'kds') });
      await (
        await createValidator('azure-sev-snp', { measurements }, { now, amdRoots: ca.roots, fetch })
      ).validate(document, nonce);
      assert.equal(kds.requests.length, 1);
      // Its IMDS attested document (the fake's, signed by the test PKI, asked for with this AK's nonce) vouches for
      // its vmId, so a join service names the VM; with Microsoft's roots it does not.
      const naming = (roots?: string[]) =>
        createValidator(
          'azure-sev-snp',
          { measurements },
          {
            now,
            amdRoots: ca.roots,
            fetch,
            ...(roots ? { azureImdsRoots: roots } : {}),
            azureInstanceIdentity: async (vm: { vmId: string }) => ({ name: vm.vmId }),
          },
        );
      const named = await (await naming(imdsTestRoots())).validate(document, nonce);
      assert.equal(named.instance?.name, '00000000-0000-4000-8000-0000000000a1');
      await rejects((await naming()).validate(document, nonce), /does not chain to a trusted root/);
      // The same evidence with the test chain untrusted (AMD's real roots): refused.
      await rejects(
        (await createValidator('azure-sev-snp', { measurements }, { now, fetch })).validate(document, nonce),
        /not signed by the ASK/,
      );
    });
  });
});

/** A fresh RSA public area (not the node's AK). */
function encodeTpmPublicOfNewKey(): Uint8Array {
  const n = randomBytes(256);
  n[0] |= 0x80;
  return encodeTpmPublic({ ...parseTpmPublic(RSA_AK_TEMPLATE), unique: { n } } as ReturnType<typeof parseTpmPublic>);
}
