import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  ATTESTATION_VARIANTS,
  attestationConfigOf,
  attestationVariantOf,
  type Config,
  DEFAULT_INSTANCE_TYPES,
  defaultConfig,
  INSTANCE_TYPES,
  loadConfig,
  measurementsOf,
  parseConfig,
  parseTags,
  PROVIDER_VARIANTS,
  PROVIDERS,
  providerOf,
  providerOfVariant,
  renderConfig,
  setProviderFields,
  SUPPORTED_KUBERNETES_VERSIONS,
  VARIANT_CONFIG_KEYS,
  variantOfConfigKey,
} from '../../lib/config/index.js';
import { UserError } from '../../lib/errors.js';

describe('config: defaults, rendering, lookups', () => {
  it('maps every CLI variant name to its config key and back, and to exactly one provider', () => {
    for (const variant of ATTESTATION_VARIANTS) {
      assert.equal(variantOfConfigKey(VARIANT_CONFIG_KEYS[variant]), variant);
      assert.equal(PROVIDERS.filter((p) => PROVIDER_VARIANTS[p].includes(variant)).length, 1, variant);
    }
    assert.deepEqual(
      PROVIDERS.map((p) => PROVIDER_VARIANTS[p][0]),
      ['local-vtpm', 'qemu-vtpm', 'aws-sev-snp', 'azure-sev-snp', 'gcp-sev-snp'],
    );
  });

  it('allows each variant its default instance type, and no variant a type of another cloud', () => {
    for (const variant of ATTESTATION_VARIANTS) {
      assert.ok(INSTANCE_TYPES[variant].includes(DEFAULT_INSTANCE_TYPES[variant]), variant);
    }
    assert.ok(!INSTANCE_TYPES['aws-sev-snp'].includes('m6i.xlarge'), 'Intel types cannot run SEV-SNP');
    assert.ok(!INSTANCE_TYPES['azure-sev-snp'].includes('Standard_DC4es_v5'), 'TDX types cannot run SEV-SNP');
    assert.ok(INSTANCE_TYPES['azure-tdx'].includes('Standard_DC4es_v5'));
  });

  for (const variant of ATTESTATION_VARIANTS) {
    const provider = providerOfVariant(variant);
    it(`generates a config for ${provider} / ${variant} that renders and parses back to itself`, () => {
      const config = defaultConfig(provider, { attestationVariant: variant, tags: { team: 'infra' } });
      const yaml = renderConfig(config, { schemaUrl: 'https://example.test/config.schema.json' });
      assert.equal(yaml.split('\n')[0], '# yaml-language-server: $schema=https://example.test/config.schema.json');
      // Cloud configs are complete only after `iam create` and setting the image: those are empty until then.
      const parsed = parseConfig(yaml, 'constellation-conf.yaml', { allowIncomplete: provider !== 'local' });
      assert.deepEqual(parsed, config);
      assert.equal(attestationVariantOf(parsed), variant);
      assert.equal(providerOf(parsed), provider);
    });
  }

  it('writes the measurement policy of the design: local 8/12/13 enforced and 15 warnOnly', () => {
    const m = measurementsOf(defaultConfig('local'));
    assert.deepEqual(Object.keys(m), ['8', '12', '13', '15']);
    assert.deepEqual(
      Object.entries(m).map(([i, v]) => [i, v.warnOnly]),
      [
        ['8', false],
        ['12', false],
        ['13', false],
        ['15', true],
      ],
    );
    const cloud = measurementsOf(defaultConfig('gcp'));
    for (const i of ['0', '1', '2', '3', '6', '7', '15']) assert.equal(cloud[i]?.warnOnly, true, `PCR ${i}`);
    for (const i of ['4', '8', '9', '11', '12', '13']) assert.equal(cloud[i]?.warnOnly, false, `PCR ${i}`);
  });

  it('hands SNP variants their launch-TCB minimums and TDX its SVNs', () => {
    const snp = attestationConfigOf(defaultConfig('azure'));
    for (const key of ['bootloaderVersion', 'teeVersion', 'snpVersion', 'microcodeVersion'])
      assert.equal(typeof snp[key], 'number', key);
    const tdx = attestationConfigOf(defaultConfig('azure', { attestationVariant: 'azure-tdx' }));
    assert.match(String(tdx.mrSeam), /^[0-9a-f]{96}$/);
    assert.match(String(tdx.teeTCBSVN), /^[0-9a-f]{32}$/);
  });

  it('the local default is complete and valid without any edit', () => {
    const config = parseConfig(renderConfig(defaultConfig('local')));
    assert.equal(config.provider.local?.kubernetesBackend, 'none');
    assert.equal(config.nodeGroups.control_plane_default.initialCount, 1);
    assert.equal(config.nodeGroups.worker_default.stateDiskType, 'file');
  });

  it('accepts a minor Kubernetes version and refuses an unsupported one or a variant of another provider', () => {
    const newest = SUPPORTED_KUBERNETES_VERSIONS.at(-1)!;
    assert.equal(
      defaultConfig('local', { kubernetesVersion: newest.split('.').slice(0, 2).join('.') }).kubernetesVersion,
      newest,
    );
    assert.throws(
      () => defaultConfig('local', { kubernetesVersion: 'v1.2' }),
      (e: unknown) => e instanceof UserError && /not supported/.test(e.message),
    );
    assert.throws(() => defaultConfig('aws', { attestationVariant: 'gcp-sev-snp' }), /does not run on provider aws/);
    assert.throws(() => defaultConfig('aws', { attestationVariant: 'sgx' }), /Unknown attestation variant/);
    assert.throws(() => defaultConfig('openstack'), /Unknown provider/);
  });

  it('reads measurements in upper-case hex as lower case', () => {
    const yaml = renderConfig(defaultConfig('local')).replace('0'.repeat(64), 'AB'.repeat(32));
    assert.equal(measurementsOf(parseConfig(yaml))['8']?.expected, 'ab'.repeat(32));
  });

  it('parses -t tags, repeated and comma-separated, and refuses one without =', () => {
    assert.deepEqual(parseTags(['a=1,b=2', 'c=x=y']), { a: '1', b: '2', c: 'x=y' });
    assert.throws(() => parseTags(['oops']), /not of the form key=value/);
  });

  describe('loadConfig', () => {
    let dir: string;
    beforeEach(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'config-load-'));
    });
    afterEach(async () => {
      await fs.rm(dir, { recursive: true, force: true });
    });

    it('reads the workspace config', async () => {
      await fs.writeFile(path.join(dir, 'constellation-conf.yaml'), renderConfig(defaultConfig('local')));
      assert.equal((await loadConfig(dir)).version, 'v4');
    });

    it('says how to make a config when there is none', async () => {
      await assert.rejects(
        loadConfig(dir),
        (e: unknown) =>
          e instanceof UserError &&
          /There is no constellation-conf.yaml/.test(e.message) &&
          /config generate/.test(e.hint ?? ''),
      );
    });

    it('names the file as the caller shows it', async () => {
      await fs.writeFile(path.join(dir, 'constellation-conf.yaml'), 'version: v4\n');
      await assert.rejects(loadConfig(dir, { displayPath: 'ws/constellation-conf.yaml' }), (e: Error) =>
        e.message.startsWith('ws/constellation-conf.yaml is not valid'),
      );
    });
  });
});

