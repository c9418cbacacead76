import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { ConfigError, parseConfig, type ConfigIssue } from '../../lib/config/index.js';

const ZERO = '0'.repeat(64);
const P384_PEM = generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).publicKey.export({
  type: 'spki',
  format: 'pem',
}) as string;

/** A valid local config with known line numbers (see the comments). */
const VALID_LOCAL = `version: v4
name: constell
kubernetesVersion: v1.32.10
image: local
microserviceVersion: v0.1.0
serviceCIDR: 10.96.0.0/12
tags: {}
provider:
  local:
    kubernetesBackend: none
nodeGroups:
  control_plane_default:
    role: control-plane
    zone: local
    instanceType: local
    stateDiskSizeGB: 1
    stateDiskType: file
    initialCount: 1
  worker_default:
    role: worker
    zone: local
    instanceType: local
    stateDiskSizeGB: 1
    stateDiskType: file
    initialCount: 1
attestation:
  localVTPM:
    measurements:
      8:
        expected: "${ZERO}"
        warnOnly: false
      15:
        expected: "${ZERO}"
        warnOnly: true
`;

const AWS_SECTION = `  aws:
    region: us-east-2
    zone: us-east-2a
    iamProfileControlPlane: cp
    iamProfileWorkerNodes: worker
    deployCSIDriver: false`;

/** The valid local config with 1-based line `line` replaced by `text` (several lines allowed). */
function replaceLine(line: number, text: string, base = VALID_LOCAL): string {
  const lines = base.split('\n');
  lines.splice(line - 1, 1, ...text.split('\n'));
  return lines.join('\n');
}

function insertAfter(line: number, text: string, base = VALID_LOCAL): string {
  const lines = base.split('\n');
  lines.splice(line, 0, ...text.split('\n'));
  return lines.join('\n');
}

/** A valid AWS config: the local one with provider, node groups and attestation swapped. */
const VALID_AWS = VALID_LOCAL.replace('image: local', 'image: ami-0123456789abcdef0')
  .replace('  local:\n    kubernetesBackend: none', AWS_SECTION)
  .replaceAll('zone: local', 'zone: us-east-2a')
  .replaceAll('instanceType: local', 'instanceType: m6a.xlarge')
  .replaceAll('stateDiskSizeGB: 1', 'stateDiskSizeGB: 30')
  .replaceAll('stateDiskType: file', 'stateDiskType: gp3')
  .replace(
    '  localVTPM:',
    '  awsSEVSNP:\n    bootloaderVersion: 2\n    teeVersion: 0\n    snpVersion: 6\n    microcodeVersion: 93',
  );

const AWS_VARIANT_ON_LOCAL = VALID_AWS.replace(AWS_SECTION, '  local:\n    kubernetesBackend: none');

function lineOf(text: string, needle: string): number {
  const index = text.split('\n').findIndex((l) => l.includes(needle));
  assert.ok(index >= 0, `"${needle}" not in the config`);
  return index + 1;
}

function issuesOf(text: string): ConfigIssue[] {
  try {
    parseConfig(text);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    return err.issues;
  }
  assert.fail('the config was accepted');
}

interface BrokenCase {
  name: string;
  text: string;
  path: string;
  line: number;
  message: RegExp;
}

