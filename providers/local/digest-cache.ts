/**
 * SHA-256 and SHA-384 of the image's files, kept between processes in one JSON file per user (beside the user's
 * versioned images), so that the CLI (at create) and every node's launcher (at every boot) of every cluster do not
 * each hash the ~100 MB Node.js binary and the ~100 MB node program again (docs/workflows/local-provider.md,
 * "Boot measurements").
 *
 * Why a cached digest is the digest of the file as it is now, even when someone else can write the file:
 * - An entry counts only while the file is the very same: device, inode, size, modification time and change time
 *   (ctime). The kernel sets ctime to the current time on every write, truncate, rename onto the path and
 *   attribute change, and no process but root (by setting the clock back) can set it to anything else; a file
 *   put in its place is a new inode whose ctime is the time it was made. So a changed byte makes a new key.
 * - A racing writer: timestamps come from a coarse clock (one kernel tick), so a write in the same tick as the
 *   file's last change would keep its ctime. A digest is therefore recorded only for a file whose ctime is more than
 *   RACY_MS before the hashing began (git's rule for "racily clean" files), and only when the file's identity after
 *   hashing equals that before. A younger file is hashed every time until it has rested (`create` waits for that,
 *   at most RACY_MS once after a build, so that its nodes' launchers find every digest).
 * - File systems whose attributes a user or a remote party reports (FUSE, NFS, SMB, 9p, Ceph) can show any ctime
 *   and serve other bytes on the next read: their files are hashed every time, never cached.
 * - Only the user running constellation can write the cache: it is used only when the file and every folder above
 *   it belong to that user or root and no one else can write them (the rule ssh applies to ~/.ssh), else ignored.
 * A cache that cannot be read or written only costs the hashing.
 */
import { createHash } from 'node:crypto';
import { constants, createReadStream, promises as fs, type BigIntStats } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { SIZE_LIMITS } from '../../lib/workspace/regular-file.js';

export type FileDigests = { sha256: Buffer; sha384: Buffer };

/** A file's ctime must be this much older than the start of its hashing for its digest to be kept. */
export const RACY_MS = 2000;
/** The cache keeps at most this many files (each build of the node program has about 60). */
const MAX_ENTRIES = 2000;
/** statfs(2) f_type of file systems whose attributes come from a user space daemon or a server. */
const UNTRUSTED_FS_TYPES = new Set([
  0x65735546 /* FUSE */, 0x6969 /* NFS */, 0x517b /* SMB */, 0xfe534d42 /* SMB2 */, 0xff534d42 /* CIFS */,
  0x01021997 /* 9p */, 0x00c36400 /* Ceph */,
]);

interface Entry {
  identity: string;
  sha256: string;
  sha384: string;
}

export interface FileDigestCacheOptions {
  /** The wall clock (ms), for the racy-file rule. */
  now?: () => number;
  /** The user the cache must belong to; default the effective user of this process. */
  uid?: number;
  /**
   * Wait until a file changed less than RACY_MS ago has rested, so its digest can be kept (at most RACY_MS, once
   * after a build): `create` does, so that the launchers of its nodes find every digest.
   */
  waitToRest?: boolean;
  /** Sleeps (tests). */
  sleep?: (ms: number) => Promise<void>;
}

export class FileDigestCache {
  private entries: Map<string, Entry> | undefined;
  private loading: Promise<Map<string, Entry>> | undefined;
  private changed = false;
  private readonly now: () => number;
  private readonly uid: number;

