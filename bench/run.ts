/**
 * `npm run bench`: runs every bench/*.bench.ts (or only those whose names contain an argument) in turn.
 * Each exports `default async function (out: (line: string) => void)` and prints its numbers with their ratios.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dir = path.dirname(fileURLToPath(import.meta.url));
const filters = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();

for (const file of files) {
  console.log(`\n== ${file.replace('.bench.ts', '')}`);
  const mod = (await import(pathToFileURL(path.join(dir, file)).href)) as { default: (out: (line: string) => void) => Promise<void> };
  await mod.default((line) => console.log(`  ${line}`));
}
