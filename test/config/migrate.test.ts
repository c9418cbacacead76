import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { migrateConfigFile, migrateUpstreamConfig } from '../../lib/config/migrate.js';
import { loadConfig } from '../../lib/config/index.js';
import { REPO_ROOT, runCli } from '../support/cli.js';

const UPSTREAM = path.join(REPO_ROOT, 'test/testdata/upstream-config');
/** What `constellation image build` would give: real-looking (non-placeholder) values for PCR 4, 8, 9, 11, 12, 13. */
function imageMeasurements(variant: string) {
  const m = (hex: string, warnOnly = false) => ({ expected: hex.repeat(64 / hex.length), warnOnly });
  return {
    version: 'v1.0.0',
    variant,
    measurements: { 4: m('4a'), 8: m('00'), 9: m('9b'), 11: m('1c'), 12: m('00'), 13: m('00'), 15: m('00', true) },
  };
}

/** Every upstream file, what a user adds that upstream's file cannot hold, and the keys that must be named as dropped. */
const CASES = [
  {
    file: 'configAWSV2.yaml',
    variant: 'aws-nitro-tpm',
    set: [],
    dropped: ['image', 'kubernetesVersion', 'debugCluster', 'provider.aws.measurements'],
  },
  {
    file: 'configAzureV2SingleIDKeyDigest.yaml',
    variant: 'azure-sev-snp',
    set: [],
    dropped: [
      'image',
      'kubernetesVersion',
      'debugCluster',
      'provider.azure.measurements',
      'provider.azure.deployCSIDriver',
    ],
  },
  {
    file: 'configAzureV2MultipleIDKeyDigest.yaml',
    variant: 'azure-sev-snp',
    set: [],
    dropped: [
      'image',
      'kubernetesVersion',
      'debugCluster',
      'provider.azure.measurements',
      'provider.azure.deployCSIDriver',
    ],
  },
  {
    file: 'configGCPV2.yaml',
    variant: 'gcp-sev-es',
    set: ['provider.gcp.IAMServiceAccountVM=constell-vm@project-12345.iam.gserviceaccount.com'],
    dropped: [
      'image',
      'kubernetesVersion',
      'debugCluster',
      'provider.gcp.measurements',
      'provider.gcp.deployCSIDriver',
    ],
  },
  {
    file: 'configAzureV3.yaml',
    variant: 'azure-sev-snp',
    set: [],
    dropped: [
      'image',
      'kubernetesVersion',
      'microserviceVersion',
      'debugCluster',
      'attestation.azureSEVSNP.measurements',
      'attestation.azureSEVSNP.bootloaderVersion',
      'attestation.azureSEVSNP.amdRootKey',
      'provider.azure.deployCSIDriver',
    ],
  },
  {
    file: 'configGCPV4.yaml',
    variant: 'gcp-sev-snp',
    set: [],
    dropped: [
      'image',
      'microserviceVersion',
      'debugCluster',
      'customEndpoint',
      'internalLoadBalancer',
      'provider.gcp.useMarketplaceImage',
      'provider.gcp.deployCSIDriver',
      'attestation.gcpSEVSNP.measurements',
      'attestation.gcpSEVSNP.bootloaderVersion',
      'attestation.gcpSEVSNP.teeVersion',
      'attestation.gcpSEVSNP.snpVersion',
      'attestation.gcpSEVSNP.microcodeVersion',
      'attestation.gcpSEVSNP.amdRootKey',
    ],
  },
  {
    file: 'configQEMUV2.yaml',
    variant: 'qemu-vtpm',
    set: [],
    dropped: [
      'image',
      'kubernetesVersion',
      'debugCluster',
      'provider.qemu.measurements',
      'provider.qemu.imageFormat',
      'provider.qemu.metadataAPIServer',
      'provider.qemu.libvirtSocket',
      'provider.qemu.libvirtContainerImage',
      'provider.qemu.nvram',
    ],
  },
  {
    file: 'configQEMUV4.yaml',
    variant: 'qemu-vtpm',
    set: [],
    dropped: [
      'image',
      'microserviceVersion',
      'debugCluster',
      'customEndpoint',
      'internalLoadBalancer',
      'provider.qemu.imageFormat',
      'provider.qemu.metadataAPIServer',
      'provider.qemu.libvirtSocket',
      'provider.qemu.libvirtContainerImage',
      'attestation.qemuVTPM.measurements',
    ],
  },
];

