/**
 * The one variant table (lib/attestation/variant-table.ts): its rows are consistent, every provider lists the
 * rows it owns, and a row added to the table (and nowhere else) reaches every part that knows variants.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { instanceFamily, PROVIDERS, VARIANTS, variantsOf } from '../../lib/attestation/variant.js';
import { loadProvider } from '../../providers/registry.js';
import { REPO_ROOT } from '../support/cli.js';

const SUPPORT = path.join(REPO_ROOT, 'test/attestation/support');

describe('attestation variant table', function () {
  it('names each variant and config key once, and gives each provider exactly one default', function () {
    assert.equal(new Set(VARIANTS.map((v) => v.name)).size, VARIANTS.length);
    assert.equal(new Set(VARIANTS.map((v) => v.configKey)).size, VARIANTS.length);
    for (const provider of PROVIDERS) {
      assert.equal(VARIANTS.filter((v) => v.provider === provider && v.isDefault).length, 1, provider);
    }
  });

  it('lists for a CVM variant only instance types of its families, its default among them', function () {
    for (const v of VARIANTS) {
      assert.ok(v.instanceTypes.includes(v.defaultInstanceType), v.name);
      if (!v.cvm) continue;
      const outside = v.instanceTypes.filter((t) => !v.cvm!.families.includes(instanceFamily(v.provider, t)));
      assert.deepEqual(outside, [], v.name);
    }
  });

  it('is what each built-in provider says its nodes produce, the default first', async function () {
    const seen = new Map<string, readonly string[]>();
    for (const provider of PROVIDERS) seen.set(provider, (await loadProvider(provider)).attestationVariants);
    assert.deepEqual(Object.fromEntries(seen), {
      local: ['local-vtpm'],
      qemu: ['qemu-vtpm'],
      aws: ['aws-sev-snp', 'aws-nitro-tpm'],
      azure: ['azure-sev-snp', 'azure-tdx', 'azure-trustedlaunch'],
      gcp: ['gcp-sev-snp', 'gcp-sev-es'],
    });
    for (const provider of PROVIDERS) assert.deepEqual(seen.get(provider), variantsOf(provider));
  });

  it('a row added to the table alone reaches the config, the schema, the CLI, the provider and the validator registry', async function () {
    // A made-up AWS SEV-SNP variant on a family no other variant uses, so every fact below can only come from the row.
    const row = `{
      name: 'aws-test-snp', configKey: 'awsTestSNP', provider: 'aws', summary: 'A test variant.', configFields: 'snp-tcb',
      measurements: { enforced: [4, 9], warnOnly: [15] }, cvm: { technology: 'sev-snp', families: ['m7a'] },
      instanceTypes: ['m7a.large', 'm7a.xlarge'], defaultInstanceType: 'm7a.xlarge', akTrust: 'snp-report', issuer: 'vtpm',
      validator: async () => ({ createValidator: () => ({ variant: 'aws-test-snp', validate: async () => { throw new Error('test'); } }) }),
    }`;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx/esm',
        '--import',
        path.join(SUPPORT, 'extra-variant-register.mjs'),
        path.join(SUPPORT, 'extra-variant-probe.ts'),
      ],
      { cwd: REPO_ROOT, env: { ...process.env, EXTRA_VARIANT_NAME: 'aws-test-snp', EXTRA_VARIANT_ROW: row } },
    );
    const seen = JSON.parse(stdout) as Record<string, unknown>;
    const zero = '0'.repeat(64);

    assert.ok((seen.knownVariants as string[]).includes('aws-test-snp'));
    assert.deepEqual(seen.providers, {
      local: ['local-vtpm'],
      qemu: ['qemu-vtpm'],
      aws: ['aws-sev-snp', 'aws-nitro-tpm', 'aws-test-snp'],
      azure: ['azure-sev-snp', 'azure-tdx', 'azure-trustedlaunch'],
      gcp: ['gcp-sev-snp', 'gcp-sev-es'],
    });
    // config generate -a wrote it, the schema accepted it back, with the row's PCR policy and SNP TCB fields.
    assert.equal(seen.parsedVariant, 'aws-test-snp');
    assert.deepEqual(seen.generatedMeasurements, {
      4: { expected: zero, warnOnly: false },
      9: { expected: zero, warnOnly: false },
      15: { expected: zero, warnOnly: true },
    });
    const filled = { expected: '5a'.repeat(32), warnOnly: false };
    assert.deepEqual(seen.parsedSection, {
      measurements: {
        4: filled,
        8: { expected: zero, warnOnly: false },
        9: filled,
        11: filled,
        12: { expected: zero, warnOnly: false },
        13: { expected: zero, warnOnly: false },
        15: { expected: zero, warnOnly: true },
      },
      bootloaderVersion: 2,
      teeVersion: 0,
      snpVersion: 6,
      microcodeVersion: 93,
    });
    assert.equal(seen.instanceType, 'm7a.xlarge');
    assert.deepEqual(seen.instanceTypes, ['m7a.large', 'm7a.xlarge']);
    assert.ok((seen.jsonSchemaKeys as string[]).includes('awsTestSNP'));
    assert.ok((seen.generateOptions as string[]).includes('aws-test-snp'));
    assert.match(String(seen.otherProvider), /aws-test-snp does not run on provider gcp/);
    // The AWS provider makes it a SEV-SNP launch template on its families only.
    assert.deepEqual(seen.launchTemplate, { CpuOptions: { AmdSevSnp: 'enabled' } });
    assert.match(String(seen.otherFamily), /"m6a\.xlarge" cannot run aws-test-snp confidential VMs/);
    assert.equal(seen.validatorVariant, 'aws-test-snp');
  });
});
