// Fails when proto/gen is not what `npm run proto` makes from proto/*.proto: regenerates into a temp dir and compares.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tmp = mkdtempSync(path.join(os.tmpdir(), 'proto-check-'));
try {
  execFileSync(path.join(root, 'node_modules/.bin/buf'), ['generate', 'proto', '--output', tmp], {
    cwd: root,
    stdio: 'inherit',
  });
  const list = (dir) =>
    readdirSync(dir).flatMap((name) => {
      const full = path.join(dir, name);
      return statSync(full).isDirectory() ? list(full).map((f) => path.join(name, f)) : [name];
    });
  const fresh = path.join(tmp, 'proto/gen');
  const committed = path.join(root, 'proto/gen');
  const a = list(fresh).sort();
  const b = list(committed).sort();
  const stale = [...new Set([...a, ...b])].filter(
    (f) =>
      !a.includes(f) ||
      !b.includes(f) ||
      readFileSync(path.join(fresh, f), 'utf8') !== readFileSync(path.join(committed, f), 'utf8'),
  );
  if (stale.length > 0) {
    console.error(`proto/gen is stale (${stale.join(', ')}): run \`npm run proto\` and commit the result.`);
    process.exit(1);
  }
  console.log('proto/gen is up to date.');
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