  /** `file`: where the cache is kept; undefined keeps it in memory only. */
  constructor(
    private readonly file?: string,
    options: FileDigestCacheOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.uid = options.uid ?? process.geteuid?.() ?? 0;
    this.waitToRest = options.waitToRest ?? false;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  private readonly waitToRest: boolean;
  private readonly sleep: (ms: number) => Promise<void>;

  /** The file's digests, from the cache when the file is unchanged since they were computed. */
  async digests(file: string): Promise<FileDigests> {
    const entries = await this.load();
    if (this.waitToRest) {
      const age = this.now() - Number((await fs.stat(file, { bigint: true })).ctimeMs);
      if (age >= 0 && age <= RACY_MS) await this.sleep(RACY_MS - age + 10);
    }
    const started = this.now();
    const before = await fs.stat(file, { bigint: true });
    const identity = identityOf(before);
    const hit = entries.get(file);
    if (hit?.identity === identity)
      return { sha256: Buffer.from(hit.sha256, 'hex'), sha384: Buffer.from(hit.sha384, 'hex') };
    const computed = await hashFile(file);
    const rested = Number(before.ctimeMs) < started - RACY_MS;
    if (
      rested &&
      identityOf(await fs.stat(file, { bigint: true })) === identity &&
      !(await onUntrustedFileSystem(file))
    ) {
      entries.set(file, { identity, sha256: computed.sha256.toString('hex'), sha384: computed.sha384.toString('hex') });
      this.changed = true;
    }
    return computed;
  }

  /** Writes what was computed since the last save (best effort), without the entries of files that are gone. */
  async save(): Promise<void> {
    if (!this.file || !this.changed || !this.entries) return;
    this.changed = false;
    const kept = await Promise.all(
      [...this.entries].map(async ([file, entry]) => {
        const stat = await fs.stat(file, { bigint: true }).catch(() => undefined);
        return stat && identityOf(stat) === entry.identity ? ([file, entry] as const) : undefined;
      }),
    );
    const live = kept.filter((e) => e !== undefined).slice(-MAX_ENTRIES);
    try {
      await fs.mkdir(path.dirname(this.file), { recursive: true, mode: 0o700 });
      if (!(await this.trusted(path.dirname(this.file)))) return;
      await writeFileAtomic(this.file, JSON.stringify(Object.fromEntries(live)), { mode: 0o600 });
    } catch {
      // Best effort: the next run hashes again.
    }
  }

  /** The entries, read once: concurrent callers share the one read (each would otherwise fill a map of its own). */
  private load(): Promise<Map<string, Entry>> {
    this.loading ??= this.read();
    return this.loading;
  }

  private async read(): Promise<Map<string, Entry>> {
    let parsed: Record<string, Entry> = {};
    if (this.file) {
      try {
        const text = await this.readTrusted(this.file);
        const value: unknown = text === undefined ? {} : JSON.parse(text);
        if (typeof value === 'object' && value !== null) parsed = value as Record<string, Entry>;
      } catch {
        // No cache yet, or a broken one: start empty.
      }
    }
    this.entries = new Map(
      Object.entries(parsed).filter(
        ([, e]) => typeof e?.identity === 'string' && typeof e.sha256 === 'string' && typeof e.sha384 === 'string',
      ),
    );
    return this.entries;
  }

  /** The cache file's text, when it and every folder above it are this user's (or root's) alone. */
  private async readTrusted(file: string): Promise<string | undefined> {
    const handle = await fs.open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const stat = await handle.stat();
      if (
        !stat.isFile() ||
        stat.size > SIZE_LIMITS.nodeFile ||
        !this.ownedSafely(stat) ||
        !(await this.trusted(path.dirname(file)))
      )
        return undefined;
      return await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  }

  /** True when `dir` and every folder above it belong to this user or root and only their owner can change them. */
  private async trusted(dir: string): Promise<boolean> {
    for (let current = path.resolve(dir); ; current = path.dirname(current)) {
      const stat = await fs.stat(current).catch(() => undefined);
      if (!stat?.isDirectory()) return false;
      // A sticky folder (/tmp) lets others add entries but not replace ours.
      const sticky = (stat.mode & 0o1000) !== 0;
      if (!this.ownedSafely(stat, sticky)) return false;
      if (current === path.dirname(current)) return true;
    }
  }

  private ownedSafely(stat: { uid: number; mode: number }, sticky = false): boolean {
    return (stat.uid === this.uid || stat.uid === 0) && (sticky || (stat.mode & 0o022) === 0);
  }
}

function identityOf(stat: BigIntStats): string {
  return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
}

async function onUntrustedFileSystem(file: string): Promise<boolean> {
  try {
    return UNTRUSTED_FS_TYPES.has((await fs.statfs(file)).type);
  } catch {
    return true;
  }
}

export async function hashFile(file: string): Promise<FileDigests> {
  const sha256 = createHash('sha256');
  const sha384 = createHash('sha384');
  for await (const chunk of createReadStream(file, { highWaterMark: 1024 * 1024 })) {
    sha256.update(chunk as Buffer);
    sha384.update(chunk as Buffer);
  }
  return { sha256: sha256.digest(), sha384: sha384.digest() };
}
