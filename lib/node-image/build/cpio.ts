/**
 * A reproducible initrd archive: cpio "newc" (the format the Linux kernel unpacks into its initial root file system,
 * docs/workflows/node-images.md). Every byte is a function of the entries alone: entries sorted by path (a folder
 * before what it holds), mtime fixed (SOURCE_DATE_EPOCH or 0), uid/gid 0, inode numbers counted from 1 in that order,
 * device numbers 0, one link per file (the kernel needs no hard links). Compression is the caller's (zstd, ./index.ts).
 */

export type CpioEntry =
  | { path: string; type: 'dir'; mode: number }
  | { path: string; type: 'file'; mode: number; data: Buffer }
  | { path: string; type: 'symlink'; target: string }
  | { path: string; type: 'chardev'; mode: number; major: number; minor: number };

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const S_IFCHR = 0o020000;

const hex8 = (n: number) => (n >>> 0).toString(16).padStart(8, '0');
const pad4 = (n: number) => (4 - (n % 4)) % 4;

function header(fields: {
  ino: number;
  mode: number;
  nlink: number;
  mtime: number;
  size: number;
  rdevMajor: number;
  rdevMinor: number;
  nameSize: number;
}): string {
  return (
    '070701' +
    hex8(fields.ino) +
    hex8(fields.mode) +
    hex8(0) + // uid
    hex8(0) + // gid
    hex8(fields.nlink) +
    hex8(fields.mtime) +
    hex8(fields.size) +
    hex8(0) + // devmajor
    hex8(0) + // devminor
    hex8(fields.rdevMajor) +
    hex8(fields.rdevMinor) +
    hex8(fields.nameSize) +
    hex8(0) // check
  );
}

/** Sort key: path components compared in order, so that `a` < `a/b` < `a-b` (a folder before its content). */
function comparePaths(a: string, b: string): number {
  const pa = a.split('/');
  const pb = b.split('/');
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    if (pa[i] !== pb[i]) return pa[i] < pb[i] ? -1 : 1;
  }
  return pa.length - pb.length;
}

/** The archive of these entries (paths relative, without a leading slash), with the trailer. */
export function writeCpio(entries: readonly CpioEntry[], mtime = 0): Buffer {
  const seen = new Set<string>();
  for (const e of entries) {
    if (e.path === '' || e.path.startsWith('/') || e.path.split('/').some((p) => p === '' || p === '.' || p === '..'))
      throw new Error(`cpio: bad path ${JSON.stringify(e.path)}`);
    if (seen.has(e.path)) throw new Error(`cpio: duplicate path ${e.path}`);
    seen.add(e.path);
  }
  const sorted = [...entries].sort((a, b) => comparePaths(a.path, b.path));
  const chunks: Buffer[] = [];
  const push = (
    name: string,
    mode: number,
    nlink: number,
    data: Buffer,
    ino: number,
    rdev: [number, number] = [0, 0],
  ) => {
    const nameBytes = Buffer.from(`${name}\0`);
    const head = Buffer.from(
      header({
        ino,
        mode,
        nlink,
        mtime,
        size: data.length,
        rdevMajor: rdev[0],
        rdevMinor: rdev[1],
        nameSize: nameBytes.length,
      }),
      'ascii',
    );
    chunks.push(
      head,
      nameBytes,
      Buffer.alloc(pad4(head.length + nameBytes.length)),
      data,
      Buffer.alloc(pad4(data.length)),
    );
  };
  sorted.forEach((e, i) => {
    const ino = i + 1;
    switch (e.type) {
      case 'dir':
        push(e.path, S_IFDIR | (e.mode & 0o7777), 2, Buffer.alloc(0), ino);
        break;
      case 'file':
        push(e.path, S_IFREG | (e.mode & 0o7777), 1, e.data, ino);
        break;
      case 'symlink':
        push(e.path, S_IFLNK | 0o777, 1, Buffer.from(e.target), ino);
        break;
      case 'chardev':
        push(e.path, S_IFCHR | (e.mode & 0o7777), 1, Buffer.alloc(0), ino, [e.major, e.minor]);
        break;
    }
  });
  push('TRAILER!!!', 0, 1, Buffer.alloc(0), 0);
  return Buffer.concat(chunks);
}