/** A generated cloud config with its image's measurements filled in (what `image build` gives a user). */
function withImageMeasurements(
  config: Config,
  values: Record<string, string> = { '4': '4a'.repeat(32), '9': '9b'.repeat(32), '11': '1c'.repeat(32) },
): Config {
  const measurements = measurementsOf(config);
  for (const [index, value] of Object.entries(values))
    measurements[index] = { ...measurements[index], expected: value };
  return config;
}

describe('config: placeholder measurements of cloud configs', () => {
  const complete = (yaml: string) =>
    yaml
      .replace('image: ""', 'image: ami-1')
      .replace(/iamProfileControlPlane: ""/, 'iamProfileControlPlane: cp')
      .replace(/iamProfileWorkerNodes: ""/, 'iamProfileWorkerNodes: w');

  it('a generated cloud config says its measurements are placeholders and how to fill them', () => {
    const yaml = renderConfig(defaultConfig('aws'));
    assert.match(yaml, /measurements below are placeholders/);
    assert.match(yaml, /constellation image build/);
    assert.match(yaml, /config fetch-measurements/);
  });

  it('validate refuses each enforced PCR that boot extends (4, 9, 11) left at zero, naming the fix', () => {
    const yaml = complete(renderConfig(defaultConfig('aws')));
    assert.throws(
      () => parseConfig(yaml),
      (e: unknown) => {
        const message = (e as Error).message;
        return (
          ['4', '9', '11'].every((i) =>
            message.includes(
              `attestation.awsSEVSNP.measurements.${i}.expected: PCR ${i} is enforced but expected all zeros`,
            ),
          ) &&
          /constellation image build/.test(message) &&
          !/measurements\.(8|12|13|0|15)\./.test(message)
        );
      },
    );
  });

  it("validate accepts the image's values for 4, 9, 11 with 8, 12, 13 zero and warn-only firmware PCRs zero", () => {
    const yaml = complete(renderConfig(withImageMeasurements(defaultConfig('aws'))));
    const m = measurementsOf(parseConfig(yaml));
    assert.equal(m['4'].expected, '4a'.repeat(32));
    assert.equal(m['8'].expected, '0'.repeat(64));
    assert.equal(m['0'].warnOnly, true);
  });

  it('validate refuses a zero firmware PCR once it is enforced', () => {
    const config = withImageMeasurements(defaultConfig('gcp'));
    measurementsOf(config)['0'] = { expected: '0'.repeat(64), warnOnly: false };
    const yaml = renderConfig(config)
      .replace('image: ""', 'image: projects/p/global/images/i')
      .replace(/(\n\s+(project|serviceAccountKeyPath|region|zone)): ""/g, '$1: x');
    assert.throws(() => parseConfig(yaml), /measurements\.0\.expected: PCR 0 is enforced but expected all zeros/);
  });

  it('config generate may still write the placeholders (an incomplete config parses leniently)', () => {
    assert.doesNotThrow(() =>
      parseConfig(renderConfig(defaultConfig('azure')), 'constellation-conf.yaml', { allowIncomplete: true }),
    );
  });
});

describe('config: updating provider fields (iam create --update-config)', () => {
  it('fills empty fields, keeps the comments, and the result validates', () => {
    const generated = renderConfig(withImageMeasurements(defaultConfig('aws')), {
      schemaUrl: 'https://example.test/s.json',
    }).replace('image: ""', 'image: ami-1');
    const updated = setProviderFields(generated, {
      iamProfileControlPlane: 'cp-profile',
      iamProfileWorkerNodes: 'worker-profile',
    });
    assert.equal(updated.split('\n')[0], '# yaml-language-server: $schema=https://example.test/s.json');
    assert.match(
      updated,
      /# IAM instance profile of the control-plane nodes\.[^\n]*\n\s+iamProfileControlPlane: cp-profile\n/,
    );
    assert.equal(parseConfig(updated).provider.aws?.iamProfileWorkerNodes, 'worker-profile');
  });

  it('refuses an update that would make the config invalid', () => {
    assert.throws(
      () => setProviderFields(renderConfig(defaultConfig('gcp')), { projectt: 'x' }),
      /unknown key "projectt" \(did you mean "project"\?\)/,
    );
  });
});
