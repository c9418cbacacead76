/**
 * TEE reports through Linux configfs-tsm (/sys/kernel/config/tsm/report, kernel 6.7+), one interface for SEV-SNP
 * and TDX guests: make an entry (mkdir), write the 64 bytes of report data to `inblob`, read the report from
 * `outblob` (SNP: the 1184-byte report; TDX: the quote) and, for SNP, the certificate table from `auxblob`;
 * `provider` says which TEE answered. The kernel bumps `generation` on every write, so a generation that moved
 * between the write and the read means another writer raced us: the read is retried. The entry is removed after.
 * The root and the file-system calls are parameters: tests emulate configfs in a temp directory.
 */
import { randomBytes } from 'node:crypto';
import { promises as nodeFs } from 'node:fs';
import path from 'node:path';
import { UserError } from '../../errors.js';

export const TSM_REPORT_ROOT = '/sys/kernel/config/tsm/report';

/** The file-system calls configfs-tsm needs (node:fs/promises by default). */
export interface TsmFs {
  mkdir(dir: string): Promise<unknown>;
  rmdir(dir: string): Promise<void>;
  writeFile(file: string, data: Uint8Array | string): Promise<void>;
  readFile(file: string): Promise<Uint8Array>;
  access(file: string): Promise<void>;
}

export const nodeTsmFs: TsmFs = {
  mkdir: (dir) => nodeFs.mkdir(dir),
  rmdir: (dir) => nodeFs.rmdir(dir),
  writeFile: (file, data) => nodeFs.writeFile(file, data),
  readFile: async (file) => new Uint8Array(await nodeFs.readFile(file)),
  access: (file) => nodeFs.access(file),
};

export interface TsmReport {
  /** "sev_guest" or "tdx_guest". */
  provider: string;
  outblob: Uint8Array;
  /** SNP: the certificate table (may be empty). */
  auxblob?: Uint8Array;
}

export interface TsmOptions {
  root?: string;
  fs?: TsmFs;
  /** SNP: the VMPL the report is requested for (default: the kernel's, 0 for a guest kernel at VMPL 0). */
  privlevel?: number;
}

const ATTEMPTS = 3;

/** Whether configfs-tsm is there to ask (its report folder exists). */
export async function tsmAvailable(options: TsmOptions = {}): Promise<boolean> {
  return (options.fs ?? nodeTsmFs).access(options.root ?? TSM_REPORT_ROOT).then(
    () => true,
    () => false,
  );
}

export async function tsmReport(reportData: Uint8Array, options: TsmOptions = {}): Promise<TsmReport> {
  if (reportData.length !== 64)
    throw new UserError(`A TEE report takes 64 bytes of report data, got ${reportData.length}.`);
  const fs = options.fs ?? nodeTsmFs;
  const entry = path.join(options.root ?? TSM_REPORT_ROOT, `constellation-${randomBytes(6).toString('hex')}`);
  try {
    await fs.mkdir(entry);
  } catch (err) {
    throw new UserError(`Cannot make a configfs-tsm report entry ${entry}: ${(err as Error).message}`, {
      cause: err,
      hint: 'Is this a confidential VM whose kernel has configfs-tsm?',
    });
  }
  try {
    const read = async (name: string) => fs.readFile(path.join(entry, name));
    const text = async (name: string) =>
      Buffer.from(await read(name))
        .toString('utf8')
        .trim();
    for (let attempt = 1; ; attempt++) {
      if (options.privlevel !== undefined) await fs.writeFile(path.join(entry, 'privlevel'), String(options.privlevel));
      await fs.writeFile(path.join(entry, 'inblob'), reportData);
      const generation = await text('generation');
      const outblob = await read('outblob');
      const provider = await text('provider');
      const auxblob = await read('auxblob').catch(() => undefined);
      if ((await text('generation')) === generation)
        return { provider, outblob, ...(auxblob && auxblob.length > 0 ? { auxblob } : {}) };
      if (attempt >= ATTEMPTS)
        throw new UserError('Another program kept changing the configfs-tsm report while it was read.');
    }
  } finally {
    await fs.rmdir(entry).catch(() => undefined);
  }
}
