/**
 * Writes the config's JSON Schema, generated from the zod schema in lib/config, to schema/config.schema.json
 * (shipped in the package; generated configs point at it) and docs/config-schema.json (published with the docs).
 * Run: node --import tsx scripts/gen-config-schema.ts
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { configJsonSchemaText } from '../lib/config/json-schema.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SCHEMA_FILES = ['schema/config.schema.json', 'docs/config-schema.json'];

const text = configJsonSchemaText();
for (const file of SCHEMA_FILES) {
  writeFileSync(path.join(root, file), text);
  console.log(`wrote ${file}`);
}
