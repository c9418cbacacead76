/**
 * FUSE mounts of this machine (the local nodes' gocryptfs state directories): which exist below a folder, and how to
 * detach one whose server is gone. /proc/self/mounts is the source of truth; it escapes special characters in paths
 * as octal (a space is \040).
 */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';

const unescapeMountPath = (field: string) =>
  field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));

/** Every mount point at or below `dir`, deepest first (the order to detach them in). */
export async function mountPointsUnder(dir: string): Promise<string[]> {
  const root = path.resolve(dir);
  const text = await fs.readFile('/proc/self/mounts', 'utf8').catch(() => '');
  const points = text
    .split('\n')
    .map((line) => line.split(' ')[1])
    .filter((field): field is string => field !== undefined && field !== '')
    .map(unescapeMountPath)
    .filter((point) => point === root || point.startsWith(`${root}/`));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/** Lazily unmounts a FUSE mount (works when its server died: the kernel drops the mount once nothing uses it). */
export function detachMount(point: string, fusermount = 'fusermount3'): Promise<boolean> {
  return new Promise((resolve) => execFile(fusermount, ['-u', '-z', point], (err) => resolve(!err)));
}

/** Detaches every mount at or below `dir`; resolves when all were tried. */
export async function detachMountsUnder(dir: string): Promise<void> {
  for (const point of await mountPointsUnder(dir)) await detachMount(point);
}
