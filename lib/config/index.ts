/**
 * The config library (constellation-conf.yaml, docs/design.md#config): schema, defaults, parsing with key paths and lines,
 * rendering, and the lookups other parts need (which variant, which measurements).
 * Importing it loads zod and yaml: the CLI imports it inside commands that need it, not on the start-up path.
 */
import type { Measurements } from '../attestation/types.js';
import type { Config } from './schema.js';
import {
  PROVIDERS,
  VARIANT_CONFIG_KEY_LIST,
  variantOfConfigKey,
  type AttestationVariant,
  type Provider,
} from './variants.js';

export { ConfigError, isConfigError, formatIssueLine, type ConfigIssue } from './errors.js';
export { configSchema, buildConfigSchema, type Config, type NodeGroup, type ConfigSchemaOptions } from './schema.js';
export { parseConfig, loadConfig, readConfigText, type ParseOptions, type LoadOptions } from './parse.js';
export { defaultConfig, type DefaultConfigOptions } from './defaults.js';
export { renderConfig, type RenderOptions } from './render.js';
export { generateConfigFiles, type GeneratedFiles } from './generate.js';
export { parseTags } from './tags.js';
export { setProviderFields, updateConfigProviderFields } from './edit.js';
export { configJsonSchema, configJsonSchemaText } from './json-schema.js';
export { defaultMeasurements } from './measurements.js';
export * from './variants.js';
export * from './versions.js';
export * from './instance-types.js';

/** The config's provider (the one key under `provider`). */
export function providerOf(config: Config): Provider {
  return PROVIDERS.find((p) => config.provider[p] !== undefined)!;
}

/** The CLI name of the config's attestation variant, e.g. "azure-sev-snp". */
export function attestationVariantOf(config: Config): AttestationVariant {
  const key = VARIANT_CONFIG_KEY_LIST.find((k) => config.attestation[k] !== undefined)!;
  return variantOfConfigKey(key)!;
}

/** The variant's section of `attestation` (measurements and TCB minimums), as the attestation validators take it. */
export function attestationConfigOf(config: Config): { measurements: Measurements; [key: string]: unknown } {
  const key = VARIANT_CONFIG_KEY_LIST.find((k) => config.attestation[k] !== undefined)!;
  return config.attestation[key]!;
}

/** The expected PCR values, by index (hex lower-case). */
export function measurementsOf(config: Config): Measurements {
  return attestationConfigOf(config).measurements;
}
