/**
 * Run by test/attestation/variant-table.test.ts in a child process whose variant table has one more row
 * (./extra-variant-register.mjs): prints, as JSON, what every part that should know about variants sees of the
 * variant named in $EXTRA_VARIANT_NAME. Nothing here names the variant's facts; they all come from the table.
 */
import { createValidator, KNOWN_VARIANTS } from '../../../lib/attestation/registry.js';
import * as config from '../../../lib/config/index.js';
import ConfigGenerate from '../../../cli/commands/config/generate.js';
import { confidentialSettings } from '../../../providers/aws/confidential.js';
import { loadProvider } from '../../../providers/registry.js';

const name = process.env.EXTRA_VARIANT_NAME!;

function refusal(run: () => unknown): string | undefined {
  try {
    run();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

const generated = config.defaultConfig('aws', { attestationVariant: name });
generated.image = 'ami-0123456789abcdef0';
Object.assign(generated.provider.aws!, { iamProfileControlPlane: 'cp', iamProfileWorkerNodes: 'w' });
// What generate wrote (the row's PCR policy, placeholder values); then filled as a user fills them from the image's
// measurements (every image PCR, non-zero), which validate and the validator require.
const section = Object.values(generated.attestation)[0] as {
  measurements: Record<string, { expected: string; warnOnly: boolean }>;
};
const generatedMeasurements = structuredClone(section.measurements);
for (const pcr of [4, 8, 9, 11, 12, 13])
  section.measurements[String(pcr)] = { expected: (pcr === 8 || pcr >= 12 ? '00' : '5a').repeat(32), warnOnly: false };
const parsed = config.parseConfig(config.renderConfig(generated), 'constellation-conf.yaml');
const jsonSchema = config.configJsonSchema() as {
  properties: { attestation: { properties: Record<string, unknown> } };
};

const providers: Record<string, readonly string[]> = {};
for (const provider of config.PROVIDERS) providers[provider] = (await loadProvider(provider)).attestationVariants;

const validator = await createValidator(name, config.attestationConfigOf(parsed));

console.log(
  JSON.stringify({
    knownVariants: KNOWN_VARIANTS,
    providers,
    generatedMeasurements,
    parsedVariant: config.attestationVariantOf(parsed),
    parsedSection: config.attestationConfigOf(parsed),
    instanceType: parsed.nodeGroups.worker_default!.instanceType,
    instanceTypes: config.INSTANCE_TYPES[name as config.AttestationVariant],
    jsonSchemaKeys: Object.keys(jsonSchema.properties.attestation.properties),
    generateOptions: ConfigGenerate.flags.attestation.options,
    otherProvider: refusal(() => config.defaultConfig('gcp', { attestationVariant: name })),
    launchTemplate: confidentialSettings(name, parsed.nodeGroups.worker_default!.instanceType, 'worker_default'),
    otherFamily: refusal(() => confidentialSettings(name, 'm6a.xlarge', 'worker_default')),
    validatorVariant: validator.variant,
  }),
);
