/**
 * `constellation attestation verify` for the cloud variants, on real cloud evidence (test/testdata/attestation/, see its
 * README) and on a swtpm-made aws-nitro-tpm document, as a user runs it: the built CLI in a child process, a workspace
 * from `config generate`.
 *   - Azure: the SEV-SNP report of an Azure CVM with the paravisor's runtime data and the VCEK. It comes without a
 *     vTPM quote, so `--evidence-only` checks what vouches for the AK: AMD's chain, the TCB minimums of the
 *     config, REPORT_DATA binding the runtime data, the runtime data holding this AK.
 *   - GCE: a shielded VM's quote made by Google's tooling without a nonce (`--qualifying-data ""`). The AK is
 *     trusted through the instance's shielded identity, which the CLI asks Compute for with the GCP provider's client
 *     and default credentials: here the fake GCP (endpoint override as gcloud honours it, ADC from its metadata
 *     server), which answers with the AK certificate Google issued (in the evidence). The instance (project
 *     google.com:wuale-gcp-testing, zone us-central1-a, name cos-test) is the one that certificate names in Google's
 *     instance extension (1.3.6.1.4.1.11129.2.1.21).
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { VtpmIssuer } from '../../lib/attestation/vtpm-issuer.js';
import { TpmClient } from '../../lib/tpm/client.js';
import { startSwtpm, type SwtpmHandle } from '../../lib/tpm/swtpm.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';
import { hasSwtpm } from '../atls/support/kits.js';
import { FAKE_CREDENTIALS, FAKE_IMAGE, startFakeAws, type FakeAws } from '../fakes/aws/server.js';
import { akFromModulus } from '../attestation/variants/cloud-helpers.js';
import { FakeGcp } from '../fakes/gcp/server.js';
import { runCli } from '../support/cli.js';
import { TESTDATA } from '../support/testdata.js';
import { extendBootPcrs, fillImageMeasurements } from '../support/image-measurements.js';
import { requireTool } from '../support/require-tool.js';

const AZURE = path.join(TESTDATA, 'attestation/azure-sev-snp');
const GCE = path.join(TESTDATA, 'attestation/gce-vtpm/gce-cos-85-no-nonce.json');
const GCE_INSTANCE = { projectId: 'google.com:wuale-gcp-testing', zone: 'us-central1-a', instanceName: 'cos-test' };
const b64 = (b: Uint8Array | string) => Buffer.from(b).toString('base64');
const der2pem = (der: Buffer) =>
  `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE-----\n`;

async function workspace(
  provider: string,
  variant: string,
  edit: (doc: ReturnType<typeof parseDocument>) => void,
): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), `verify-${provider}-`));
  const gen = await runCli(['config', 'generate', provider, '--attestation', variant, '-C', dir], { cwd: dir });
  assert.equal(gen.code, 0, gen.stderr);
  const file = path.join(dir, CONFIG_FILE);
  const doc = parseDocument(await fs.readFile(file, 'utf8'));
  // The fields only an account knows: attestation verify loads the whole config, but looks at its attestation only.
  doc.setIn(['image'], 'test-image');
  const section = doc.getIn(['provider', provider]) as {
    items: { key: { value: string }; value: { value: unknown } }[];
  };
  for (const item of section.items)
    if (item.value?.value === '')
      doc.setIn(
        ['provider', provider, item.key.value],
        item.key.value === 'serviceAccountKeyPath' ? 'sa-key.json' : `test-${item.key.value}`,
      );
  await fs.writeFile(file, doc.toString());
  // The generated placeholders are refused (all-zero enforced PCRs): filled as a user fills them; a case that checks
  // a quote then sets the PCRs of its evidence.
  await fillImageMeasurements(dir);
  const filled = parseDocument(await fs.readFile(file, 'utf8'));
  edit(filled);
  await fs.writeFile(file, filled.toString());
  return dir;
}

describe('constellation attestation verify (cloud variants)', function () {
  this.timeout(60_000);
  const dirs: string[] = [];
  after(async () => {
    for (const dir of dirs) await fs.rm(dir, { recursive: true, force: true });
  });

  describe('Azure SEV-SNP (--evidence-only)', () => {
    const runtimeData = readFileSync(path.join(AZURE, 'runtimedata.bin'));
    const hclKey = (JSON.parse(runtimeData.toString()) as { keys: { n: string }[] }).keys[0];
    const instanceInfo = {
      attestationReport: b64(readFileSync(path.join(AZURE, 'attestation.bin'))),
      runtimeData: b64(runtimeData),
      vcek: readFileSync(path.join(AZURE, 'vcek.pem'), 'utf8'),
      certChain: readFileSync(path.join(AZURE, 'certchain.pem'), 'utf8'),
    };
    const document = (akPublic: Uint8Array) => ({
      variant: 'azure-sev-snp',
      attestation: { akPublic: b64(akPublic), quotes: [] },
      instanceInfo: b64(JSON.stringify(instanceInfo)),
      userData: '',
    });
    let dir: string;
    before(async () => {
      dir = await workspace('azure', 'azure-sev-snp', () => undefined);
      dirs.push(dir);
      await fs.writeFile(
        path.join(dir, 'azure.json'),
        JSON.stringify(document(akFromModulus(Buffer.from(hclKey.n, 'base64url')))),
      );
      const other = Buffer.from(hclKey.n, 'base64url');
      other[10] ^= 1;
      await fs.writeFile(path.join(dir, 'azure-other-ak.json'), JSON.stringify(document(akFromModulus(other))));
    });

    it('accepts the report: AMD chain, TCB, runtime data binding the AK', async () => {
      const res = await runCli(['attestation', 'verify', 'azure.json', '--evidence-only', '-C', dir], { cwd: dir });
      assert.equal(res.code, 0, res.stderr + res.stdout);
      assert.match(res.stdout, /^Verdict: ACCEPTED \(variant azure-sev-snp, evidence only\)/);
      assert.match(res.stdout, /no TPM quote/);
    });

    it('rejects the same report for another AK (exit 3)', async () => {
      const res = await runCli(
        ['attestation', 'verify', 'azure-other-ak.json', '--evidence-only', '--json', '-C', dir],
        { cwd: dir },
      );
      assert.equal(res.code, 3, res.stderr + res.stdout);
      assert.match((JSON.parse(res.stdout) as { error: string }).error, /not the one in the paravisor runtime data/);
    });

    it('rejects it under a config whose TCB minimum the report misses', async () => {
      const strict = await workspace('azure', 'azure-sev-snp', (doc) =>
        doc.setIn(['attestation', 'azureSEVSNP', 'snpVersion'], 7),
      );
      dirs.push(strict);
      const res = await runCli([
        'attestation',
        'verify',
        path.join(dir, 'azure.json'),
        '--evidence-only',
        '-C',
        strict,
      ]);
      assert.equal(res.code, 3, res.stderr + res.stdout);
      assert.match(res.stdout, /snp 6 < 7/);
    });
  });

  describe('AWS NitroTPM (a swtpm-made document; the image looked up in EC2 through the default credential chain)', () => {
    let fake: FakeAws;
    let swtpm: SwtpmHandle | undefined;
    let dir: string;
    const nonce = randomBytes(32);
    const env = () => ({
      AWS_ENDPOINT_URL: fake.url,
      AWS_ACCESS_KEY_ID: FAKE_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: FAKE_CREDENTIALS.secretAccessKey,
      AWS_REGION: 'us-east-2',
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_SHARED_CREDENTIALS_FILE: '/nonexistent',
      AWS_CONFIG_FILE: '/nonexistent',
    });
    before(async function () {
      requireTool(this, hasSwtpm(), 'swtpm');
      fake = await startFakeAws();
      dir = await workspace('aws', 'aws-nitro-tpm', () => undefined);
      dirs.push(dir);
      swtpm = await startSwtpm({ stateDir: path.join(dir, 'tpm') });
      const tpm = await TpmClient.connect(swtpm.serverSocket);
      try {
        await extendBootPcrs(tpm); // the boot of the image whose measurements the config holds
        for (const imageId of [FAKE_IMAGE, 'ami-0000000000unknown']) {
          const instanceInfo = new TextEncoder().encode(
            JSON.stringify({ region: 'us-east-2', imageId, instanceId: 'i-0123456789abcdef0' }),
          );
          const document = await new VtpmIssuer({ variant: 'aws-nitro-tpm', tpm, instanceInfo }).issue(
            new Uint8Array(32),
            nonce,
          );
          await fs.writeFile(path.join(dir, `${imageId}.json`), JSON.stringify(document));
        }
      } finally {
        tpm.close();
      }
    });
    after(async () => {
      await swtpm?.stop();
      await fake?.close();
    });

    it('accepts the document of an instance whose image EC2 registered with NitroTPM', async () => {
      const res = await runCli(
        ['attestation', 'verify', `${FAKE_IMAGE}.json`, '--nonce', nonce.toString('hex'), '-C', dir],
        { cwd: dir, env: env() },
      );
      assert.equal(res.code, 0, res.stderr + res.stdout);
      assert.match(res.stdout, /^Verdict: ACCEPTED \(variant aws-nitro-tpm\)/);
      assert.ok(fake.calls('DescribeImages').length >= 1);
    });

    it('rejects the document of an instance whose image EC2 does not know', async () => {
      const res = await runCli(
        ['attestation', 'verify', 'ami-0000000000unknown.json', '--nonce', nonce.toString('hex'), '-C', dir],
        { cwd: dir, env: env() },
      );
      assert.equal(res.code, 3, res.stderr + res.stdout);
      assert.match(res.stdout, /image ami-0000000000unknown does not exist in us-east-2/);
    });
  });

  describe('GCE shielded VM quote (--qualifying-data "")', () => {
    const gce = JSON.parse(readFileSync(GCE, 'utf8')) as {
      akPubHex: string;
      akCertDerHex: string;
      eventLogHex: string;
      quotes: { hashAlg: number; quoteHex: string; rawSigHex: string; pcrs: Record<string, string> }[];
    };
    const sha256 = gce.quotes.find((q) => q.hashAlg === 11)!;
    let fake: FakeGcp;
    let dir: string;
    before(async () => {
      fake = await FakeGcp.start();
      // The instance the evidence came from, with the shielded identity Google reported for it.
      const key = `projects/${GCE_INSTANCE.projectId}/zones/${GCE_INSTANCE.zone}/instances/${GCE_INSTANCE.instanceName}`;
      fake.compute.resources.set(key, {
        key,
        collection: 'instances',
        resource: { kind: 'compute#instance', name: GCE_INSTANCE.instanceName },
        refs: new Set(),
      } as never);
      fake.setShieldedIdentity(GCE_INSTANCE.instanceName, { ekCert: der2pem(Buffer.from(gce.akCertDerHex, 'hex')) });
      dir = await workspace('gcp', 'gcp-sev-es', (doc) => {
        for (const i of ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']) {
          doc.setIn(
            ['attestation', 'gcpSEVES', 'measurements', Number(i)],
            doc.createNode({ expected: sha256.pcrs[i], warnOnly: false }),
          );
        }
        // The evidence's image is no UKI: its PCR 11 is zero, which only a warn-only entry may expect.
        doc.setIn(
          ['attestation', 'gcpSEVES', 'measurements', 11],
          doc.createNode({ expected: sha256.pcrs['11'], warnOnly: true }),
        );
      });
      dirs.push(dir);
      const document = {
        variant: 'gcp-sev-es',
        attestation: {
          akPublic: b64(Buffer.from(gce.akPubHex, 'hex')),
          quotes: [
            {
              hashAlg: 11,
              quote: b64(Buffer.from(sha256.quoteHex, 'hex')),
              signature: b64(Buffer.from(sha256.rawSigHex, 'hex')),
              pcrs: sha256.pcrs,
            },
          ],
          eventLog: b64(Buffer.from(gce.eventLogHex, 'hex')),
        },
        instanceInfo: b64(JSON.stringify(GCE_INSTANCE)),
        userData: '',
      };
      await fs.writeFile(path.join(dir, 'gce.json'), JSON.stringify(document));
    });
    after(async () => fake?.close());

    it("accepts the quote: the AK is the instance's shielded identity, the signature and PCRs match", async () => {
      const res = await runCli(['attestation', 'verify', 'gce.json', '--qualifying-data', '', '--json', '-C', dir], {
        cwd: dir,
        env: fake.cliEnv(),
      });
      assert.equal(res.code, 0, res.stderr + res.stdout);
      const report = JSON.parse(res.stdout) as {
        verdict: string;
        pcrsVerified: boolean;
        pcrs: { index: number; match: boolean }[];
      };
      assert.equal(report.verdict, 'accepted');
      assert.equal(report.pcrsVerified, true);
      assert.ok(report.pcrs.some((p) => p.index === 4 && p.match));
      assert.ok(
        fake.requests.some((r) => r.path.endsWith('/instances/cos-test/getShieldedInstanceIdentity')),
        'asked Compute',
      );
    });

    it('rejects it when the verifier expects a nonce binding (the quote carries none)', async () => {
      const res = await runCli(['attestation', 'verify', 'gce.json', '-C', dir], { cwd: dir, env: fake.cliEnv() });
      assert.equal(res.code, 3, res.stderr + res.stdout);
      assert.match(res.stdout, /qualifying data/i);
    });

    it('rejects it when GCP vouches for another key for the instance', async () => {
      const other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({
        type: 'spki',
        format: 'pem',
      }) as string;
      fake.setShieldedIdentity(GCE_INSTANCE.instanceName, { ekPub: other });
      const res = await runCli(['attestation', 'verify', 'gce.json', '--qualifying-data', '', '-C', dir], {
        cwd: dir,
        env: fake.cliEnv(),
      });
      assert.equal(res.code, 3, res.stderr + res.stdout);
      assert.match(res.stdout, /not the one GCP registered for instance cos-test/);
    });
  });
});
