/**
 * `constellation image build --provider qemu` wall time (the built CLI, as a user runs it), cold and warm:
 *   cold: an empty package cache, so every pinned Debian package is downloaded (apt-get download) first;
 *   warm: the same cache again, every input cached.
 * Also checks the two builds gave the same raw disk (they must: same inputs). Needs network for the cold run.
 * Everything is built into temporary folders (key, cache, output) that are removed at the end.
 */
import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'bin/constellation');

function build(out: string, cache: string, configHome: string): number {
  const start = process.hrtime.bigint();
  const res = spawnSync(
    process.execPath,
    [CLI, 'image', 'build', '--provider', 'qemu', '--out', out, '--version', 'v0.0.1-bench', '--package-cache', cache],
    {
      cwd: ROOT,
      env: { ...process.env, XDG_CONFIG_HOME: configHome },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (res.status !== 0) throw new Error(`image build exited with ${res.status}: ${res.stderr.toString()}`);
  return ms;
}

export default async function imageBuild(out: (line: string) => void): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bench-image-build-'));
  try {
    const cache = path.join(dir, 'debs');
    const configHome = path.join(dir, 'config');
    const cold = build(path.join(dir, 'cold'), cache, configHome);
    const warm = build(path.join(dir, 'warm'), cache, configHome);
    const raw = 'constellation-qemu-v0.0.1-bench.raw';
    const [a, b] = await Promise.all([
      fs.readFile(path.join(dir, 'cold', raw)),
      fs.readFile(path.join(dir, 'warm', raw)),
    ]);
    const size = (await fs.stat(path.join(dir, 'cold', raw))).size;
    out(`cold (packages downloaded): ${(cold / 1000).toFixed(1)} s`);
    out(`warm (cached inputs):       ${(warm / 1000).toFixed(1)} s  (cold/warm ${(cold / warm).toFixed(2)})`);
    out(
      `raw disk ${(size / 1048576).toFixed(0)} MiB; the two builds ${a.equals(b) ? 'are byte-identical' : 'DIFFER'}; load average at the end ${os.loadavg()[0].toFixed(1)}`,
    );
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