describe('config migrate: upstream Constellation configs (test/testdata/upstream-config)', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'config-migrate-'));
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  for (const c of CASES) {
    it(`${c.file}: a config that config validate accepts, with ${c.dropped.length} dropped keys named`, async () => {
      const result = await migrateConfigFile({
        input: path.join(UPSTREAM, c.file),
        output: path.join(dir, 'constellation-conf.yaml'),
        image: 'image-of-this-cli',
        measurements: imageMeasurements(c.variant),
        set: c.set,
        replace: async () => false,
      });
      assert.deepEqual(result.problems, []);
      assert.equal(result.variant, c.variant);
      assert.deepEqual(result.dropped.map((d) => d.path).sort(), [...c.dropped].sort());
      for (const d of result.dropped) assert.ok(d.reason.length > 20, `${d.path} has a reason`);
      const config = await loadConfig(dir); // what `config validate` runs
      assert.equal(config.image, 'image-of-this-cli');
    });
  }

  it('carries what means the same: identities, location, node groups, tags, firmware signer', async () => {
    const gcp = migrateUpstreamConfig(await fs.readFile(path.join(UPSTREAM, 'configGCPV4.yaml'), 'utf8'));
    assert.equal(gcp.config.name, 'prod');
    assert.equal(gcp.config.kubernetesVersion, 'v1.31.14'); // v1.31.1: same minor, our patch release
    assert.deepEqual(gcp.config.tags, { team: 'infra' });
    assert.deepEqual(gcp.config.provider.gcp, {
      project: 'project-12345',
      region: 'europe-west3',
      zone: 'europe-west3-b',
      serviceAccountKeyPath: 'serviceAccountKey.json',
      IAMServiceAccountVM: 'constell-vm@project-12345.iam.gserviceaccount.com',
      deployCSIDriver: false,
    });
    assert.ok(
      gcp.dropped.some((d) => d.path === 'provider.gcp.deployCSIDriver' && /no CSI driver/.test(d.reason)),
      'deployCSIDriver: true is named as not carried',
    );
    assert.equal(gcp.config.nodeGroups.worker_default.initialCount, 2);
    assert.equal(gcp.config.nodeGroups.control_plane_default.zone, 'europe-west3-b');

    const azure = migrateUpstreamConfig(
      await fs.readFile(path.join(UPSTREAM, 'configAzureV2MultipleIDKeyDigest.yaml'), 'utf8'),
    );
    assert.deepEqual((azure.config.attestation.azureSEVSNP as Record<string, unknown>).firmwareSignerConfig, {
      acceptedKeyDigests: [
        '57486a447ec0f1958002a22a06b7673b9fd27d11e1c6527498056054c5fa92d23c50f9de44072760fe2b6fb89740b696',
        '0356215882a825279a85b300b0b742931d113bf7e32dde2e50ffde7ec743ca491ecdd7f336dc28a6e0b2bb57af7a44a3',
      ],
      enforcementPolicy: 'WarnOnly',
    });
    assert.equal(azure.config.nodeGroups.worker_default.stateDiskSizeGB, 16);
    assert.equal(azure.config.provider.azure?.location, 'West Europe');

    const v3 = migrateUpstreamConfig(await fs.readFile(path.join(UPSTREAM, 'configAzureV3.yaml'), 'utf8'));
    const snp = v3.config.attestation.azureSEVSNP as Record<string, unknown>;
    assert.deepEqual(snp.firmwareSignerConfig, {
      acceptedKeyDigests: [
        '0356215882a825279a85b300b0b742931d113bf7e32dde2e50ffde7ec743ca491ecdd7f336dc28a6e0b2bb57af7a44a3',
      ],
      enforcementPolicy: 'MAAFallback',
      maaURL: 'https://sharedeus.eus.attest.azure.net',
    });
    assert.equal(snp.microcodeVersion, 115);
  });

  it("maps upstream's qemu section to provider.qemu: vcpus, memory, firmware and an nvram path; names the rest", async () => {
    const v4 = migrateUpstreamConfig(await fs.readFile(path.join(UPSTREAM, 'configQEMUV4.yaml'), 'utf8'));
    assert.equal(v4.provider, 'qemu');
    assert.deepEqual(v4.config.provider.qemu, {
      vcpus: 4,
      memoryMiB: 4096,
      firmware: '/usr/share/OVMF/OVMF_CODE_4M.fd',
      firmwareVars: '/usr/share/OVMF/OVMF_VARS_4M.fd',
      accel: 'auto',
    });
    assert.equal(v4.config.name, 'mini');
    assert.equal(v4.config.nodeGroups.control_plane_default.stateDiskSizeGB, 8);
    assert.equal(v4.config.nodeGroups.control_plane_default.initialCount, 1);
    assert.equal(v4.config.nodeGroups.worker_default.instanceType, 'qemu'); // upstream's empty instance type: ours
    assert.match(
      v4.dropped.find((d) => d.path === 'provider.qemu.libvirtSocket')?.reason ?? '',
      /QEMU directly, not through libvirt/,
    );
    assert.ok(v4.notes.some((n) => /provider\.qemu\.accel: .*set to auto/.test(n)));

    const v2 = migrateUpstreamConfig(await fs.readFile(path.join(UPSTREAM, 'configQEMUV2.yaml'), 'utf8'));
    assert.equal(v2.variant, 'qemu-vtpm');
    assert.deepEqual(v2.config.provider.qemu, {
      vcpus: 2,
      memoryMiB: 2048,
      firmware: '/usr/share/OVMF/OVMF_CODE.fd',
      firmwareVars: '/usr/share/OVMF/OVMF_VARS.fd',
      accel: 'auto',
    });
    assert.match(
      v2.dropped.find((d) => d.path === 'provider.qemu.nvram')?.reason ?? '',
      /"production" names one of upstream's own UEFI variable stores/,
    );
    assert.ok(v2.notes.some((n) => /provider\.qemu\.firmware: empty \(upstream's auto selection\)/.test(n)));
    assert.equal(v2.config.nodeGroups.worker_default.stateDiskSizeGB, 10);

    const bad = migrateUpstreamConfig(
      'version: v4\nprovider:\n  qemu:\n    vcpus: 0\n    memory: 128\n    nvram: testing\n    firmware: OVMF.fd\nnodeGroups:\n  worker_default:\n    role: worker\n    zone: rack-1\n    instanceType: big\nattestation:\n  qemuVTPM:\n    measurements: {}\n',
    );
    assert.deepEqual(bad.dropped.map((d) => d.path).sort(), [
      'attestation.qemuVTPM.measurements',
      'nodeGroups.worker_default.instanceType',
      'nodeGroups.worker_default.zone',
      'provider.qemu.firmware',
      'provider.qemu.memory',
      'provider.qemu.nvram',
      'provider.qemu.vcpus',
    ]);
    assert.deepEqual(bad.config.provider.qemu, {
      vcpus: 2,
      memoryMiB: 2048,
      firmware: '/usr/share/OVMF/OVMF_CODE.fd',
      firmwareVars: '/usr/share/OVMF/OVMF_VARS.fd',
      accel: 'auto',
    });
  });

  it('without --image and --measurements, says what config validate will still refuse', async () => {
    const result = await migrateConfigFile({
      input: path.join(UPSTREAM, 'configAWSV2.yaml'),
      output: path.join(dir, 'out.yaml'),
      replace: async () => false,
    });
    assert.deepEqual(
      result.problems.map((p) => p.path),
      [
        'image',
        'attestation.awsNitroTPM.measurements.4.expected',
        'attestation.awsNitroTPM.measurements.9.expected',
        'attestation.awsNitroTPM.measurements.11.expected',
      ],
    );
  });

  it('refuses what is not an upstream config, naming the version it found', () => {
    assert.throws(
      () => migrateUpstreamConfig('version: v1\n'),
      /version is "v1"; config migrate reads upstream Constellation's v2, v3 and v4/,
    );
    assert.throws(
      () => migrateUpstreamConfig('version: v4\nprovider:\n  openstack: {}\n'),
      /provider openstack has no counterpart here/,
    );
  });

  it('never overwrites without asking: refuses an existing output; with -y keeps the upstream file beside it', async function () {
    this.timeout(30_000);
    const file = path.join(dir, 'constellation-conf.yaml');
    const upstream = await fs.readFile(path.join(UPSTREAM, 'configGCPV2.yaml'), 'utf8');
    await fs.writeFile(file, upstream);
    const refused = await runCli(['config', 'migrate', '-C', dir]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /There is no terminal to ask on[\s\S]*Pass -y/);
    assert.equal(await fs.readFile(file, 'utf8'), upstream);

    const done = await runCli(['config', 'migrate', '-C', dir, '-y']);
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, /Not carried \(5\):\n {2}image: [^\n]+\n {2}kubernetesVersion: /);
    assert.equal(await fs.readFile(`${file}.upstream-v2`, 'utf8'), upstream);
    assert.match(await fs.readFile(file, 'utf8'), /^version: v4$/m);
  });
});
