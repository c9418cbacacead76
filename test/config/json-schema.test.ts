import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { configJsonSchema, configJsonSchemaText } from '../../lib/config/index.js';
import { REPO_ROOT } from '../support/cli.js';

describe('config: JSON Schema', () => {
  for (const file of ['schema/config.schema.json', 'docs/config-schema.json']) {
    it(`${file} is the schema generated from the code (else run: node --import tsx scripts/gen-config-schema.ts)`, () => {
      assert.equal(readFileSync(path.join(REPO_ROOT, file), 'utf8'), configJsonSchemaText());
    });
  }

  it('is strict and requires exactly one provider and one variant, as the code does', () => {
    const schema = configJsonSchema() as {
      additionalProperties: boolean;
      required: string[];
      properties: Record<string, { minProperties?: number; maxProperties?: number; additionalProperties?: unknown }>;
    };
    assert.equal(schema.additionalProperties, false);
    for (const key of ['version', 'name', 'kubernetesVersion', 'provider', 'nodeGroups', 'attestation'])
      assert.ok(schema.required.includes(key), key);
    for (const key of ['provider', 'attestation']) {
      assert.equal(schema.properties[key]?.minProperties, 1);
      assert.equal(schema.properties[key]?.maxProperties, 1);
      assert.equal(schema.properties[key]?.additionalProperties, false);
    }
  });
});
