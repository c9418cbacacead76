/**
 * A confidential VM's TEE interfaces, played by the test: configfs-tsm (an in-memory file system with configfs'
 * behaviour: writing `inblob` makes `outblob`/`auxblob` and bumps `generation`) and an SEV-SNP guest that signs
 * reports with a test VCEK or VLEK (test/attestation/snp/fixtures.ts) and hands out its certificate table.
 */
import path from 'node:path';
import { encodeCertTable } from '../../../lib/attestation/tee/index.js';
import type { TsmFs, TsmOptions } from '../../../lib/attestation/tee/configfs-tsm.js';
import { makeSnpReport, type EndorsementKey, type ReportFields, type SnpTestCa } from '../snp/fixtures.js';

export interface TeeAnswer {
  provider: string;
  outblob: Uint8Array;
  auxblob?: Uint8Array;
}

export interface EmulatedTsm extends TsmOptions {
  /** Report entries still present (the client must remove its own). */
  entries(): number;
  /** The report data of every request. */
  requests: Uint8Array[];
  /** Bump the generation once after the next inblob write (another writer racing). */
  raceOnce(): void;
}

export function emulatedTsm(answer: (reportData: Uint8Array) => TeeAnswer): EmulatedTsm {
  const root = '/emulated/sys/kernel/config/tsm/report';
  const entries = new Map<string, { generation: number; files: Map<string, Uint8Array> }>();
  const requests: Uint8Array[] = [];
  let race = false;
  const entryOf = (file: string) => {
    const entry = entries.get(path.dirname(file));
    if (!entry) throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
    return entry;
  };
  const fs: TsmFs = {
    async access(file) {
      if (file !== root && !entries.has(file)) throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
    },
    async mkdir(dir) {
      if (path.dirname(dir) !== root || entries.has(dir))
        throw Object.assign(new Error(`EEXIST or EINVAL: ${dir}`), { code: 'EINVAL' });
      entries.set(dir, { generation: 0, files: new Map() });
    },
    async rmdir(dir) {
      entries.delete(dir);
    },
    async writeFile(file, data) {
      const entry = entryOf(file);
      const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
      entry.generation++;
      entry.files.set(path.basename(file), bytes);
      if (path.basename(file) !== 'inblob') return;
      requests.push(bytes);
      const made = answer(bytes);
      entry.files.set('outblob', made.outblob);
      entry.files.set('auxblob', made.auxblob ?? new Uint8Array(0));
      entry.files.set('provider', new TextEncoder().encode(`${made.provider}\n`));
    },
    async readFile(file) {
      const entry = entryOf(file);
      const name = path.basename(file);
      if (name === 'generation') {
        const value = entry.generation;
        if (race) {
          race = false;
          entry.generation++;
        }
        return new TextEncoder().encode(`${value}\n`);
      }
      const content = entry.files.get(name);
      if (!content) throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
      return content;
    },
  };
  return { root, fs, entries: () => entries.size, requests, raceOnce: () => (race = true) };
}

/** An SEV-SNP guest whose reports `key` signs; the certificate table holds the key's certificate and the test chain. */
export function snpGuest(
  ca: SnpTestCa,
  key: EndorsementKey,
  kind: 'vcek' | 'vlek' = 'vcek',
  fields: ReportFields = {},
): (reportData: Uint8Array) => TeeAnswer {
  return (reportData) => ({
    provider: 'sev_guest',
    outblob: makeSnpReport({ reportData, signingKey: kind, ...fields }, key),
    auxblob: encodeCertTable({ [kind]: key.cert.der, ask: (kind === 'vcek' ? ca.ask : ca.asvk).der, ark: ca.ark.der }),
  });
}
