/**
 * `npm run bench`: runs every bench/*.bench.ts (or only those whose names contain an argument) in turn. An argument
 * that is a bench's whole name picks that bench only (`mini-up` is not also `vm-mini-up`).
 * Each exports `default async function (out: (line: string) => void)` and prints its numbers with their ratios.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dir = path.dirname(fileURLToPath(import.meta.url));
const filters = process.argv.slice(2);
const all = readdirSync(dir).filter((f) => f.endsWith('.bench.ts'));
const picks = (f: string, x: string) => (all.includes(`${x}.bench.ts`) ? f === `${x}.bench.ts` : f.includes(x));
const files = all.filter((f) => filters.length === 0 || filters.some((x) => picks(f, x))).sort();

for (const file of files) {
  console.log(`\n== ${file.replace('.bench.ts', '')}`);
  const mod = (await import(pathToFileURL(path.join(dir, file)).href)) as {
    default: (out: (line: string) => void) => Promise<void>;
  };
  await mod.default((line) => console.log(`  ${line}`));
}
