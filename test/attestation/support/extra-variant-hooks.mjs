/**
 * Module hooks for the variant-table test: after the real lib/attestation/variant-table.ts is loaded (and
 * compiled by tsx), one more row is appended to VARIANT_TABLE, exactly as if a developer had added it there.
 * The row's JavaScript source comes from `register(..., { data: { row } })` (see ./extra-variant-register.mjs).
 */
import { Buffer } from 'node:buffer';

let row;

export function initialize(data) {
  row = data.row;
}

export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (!url.endsWith('/lib/attestation/variant-table.ts')) return result;
  const source = typeof result.source === 'string' ? result.source : Buffer.from(result.source).toString('utf8');
  return { ...result, source: `${source}\nVARIANT_TABLE.push(${row});\n` };
}
