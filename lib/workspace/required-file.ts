/**
 * Reading a file a command cannot do without (the state file, the master secret, the join service's files):
 * a missing or unreadable file is a UserError that names it and, when it is missing, says what to do. The file
 * must be a regular file (no link is followed) of at most `maxBytes` (regular-file.ts).
 */
import { UserError } from '../errors.js';
import { readRegularFile } from './regular-file.js';

/** The bytes of `file`; `what` names it in messages ("the state file"), `hint` says what to do when it is missing. */
export async function readRequiredFile(file: string, what: string, hint: string, maxBytes: number): Promise<Buffer> {
  try {
    return await readRegularFile(file, { what, maxBytes });
  } catch (err) {
    if (err instanceof UserError) throw err;
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      throw new UserError(`${capitalize(what)} ${file} does not exist.`, { hint });
    throw new UserError(`Cannot read ${what} ${file}: ${(err as Error).message}`, { cause: err });
  }
}

const capitalize = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);
