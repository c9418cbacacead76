/**
 * Atomic workspace writes: a temp file in the same directory, fsync, then rename, mode 0600. A reader sees
 * the old or the new content, never half a file, and a crash leaves at most a stray temp file.
 * `exclusive` refuses to replace a file that exists (the check and the rename are one step: link(2)).
 * A link, directory or special file where the file goes is refused (rename would replace the link itself, but
 * a link there was planted by someone else, so it is reported rather than silently dropped).
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { UserError } from '../errors.js';
import { checkReplaceable } from './regular-file.js';

export class FileExistsError extends UserError {
  constructor(readonly file: string) {
    super(`${file} already exists and would be overwritten.`, {
      hint: 'Move or delete it first if you really want a new one, or use another workspace (-C <dir>).',
    });
  }
}

export interface WriteOptions {
  /** Fail with FileExistsError instead of replacing an existing file. */
  exclusive?: boolean;
  /** File mode; workspace files are 0600. */
  mode?: number;
  /** Names the file in messages ("the state file"). */
  what?: string;
}

export async function writeFileAtomic(
  file: string,
  data: string | Uint8Array,
  options: WriteOptions = {},
): Promise<void> {
  const mode = options.mode ?? 0o600;
  const dir = path.dirname(file);
  await fs.mkdir(dir, { recursive: true });
  await checkReplaceable(file, options.what ?? 'the file');
  const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await fs.open(tmp, 'wx', mode);
  try {
    await handle.writeFile(data);
    await handle.chmod(mode);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    if (options.exclusive) {
      // link() fails with EEXIST if the target exists, so no other writer can slip in between check and write.
      await fs.link(tmp, file).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'EEXIST') throw new FileExistsError(file);
        throw err;
      });
    } else {
      await fs.rename(tmp, file);
    }
  } finally {
    await fs.rm(tmp, { force: true });
  }
  const dirHandle = await fs.open(dir, 'r');
  try {
    await dirHandle.sync();
  } finally {
    await dirHandle.close();
  }
}
