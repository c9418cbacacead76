/**
 * The hand-checked JSON shapes of the node program's start path (lib/json-shape.ts) against the zod schemas they
 * replaced: for every input, the same verdict, the same data and the same first issue (path and message), which the
 * boot config's and the attestation document's errors quote.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { z } from 'zod';
import { bootConfigFileShape } from '../bootstrapper/boot-config.js';
import { attestationDocumentShape } from '../lib/atls/document.js';
import { checkShape, type ObjectField } from '../lib/json-shape.js';

const nonEmpty = z.string().min(1).optional();
const bootConfigSchema = z.strictObject({
  csp: nonEmpty,
  attestationVariant: nonEmpty,
  paths: z
    .strictObject({
      tpm: nonEmpty,
      stateDisk: nonEmpty,
      stateDir: nonEmpty,
      nodeDir: nonEmpty,
      tsmRoot: nonEmpty,
      sevGuest: nonEmpty,
    })
    .optional(),
  providerOptions: z.record(z.string(), z.unknown()).optional(),
  imageVersion: nonEmpty,
});
const documentSchema = z.object({
  variant: z.string().min(1),
  attestation: z.record(z.string(), z.unknown()),
  instanceInfo: z.string(),
  userData: z.string(),
});

function assertSame(shape: ObjectField, schema: z.ZodType, value: unknown): void {
  const ours = checkShape(value, shape);
  const zods = schema.safeParse(value);
  const input = JSON.stringify(value);
  assert.equal(ours.success, zods.success, input);
  if (ours.success && zods.success) assert.deepEqual(ours.data, zods.data, input);
  if (!ours.success && !zods.success) {
    const issue = zods.error.issues[0]!;
    assert.deepEqual(ours.issue, { path: issue.path.map(String), message: issue.message }, input);
  }
}

const SCALARS = [null, true, 0, 1.5, '', 'x', [], ['x'], {}, { a: 1 }];
/** JSON values whose keys are mostly the shape's own, at the top and in `paths`. */
function jsonValues(keys: string[]) {
  const scalar = fc.constantFrom(...SCALARS);
  const object = (inner: fc.Arbitrary<unknown>) =>
    fc.dictionary(fc.constantFrom(...keys, 'extra', 'other'), inner, { maxKeys: 7 });
  return fc.oneof(scalar, object(fc.oneof(scalar, fc.string(), object(fc.oneof(scalar, fc.string())))));
}

describe('lib/json-shape: hand checks with the messages of the zod schemas they replaced', () => {
  const bootKeys = [
    'csp',
    'attestationVariant',
    'paths',
    'providerOptions',
    'imageVersion',
    'tpm',
    'stateDisk',
    'stateDir',
    'nodeDir',
    'tsmRoot',
    'sevGuest',
  ];
  const documentKeys = ['variant', 'attestation', 'instanceInfo', 'userData'];

  it('the boot config file: the cases its errors are known for', () => {
    for (const value of [
      ...SCALARS,
      { csp: 'qemu', attestationVariant: 'qemu-vtpm', paths: { tpm: '/dev/tpmrm0' }, providerOptions: { a: [1] } },
      { csp: '' },
      { csp: 1 },
      { tpmPath: '/dev/tpm0' },
      { x: 1, y: 2 },
      { x: 1, csp: '' },
      { paths: 1 },
      { paths: { tpm: '' } },
      { paths: { q: 1, tpm: 2 } },
      { providerOptions: [] },
      { providerOptions: null },
      { imageVersion: null },
    ])
      assertSame(bootConfigFileShape, bootConfigSchema, value);
  });

  it('the attestation document: the cases its errors are known for, and other keys dropped', () => {
    const good = { variant: 'qemu-vtpm', attestation: { quote: 'AA' }, instanceInfo: '', userData: 'u' };
    for (const value of [
      ...SCALARS,
      good,
      { ...good, extra: 1 },
      { ...good, variant: '' },
      { ...good, attestation: [] },
      { ...good, instanceInfo: 1, variant: '' },
      { variant: 'a' },
    ])
      assertSame(attestationDocumentShape, documentSchema, value);
  });

  it('agrees with zod on generated JSON values', () => {
    fc.assert(
      fc.property(jsonValues(bootKeys), (value) => assertSame(bootConfigFileShape, bootConfigSchema, value)),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(jsonValues(documentKeys), (value) => assertSame(attestationDocumentShape, documentSchema, value)),
      { numRuns: 500 },
    );
  });
});
