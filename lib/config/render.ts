/**
 * `renderConfig(config)`: the config as YAML for people. The first line points editors at the JSON Schema
 * (`# yaml-language-server: $schema=`), every key carries its description from the schema as a comment, PCRs
 * carry their meaning, and empty cloud fields say how they get filled.
 */
import { Document, isMap, isScalar, type YAMLMap } from 'yaml';
import { configSchemaUrl } from './package-info.js';
import { configSchema, type Config } from './schema.js';
import { descriptionAt } from './schema-walk.js';

export interface RenderOptions {
  /** Where the `$schema` line points; the JSON Schema shipped with this installation by default. */
  schemaUrl?: string;
}

/** What each PCR holds on our node images (docs/design.md#attestation). */
const PCR_MEANINGS: Record<string, string> = {
  '0': 'firmware code',
  '1': 'firmware configuration',
  '2': 'option ROMs',
  '3': 'option ROM configuration',
  '4': 'boot chain',
  '6': 'host platform events',
  '7': 'secure boot policy',
  '8': 'zero on our images',
  '9': 'initramfs and kernel command line',
  '11': 'unified kernel image',
  '12': 'zero on our images',
  '13': 'zero on our images',
  '15': 'clusterID: zero until the node joins a cluster',
};

const HEADER = [
  ' Constellation cluster configuration. Every key is described below and in the JSON Schema named above;',
  ' `constellation config validate` checks this file and names the line of each problem.',
];

export function renderConfig(config: Config, options: RenderOptions = {}): string {
  const doc = new Document(withNumericPcrKeys(config));
  annotate(doc.contents as YAMLMap, []);
  const providerName = Object.keys(config.provider)[0];
  const header = [...HEADER];
  if (providerName === 'qemu') {
    header.push(
      ' `image` is a built qemu image (its folder) or a version in your image store; `create` writes its signed measurements',
      ' (PCR 4, 9 and 11 of measurements.json beside the image, verified with your image key) into this file.',
    );
  } else if (providerName && providerName !== 'local') {
    header.push(
      ' Empty fields are errors until they are set: `constellation iam create ' +
        `${providerName} --update-config\` fills the identities, and \`image\` is the node image you run.`,
      " The measurements below are placeholders (all zeros) until you fill them with your image's: `constellation image build`",
      " writes them (measurements.json), `constellation config fetch-measurements` fetches a published image's;",
      ' `config validate` refuses an enforced PCR 0–7, 9 or 11 that is still zero.',
    );
  }
  doc.commentBefore = header.join('\n');
  const text = doc.toString({ lineWidth: 0 });
  return `# yaml-language-server: $schema=${options.schemaUrl ?? configSchemaUrl()}\n${text}`;
}

/** YAML keys `4:` read better than `"4":`; the parser turns them back into the string keys of the schema. */
function withNumericPcrKeys(config: Config): unknown {
  const attestation = Object.fromEntries(
    Object.entries(config.attestation).map(([key, section]) => [
      key,
      {
        ...section,
        measurements: new Map(Object.entries(section!.measurements).map(([i, m]) => [Number(i), { ...m }])),
      },
    ]),
  );
  return { ...config, attestation };
}

/** Comments every key with its schema description; PCRs with their meaning; node-group fields once. */
function annotate(map: YAMLMap, path: string[]): void {
  const inMeasurements = path.at(-1) === 'measurements';
  for (const [index, pair] of map.items.entries()) {
    if (!isScalar(pair.key)) continue;
    const key = String(pair.key.value);
    const keyPath = [...path, key];
    const comment = inMeasurements ? PCR_MEANINGS[key] : descriptionAt(configSchema, keyPath);
    if (comment) pair.key.commentBefore = ` ${comment}`;
    if (path.length === 0 && index > 0) pair.key.spaceBefore = true;
    const repeatedGroup = path.length === 1 && path[0] === 'nodeGroups' && index > 0;
    if (isMap(pair.value) && !inMeasurements && !repeatedGroup) annotate(pair.value, keyPath);
  }
}
