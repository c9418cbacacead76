/** Test helpers around real swtpm processes: one per temp dir, stopped and removed in `after`. */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TPM_ALG, TPMA_OBJECT } from '../../lib/tpm/constants.js';
import { encodeTpmPublic } from '../../lib/tpm/structures.js';
import { startSwtpm, type SwtpmHandle } from '../../lib/tpm/swtpm.js';

const BRIDGE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'tcti-bridge.mjs');

export interface TestTpm {
  swtpm: SwtpmHandle;
  dir: string;
  cleanup(): Promise<void>;
}

/** Starts a swtpm in a fresh temp dir (the dir is removed by cleanup). */
export async function startTestTpm(prefix = 'tpm-test-'): Promise<TestTpm> {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  try {
    const swtpm = await startSwtpm({ stateDir: path.join(dir, 'tpm') });
    return {
      swtpm,
      dir,
      async cleanup() {
        await swtpm.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Runs a tpm2-tools command against the swtpm's unix socket (through the cmd TCTI and our bridge). */
export function tpm2(
  serverSocket: string,
  tool: string,
  args: string[],
  cwd: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      tool,
      args,
      { cwd, env: { ...process.env, TPM2TOOLS_TCTI: `cmd:${process.execPath} ${BRIDGE} ${serverSocket}` } },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

/**
 * tpm2-tools' "serialized" PCR file (what tpm2_quote -o writes and tpm2_checkquote -f reads): the in-memory
 * little-endian TPML_PCR_SELECTION (132 bytes), a UINT32 count, then that many TPML_DIGEST (532 bytes each).
 */
export function tpm2ToolsPcrFile(hashAlg: number, pcrs: Map<number, Uint8Array>): Buffer {
  const indices = [...pcrs.keys()].sort((a, b) => a - b);
  const selection = Buffer.alloc(4 + 16 * 8);
  selection.writeUInt32LE(1, 0);
  selection.writeUInt16LE(hashAlg, 4);
  selection.writeUInt8(3, 6);
  for (const i of indices) selection[7 + (i >> 3)] |= 1 << (i & 7);
  const lists: Buffer[] = [];
  for (let n = 0; n < indices.length; n += 8) {
    const chunk = indices.slice(n, n + 8);
    const list = Buffer.alloc(4 + 8 * 66);
    list.writeUInt32LE(chunk.length, 0);
    chunk.forEach((index, k) => {
      const value = pcrs.get(index)!;
      list.writeUInt16LE(value.length, 4 + k * 66);
      Buffer.from(value).copy(list, 6 + k * 66);
    });
    lists.push(list);
  }
  const count = Buffer.alloc(4);
  count.writeUInt32LE(lists.length);
  return Buffer.concat([selection, count, ...lists]);
}

export const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/** An RSA restricted signing key template: GCE's AK template in NV, and Azure's paravisor AK. */
export const RSA_AK_TEMPLATE = encodeTpmPublic({
  type: TPM_ALG.RSA,
  nameAlg: TPM_ALG.SHA256,
  objectAttributes:
    TPMA_OBJECT.fixedTPM |
    TPMA_OBJECT.fixedParent |
    TPMA_OBJECT.sensitiveDataOrigin |
    TPMA_OBJECT.userWithAuth |
    TPMA_OBJECT.noDA |
    TPMA_OBJECT.restricted |
    TPMA_OBJECT.sign,
  authPolicy: new Uint8Array(0),
  parameters: {
    symmetric: { algorithm: TPM_ALG.NULL },
    scheme: { scheme: TPM_ALG.RSASSA, hashAlg: TPM_ALG.SHA256 },
    keyBits: 2048,
    exponent: 0,
  },
  unique: { n: new Uint8Array(0) },
});