const cases: BrokenCase[] = [
  {
    name: 'unknown top-level key (with a suggestion)',
    text: insertAfter(2, 'nmae: other'),
    path: 'nmae',
    line: 3,
    message: /unknown key "nmae" \(did you mean "name"\?\)/,
  },
  {
    name: 'unknown key in a node group',
    text: insertAfter(22, '    diskSize: 5'),
    path: 'nodeGroups.worker_default.diskSize',
    line: 23,
    message: /unknown key "diskSize"/,
  },
  {
    name: 'unknown key in a provider section',
    text: insertAfter(10, '    region: here'),
    path: 'provider.local.region',
    line: 11,
    message: /unknown key "region".*kubernetesBackend/,
  },
  // The parser notices the missing ] on the next line, and says what it expected.
  {
    name: 'bad YAML: unclosed flow sequence',
    text: replaceLine(2, 'name: [constell'),
    path: '',
    line: 3,
    message: /not valid YAML: .*end with a \]/,
  },
  {
    name: 'bad YAML: tab indentation',
    text: replaceLine(10, '\tkubernetesBackend: none'),
    path: '',
    line: 10,
    message: /not valid YAML/,
  },
  {
    name: 'bad YAML: duplicate key',
    text: insertAfter(2, 'name: again'),
    path: '',
    line: 3,
    message: /not valid YAML: .*unique/i,
  },
  {
    name: 'wrong type: string for a number',
    text: replaceLine(16, '    stateDiskSizeGB: big'),
    path: 'nodeGroups.control_plane_default.stateDiskSizeGB',
    line: 16,
    message: /must be a number, not the string "big"/,
  },
  {
    name: 'wrong type: string for a boolean',
    text: replaceLine(31, '        warnOnly: "no"'),
    path: 'attestation.localVTPM.measurements.8.warnOnly',
    line: 31,
    message: /must be true or false/,
  },
  {
    name: 'wrong type: list for a mapping',
    text: replaceLine(7, 'tags: [a, b]'),
    path: 'tags',
    line: 7,
    message: /must be a mapping of keys, not a list/,
  },
  {
    name: 'bad hex in a measurement',
    text: replaceLine(30, `        expected: "${'zz'.repeat(32)}"`),
    path: 'attestation.localVTPM.measurements.8.expected',
    line: 30,
    message: /not a PCR value: expected 64 or 96 hex characters/,
  },
  {
    name: 'measurement of the wrong length',
    text: replaceLine(30, '        expected: "abcd"'),
    path: 'attestation.localVTPM.measurements.8.expected',
    line: 30,
    message: /64 or 96 hex/,
  },
  {
    name: 'PCR index out of range',
    text: replaceLine(29, '      24:'),
    path: 'attestation.localVTPM.measurements.24',
    line: 29,
    message: /PCR index "24" is out of range: PCR indexes are 0 to 23/,
  },
  {
    name: 'no measurements at all',
    text: replaceLine(28, '    measurements: {}')
      .split('\n')
      .filter((_, i) => i < 28 || i > 33)
      .join('\n'),
    path: 'attestation.localVTPM.measurements',
    line: 28,
    message: /no measurements/,
  },
  {
    name: 'two providers',
    text: insertAfter(10, AWS_SECTION),
    path: 'provider.aws',
    line: 11,
    message: /more than one provider is set \(local, aws\)/,
  },
  {
    name: 'no provider',
    text: replaceLine(8, 'provider: {}')
      .split('\n')
      .filter((_, i) => i !== 8 && i !== 9)
      .join('\n'),
    path: 'provider',
    line: 8,
    message: /no provider is set: set exactly one of local, qemu, aws, azure, gcp/,
  },
  {
    name: 'two attestation variants',
    text: insertAfter(
      34,
      `  gcpSEVES:\n    measurements:\n      4:\n        expected: "${ZERO}"\n        warnOnly: false`,
    ),
    path: 'attestation.gcpSEVES',
    line: 35,
    message: /more than one attestation variant is set/,
  },
  {
    name: 'unsupported Kubernetes version',
    text: replaceLine(3, 'kubernetesVersion: v1.20.0'),
    path: 'kubernetesVersion',
    line: 3,
    message: /Kubernetes version "v1.20.0" is not supported; supported: v1\.31/,
  },
  {
    name: 'unsupported config version',
    text: replaceLine(1, 'version: v3'),
    path: 'version',
    line: 1,
    message: /config version "v3" is not supported: this CLI reads v4/,
  },
  {
    name: 'instance type not confidential',
    text: VALID_AWS.replace('instanceType: m6a.xlarge', 'instanceType: t3.large'),
    path: 'nodeGroups.control_plane_default.instanceType',
    line: lineOf(VALID_AWS, 'instanceType: m6a.xlarge'),
    message: /"t3.large" cannot run attestation variant aws-sev-snp \(not a confidential VM/,
  },
  {
    name: 'negative node count',
    text: replaceLine(25, '    initialCount: -1'),
    path: 'nodeGroups.worker_default.initialCount',
    line: 25,
    message: /must be at least 0, not -1/,
  },
  {
    name: 'fractional node count',
    text: replaceLine(25, '    initialCount: 1.5'),
    path: 'nodeGroups.worker_default.initialCount',
    line: 25,
    message: /must be a whole number/,
  },
  {
    name: 'control plane without nodes',
    text: replaceLine(18, '    initialCount: 0'),
    path: 'nodeGroups.control_plane_default.initialCount',
    line: 18,
    message: /needs at least 1 node/,
  },
  {
    name: 'wrong role for the default worker group',
    text: replaceLine(20, '    role: control-plane'),
    path: 'nodeGroups.worker_default.role',
    line: 20,
    message: /must be worker/,
  },
  {
    name: 'role not in the enum',
    text: replaceLine(20, '    role: boss'),
    path: 'nodeGroups.worker_default.role',
    line: 20,
    message: /must be one of "control-plane", "worker", not the string "boss"/,
  },
  {
    name: 'missing node group',
    text: VALID_LOCAL.split('\n')
      .filter((_, i) => i < 18 || i > 24)
      .join('\n'),
    path: 'nodeGroups.worker_default',
    line: 11,
    message: /is missing/,
  },
  {
    name: 'disk type of another provider',
    text: replaceLine(17, '    stateDiskType: gp3'),
    path: 'nodeGroups.control_plane_default.stateDiskType',
    line: 17,
    message: /"gp3" is not available on local; use one of file/,
  },
  {
    name: 'missing provider field',
    text: VALID_AWS.split('\n')
      .filter((l) => !l.includes('iamProfileWorkerNodes'))
      .join('\n'),
    path: 'provider.aws.iamProfileWorkerNodes',
    line: lineOf(VALID_AWS, '  aws:'),
    message: /is missing: add it \(a string\)/,
  },
  {
    name: 'empty IAM field',
    text: VALID_AWS.replace('iamProfileControlPlane: cp', 'iamProfileControlPlane: ""'),
    path: 'provider.aws.iamProfileControlPlane',
    line: lineOf(VALID_AWS, 'iamProfileControlPlane'),
    message: /iam create aws --update-config/,
  },
  {
    name: 'variant of another provider',
    text: AWS_VARIANT_ON_LOCAL,
    path: 'attestation.awsSEVSNP',
    line: lineOf(AWS_VARIANT_ON_LOCAL, 'awsSEVSNP'),
    message: /attestation variant aws-sev-snp does not run on provider local; local allows local-vtpm/,
  },
  {
    name: 'TCB version out of range',
    text: VALID_AWS.replace('snpVersion: 6', 'snpVersion: 300'),
    path: 'attestation.awsSEVSNP.snpVersion',
    line: lineOf(VALID_AWS, 'snpVersion'),
    message: /must be at most 255, not 300/,
  },
  {
    name: 'bad service CIDR',
    text: replaceLine(6, 'serviceCIDR: 10.96.0.0/40'),
    path: 'serviceCIDR',
    line: 6,
    message: /IPv4 CIDR/,
  },
  {
    name: 'cluster name with capitals',
    text: replaceLine(2, 'name: MyCluster'),
    path: 'name',
    line: 2,
    message: /lowercase/,
  },
  {
    name: 'tag value not a string',
    text: replaceLine(7, 'tags:\n  cost: [1]'),
    path: 'tags.cost',
    line: 8,
    message: /must be a string, not a list/,
  },
  {
    name: 'local image that is no version',
    text: replaceLine(4, 'image: ../elsewhere'),
    path: 'image',
    line: 4,
    message: /a local image is `local` \(the current build\) or a version made by `constellation mini image create`/,
  },
  {
    name: 'measurements signing key that is no PEM key',
    text: insertAfter(4, 'measurementsSigningKey: abc'),
    path: 'measurementsSigningKey',
    line: 5,
    message: /is not usable: the key is not a PEM public key/,
  },
  {
    name: 'measurements signing key on another curve',
    text: insertAfter(
      4,
      `measurementsSigningKey: |\n${P384_PEM.trim()
        .split('\n')
        .map((l) => `  ${l}`)
        .join('\n')}`,
    ),
    path: 'measurementsSigningKey',
    line: 5,
    message: /is not an ECDSA P-256 key \(it is EC on secp384r1\)/,
  },
  {
    name: 'a CSI driver asked for, which nothing deploys',
    text: VALID_AWS.replace('deployCSIDriver: false', 'deployCSIDriver: true'),
    path: 'provider.aws.deployCSIDriver',
    line: lineOf(VALID_AWS, 'deployCSIDriver'),
    message:
      /is true, but this CLI deploys no CSI driver yet \(encrypted persistent volumes are not built\): set it to false/,
  },
  { name: 'empty file', text: '', path: '', line: 1, message: /the file is empty/ },
  { name: 'top level is a list', text: '- version: v4\n', path: '', line: 1, message: /top level must be a mapping/ },
];

