/**
 * SHA-256 and SHA-384 of the image's files, kept between processes in one JSON file per cluster, so that the CLI
 * (at create) and every node's launcher (at every boot) do not each hash the ~100 MB Node.js binary and the whole
 * image again. An entry counts only while the file is the very same: device, inode, size, modification and change
 * time. Writing a file changes its change time (ctime), which no process can set back, so a changed byte of the
 * image is hashed anew and measured as it is. A cache that cannot be read or written only costs the hashing.
 */
import { createHash } from 'node:crypto';
import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';

export type FileDigests = { sha256: Buffer; sha384: Buffer };

interface Entry {
  identity: string;
  sha256: string;
  sha384: string;
}

export class FileDigestCache {
  private entries: Map<string, Entry> | undefined;
  private changed = false;

  /** `file`: where the cache is kept; undefined keeps it in memory only. */
  constructor(private readonly file?: string) {}

  /** The file's digests, from the cache when the file is unchanged since they were computed. */
  async digests(file: string): Promise<FileDigests> {
    const entries = await this.load();
    const stat = await fs.stat(file, { bigint: true });
    const identity = `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
    const hit = entries.get(file);
    if (hit?.identity === identity) return { sha256: Buffer.from(hit.sha256, 'hex'), sha384: Buffer.from(hit.sha384, 'hex') };
    const computed = await hashFile(file);
    entries.set(file, { identity, sha256: computed.sha256.toString('hex'), sha384: computed.sha384.toString('hex') });
    this.changed = true;
    return computed;
  }

  /** Writes what was computed since the last save (best effort). */
  async save(): Promise<void> {
    if (!this.file || !this.changed || !this.entries) return;
    this.changed = false;
    await fs.mkdir(path.dirname(this.file), { recursive: true, mode: 0o700 }).catch(() => undefined);
    await writeFileAtomic(this.file, JSON.stringify(Object.fromEntries(this.entries)), { mode: 0o600 }).catch(() => undefined);
  }

  private async load(): Promise<Map<string, Entry>> {
    if (this.entries) return this.entries;
    let parsed: Record<string, Entry> = {};
    if (this.file) {
      try {
        const value: unknown = JSON.parse((await readRegularFile(this.file, { what: 'the image digest cache', maxBytes: SIZE_LIMITS.nodeFile })).toString('utf8'));
        if (typeof value === 'object' && value !== null) parsed = value as Record<string, Entry>;
      } catch {
        // No cache yet, or a broken one: start empty.
      }
    }
    this.entries = new Map(Object.entries(parsed).filter(([, e]) => typeof e?.identity === 'string' && typeof e.sha256 === 'string' && typeof e.sha384 === 'string'));
    return this.entries;
  }
}

export async function hashFile(file: string): Promise<FileDigests> {
  const sha256 = createHash('sha256');
  const sha384 = createHash('sha384');
  for await (const chunk of createReadStream(file)) {
    sha256.update(chunk as Buffer);
    sha384.update(chunk as Buffer);
  }
  return { sha256: sha256.digest(), sha384: sha384.digest() };
}
