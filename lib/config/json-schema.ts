/**
 * The published JSON Schema of the config, generated from the zod schema the CLI validates with (so the two cannot
 * drift). Editors use it through the `# yaml-language-server: $schema=` line of a generated config.
 * Cross-section rules (instance type per variant and similar) are not expressible here; `config validate` checks them.
 */
import { z } from 'zod';
import { configSchema } from './schema.js';

export function configJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(configSchema, { io: 'input', target: 'draft-7' }),
    title: 'Constellation configuration (constellation-conf.yaml)',
  };
}

/** The text written to schema/config.schema.json and docs/config-schema.json. */
export function configJsonSchemaText(): string {
  return `${JSON.stringify(configJsonSchema(), null, 2)}\n`;
}