describe('config: broken configs', () => {
  it('the two base configs are valid', () => {
    assert.equal(parseConfig(VALID_LOCAL).name, 'constell');
    assert.equal(parseConfig(VALID_AWS).provider.aws?.region, 'us-east-2');
  });

  for (const c of cases) {
    it(`${c.name}: one issue naming ${c.path || 'the document'} at line ${c.line}`, () => {
      const issues = issuesOf(c.text);
      assert.equal(issues.length, 1, JSON.stringify(issues, null, 2));
      const [issue] = issues;
      assert.equal(issue!.path, c.path);
      assert.equal(issue!.line, c.line);
      assert.match(issue!.message, c.message);
    });
  }

  it('reports every problem of a config with several, in line order', () => {
    const text = replaceLine(26, '    initialCount: -1', insertAfter(2, 'nmae: x'));
    const issues = issuesOf(text);
    assert.deepEqual(
      issues.map((i) => [i.line, i.path]),
      [
        [3, 'nmae'],
        [26, 'nodeGroups.worker_default.initialCount'],
      ],
    );
  });

  it('the error message names file, line and key path of each issue', () => {
    try {
      parseConfig(replaceLine(3, 'kubernetesVersion: 1.2'), 'my-conf.yaml');
      assert.fail('accepted');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, /^my-conf\.yaml is not valid \(1 problem\):\n {2}my-conf\.yaml:3: kubernetesVersion: /);
      assert.ok(err.hint);
    }
  });
});
