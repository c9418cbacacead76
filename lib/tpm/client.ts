/**
 * Our TPM 2.0 client: raw TPM 2.0 commands over a socket to swtpm (DESIGN §9, §11).
 * One TpmClient owns one TPM connection and serializes every command through one queue, because swtpm serves a
 * single connection and answers one command at a time. swtpm has no resource manager, so connecting flushes
 * transient objects and sessions left behind by an earlier owner. Our own code: no maintained JavaScript
 * TPM 2.0 stack exists; the command set is the few commands attestation needs.
 */
import net from 'node:net';
import { UserError } from '../errors.js';
import {
  hashAlgInfo,
  hashAlgName,
  MAX_EVENT_DATA,
  PCR_SELECT_MAX,
  TPM_ALG,
  TPM_CAP,
  TPM_CC,
  TPM_ECC,
  TPM_HR,
  TPM_RC,
  TPM_RH,
  TPM_ST,
  TPM_SU,
  TPMA_OBJECT,
} from './constants.js';
import { TpmReader, TpmWriter } from './marshal.js';
import { encodeTpmPublic, readPcrSelections, readTpmPublic, readTpmSignature, writePcrSelections, type PcrSelection, type TpmEccPublic, type TpmPublic } from './structures.js';

/** The TPM answered with an error code. */
export class TpmError extends UserError {
  constructor(
    readonly command: string,
    readonly rc: number,
  ) {
    super(`TPM2_${command} failed: ${describeRc(rc)}`);
  }
}

export interface TpmDigest {
  hashAlg: number;
  digest: Uint8Array;
}

export interface TpmCapability {
  moreData: boolean;
  capability: number;
  /** TPM_CAP_HANDLES */
  handles?: number[];
  /** TPM_CAP_PCRS: the allocated banks */
  pcrs?: PcrSelection[];
  /** TPM_CAP_TPM_PROPERTIES */
  properties?: Map<number, number>;
  /** The TPMU_CAPABILITIES bytes for other groups. */
  raw: Uint8Array;
}

export interface ConnectOptions {
  /** Flush transient objects and sessions an earlier owner left behind. Default true. */
  flushLeftovers?: boolean;
  /** How long one command may take, in ms (a TPM held by another client never answers). Default 30 s. */
  commandTimeoutMs?: number;
}

/**
 * The attestation key's template: ECC P-256, ECDSA-SHA256, restricted signing, in the endorsement hierarchy.
 * A primary key is derived from the hierarchy seed and the template, so the same TPM yields the same AK every
 * time. The endorsement hierarchy keeps the quotes' reset and restart counters unobfuscated.
 */
export const AK_TEMPLATE: TpmEccPublic = {
  type: TPM_ALG.ECC,
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
    scheme: { scheme: TPM_ALG.ECDSA, hashAlg: TPM_ALG.SHA256 },
    curveId: TPM_ECC.NIST_P256,
    kdf: { scheme: TPM_ALG.NULL },
  },
  unique: { x: new Uint8Array(0), y: new Uint8Array(0) },
};

const HEADER_SIZE = 10;
const MAX_RESPONSE = 64 * 1024;

export class TpmClient {
  private queue: Promise<unknown> = Promise.resolve();
  private pending: { resolve: (b: Uint8Array) => void; reject: (e: Error) => void } | undefined;
  private buffered: Buffer = Buffer.alloc(0);
  private closedError: Error | undefined;
  private ak: Promise<{ handle: number; publicArea: Uint8Array }> | undefined;

  private constructor(
    private readonly socket: net.Socket,
    private readonly commandTimeoutMs: number,
    readonly path: string,
  ) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.onClosed(new TpmConnectionError(`TPM connection ${path}: ${err.message}`, { cause: err })));
    socket.on('close', () => this.onClosed(new TpmConnectionError(`TPM connection ${path} closed`)));
  }

  static async connect(serverSocket: string, options: ConnectOptions = {}): Promise<TpmClient> {
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(serverSocket);
      s.once('connect', () => {
        s.removeListener('error', reject);
        resolve(s);
      });
      s.once('error', (err) =>
        reject(new TpmConnectionError(`Cannot connect to the TPM at ${serverSocket}: ${err.message}`, { cause: err, hint: 'Is its swtpm running?' })),
      );
    });
    const client = new TpmClient(socket, options.commandTimeoutMs ?? 30_000, serverSocket);
    if (options.flushLeftovers ?? true) {
      try {
        await client.flushLeftovers();
      } catch (err) {
        // A TPM that was just reset is not started: it holds nothing to flush.
        if (!(err instanceof TpmError && err.rc === TPM_RC.INITIALIZE)) {
          client.close();
          throw err;
        }
      }
    }
    return client;
  }

  close(): void {
    this.socket.destroy();
  }

  /** Sends one raw command and returns the raw response (whatever its response code), in queue order. */
  transmit(command: Uint8Array): Promise<Uint8Array> {
    const run = () =>
      new Promise<Uint8Array>((resolve, reject) => {
        if (this.closedError) return reject(this.closedError);
        const timer = setTimeout(() => {
          this.pending = undefined;
          reject(new TpmConnectionError(`The TPM at ${this.path} did not answer within ${this.commandTimeoutMs} ms`, { hint: 'Another client may hold its only connection.' }));
          this.socket.destroy();
        }, this.commandTimeoutMs);
        this.pending = {
          resolve: (b) => {
            clearTimeout(timer);
            resolve(b);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        };
        this.socket.write(command);
      });
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private onData(chunk: Buffer): void {
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    if (this.buffered.length < HEADER_SIZE) return;
    const size = this.buffered.readUInt32BE(2);
    if (size < HEADER_SIZE || size > MAX_RESPONSE) {
      this.onClosed(new TpmConnectionError(`The TPM at ${this.path} sent a malformed response (size ${size})`));
      this.socket.destroy();
      return;
    }
    if (this.buffered.length < size) return;
    const response = new Uint8Array(this.buffered.subarray(0, size));
    this.buffered = this.buffered.subarray(size);
    const pending = this.pending;
    this.pending = undefined;
    pending?.resolve(response);
  }

  private onClosed(err: Error): void {
    this.closedError ??= err;
    const pending = this.pending;
    this.pending = undefined;
    pending?.reject(this.closedError);
  }

  /** Builds, sends and checks one command; returns a reader positioned after the response header. */
  private async command(
    name: keyof typeof TPM_CC,
    handles: number[],
    authorized: boolean,
    params: (w: TpmWriter) => void,
  ): Promise<{ r: TpmReader; handles: number[] }> {
    const w = new TpmWriter();
    w.u16(authorized ? TPM_ST.SESSIONS : TPM_ST.NO_SESSIONS).u32(0).u32(TPM_CC[name]);
    for (const h of handles) w.u32(h);
    if (authorized) {
      // One password session with an empty password for the (single) authorized handle.
      w.u32(9).u32(TPM_RH.PW).u16(0).u8(0).u16(0);
    }
    params(w);
    w.patchU32(2, w.length);
    const response = await this.transmit(w.finish());
    const r = new TpmReader(response, `TPM2_${name} response`);
    const tag = r.u16();
    r.u32();
    const rc = r.u32();
    if (rc !== TPM_RC.SUCCESS) throw new TpmError(name, rc);
    const outHandles = name === 'CreatePrimary' ? [r.u32()] : [];
    if (tag === TPM_ST.SESSIONS) r.u32(); // parameterSize; the session area after the parameters is ignored
    return { r, handles: outHandles };
  }

  /** TPM2_Startup; a TPM that is already started is fine. */
  async startup(type: number = TPM_SU.CLEAR): Promise<void> {
    try {
      await this.command('Startup', [], false, (w) => w.u16(type));
      this.ak = undefined; // the TPM was reset: transient objects are gone
    } catch (err) {
      if (!(err instanceof TpmError && err.rc === TPM_RC.INITIALIZE)) throw err;
    }
  }

  async getCapability(capability: number, property: number, propertyCount: number): Promise<TpmCapability> {
    const { r } = await this.command('GetCapability', [], false, (w) => w.u32(capability).u32(property).u32(propertyCount));
    const moreData = r.u8() === 1;
    const cap = r.u32();
    const start = r.offset;
    const out: TpmCapability = { moreData, capability: cap, raw: new Uint8Array(0) };
    if (cap === TPM_CAP.HANDLES) {
      const n = r.u32();
      out.handles = Array.from({ length: n }, () => r.u32());
    } else if (cap === TPM_CAP.PCRS) {
      out.pcrs = readPcrSelections(r);
    } else if (cap === TPM_CAP.TPM_PROPERTIES) {
      const n = r.u32();
      out.properties = new Map(Array.from({ length: n }, () => [r.u32(), r.u32()] as [number, number]));
    }
    out.raw = r.data.slice(start);
    return out;
  }

  /** Every handle in the range that starts at `first` (one handle type). */
  async listHandles(first: number): Promise<number[]> {
    const handles: number[] = [];
    let next = first;
    for (;;) {
      const cap = await this.getCapability(TPM_CAP.HANDLES, next, 64);
      const batch = (cap.handles ?? []).filter((h) => h >>> 24 === first >>> 24);
      handles.push(...batch);
      if (!cap.moreData || batch.length === 0) return handles;
      next = batch[batch.length - 1] + 1;
    }
  }

  /** The allocated PCR banks and the PCRs of each. */
  async pcrBanks(): Promise<PcrSelection[]> {
    const cap = await this.getCapability(TPM_CAP.PCRS, 0, 1);
    return (cap.pcrs ?? []).filter((s) => s.pcrs.length > 0);
  }

  async flushContext(handle: number): Promise<void> {
    await this.command('FlushContext', [], false, (w) => w.u32(handle));
  }

  /** Flushes transient objects and loaded sessions: an earlier owner's leftovers would fill the TPM's few slots. */
  async flushLeftovers(): Promise<number> {
    let flushed = 0;
    for (const first of [TPM_HR.TRANSIENT, TPM_HR.HMAC_SESSION, TPM_HR.POLICY_SESSION]) {
      for (const handle of await this.listHandles(first)) {
        await this.flushContext(handle);
        flushed++;
      }
    }
    return flushed;
  }

  async pcrExtend(index: number, digests: TpmDigest[]): Promise<void> {
    for (const d of digests) {
      const info = hashAlgInfo(d.hashAlg);
      if (!info || info.size !== d.digest.length) {
        throw new UserError(`PCR_Extend: a ${hashAlgName(d.hashAlg)} digest must be ${info?.size ?? '?'} bytes, got ${d.digest.length}`);
      }
    }
    await this.command('PCR_Extend', [pcrHandle(index)], true, (w) => {
      w.u32(digests.length);
      for (const d of digests) w.u16(d.hashAlg).bytes(d.digest);
    });
  }

  /** TPM2_PCR_Event: the TPM hashes `data` with every bank's algorithm and extends each bank. Returns the digests. */
  async pcrEvent(index: number, data: Uint8Array): Promise<TpmDigest[]> {
    if (data.length > MAX_EVENT_DATA) throw new UserError(`PCR_Event data may be at most ${MAX_EVENT_DATA} bytes, got ${data.length}`);
    const { r } = await this.command('PCR_Event', [pcrHandle(index)], true, (w) => w.tpm2b(data));
    const n = r.u32();
    return Array.from({ length: n }, () => {
      const hashAlg = r.u16();
      const size = hashAlgInfo(hashAlg)?.size;
      if (size === undefined) throw new UserError(`PCR_Event answered an unknown hash algorithm ${hashAlgName(hashAlg)}`);
      return { hashAlg, digest: r.bytes(size) };
    });
  }

  /** Reads PCRs of one bank; asks at most 8 PCRs per command, the most a TPM answers at once. */
  async pcrRead(hashAlg: number, indices: number[]): Promise<Map<number, Uint8Array>> {
    const wanted = [...new Set(indices)].sort((a, b) => a - b);
    const out = new Map<number, Uint8Array>();
    for (let i = 0; i < wanted.length; i += PCR_SELECT_MAX) {
      const chunk = wanted.slice(i, i + PCR_SELECT_MAX);
      const { r } = await this.command('PCR_Read', [], false, (w) => writePcrSelections(w, [{ hashAlg, pcrs: chunk }]));
      r.u32(); // pcrUpdateCounter
      const selected = readPcrSelections(r).flatMap((s) => (s.hashAlg === hashAlg ? s.pcrs : []));
      const n = r.u32();
      if (n !== selected.length) throw new UserError(`PCR_Read answered ${n} values for ${selected.length} selected PCRs`);
      for (const index of selected) out.set(index, r.tpm2b(64));
      if (selected.length !== chunk.length) {
        const missing = chunk.filter((x) => !selected.includes(x));
        throw new UserError(`The TPM has no ${hashAlgName(hashAlg)} value for PCR ${missing.join(', ')}`, {
          hint: 'Is that PCR bank allocated on this TPM?',
        });
      }
    }
    return out;
  }

  /** Creates (re-derives) the attestation key: a primary key under the endorsement hierarchy from AK_TEMPLATE. */
  async createAttestationKey(template: TpmPublic = AK_TEMPLATE): Promise<{ handle: number; publicArea: Uint8Array }> {
    const { r, handles } = await this.command('CreatePrimary', [TPM_RH.ENDORSEMENT], true, (w) => {
      w.sized((s) => s.tpm2b(new Uint8Array(0)).tpm2b(new Uint8Array(0))); // inSensitive: empty auth, no data
      w.tpm2b(encodeTpmPublic(template));
      w.tpm2b(new Uint8Array(0)); // outsideInfo
      w.u32(0); // creationPCR: none
    });
    const publicArea = r.tpm2b();
    return { handle: handles[0], publicArea };
  }

  /**
   * The attestation key of this connection: created on first use and kept loaded, so every issuer sharing the
   * connection uses one TPM object slot (swtpm has three). `renew` re-creates it, e.g. after TPM_RC_HANDLE.
   */
  attestationKey(options: { renew?: boolean } = {}): Promise<{ handle: number; publicArea: Uint8Array }> {
    if (options.renew || !this.ak) {
      const previous = this.ak;
      const ak = (async () => {
        // Free the old object's slot if the TPM still holds it (after a reset it is gone: ignore that error).
        const old = await previous?.catch(() => undefined);
        if (old) await this.flushContext(old.handle).catch(() => undefined);
        return this.createAttestationKey();
      })();
      this.ak = ak;
      ak.catch(() => {
        if (this.ak === ak) this.ak = undefined;
      });
    }
    return this.ak;
  }

  async readPublic(handle: number): Promise<{ publicArea: Uint8Array; name: Uint8Array; qualifiedName: Uint8Array }> {
    const { r } = await this.command('ReadPublic', [handle], false, () => {});
    const publicArea = r.tpm2b();
    readTpmPublic(new TpmReader(publicArea, 'TPMT_PUBLIC'));
    return { publicArea, name: r.tpm2b(), qualifiedName: r.tpm2b() };
  }

  /** TPM2_Quote over PCRs of one bank, signed with the key's own scheme. */
  async quote(handle: number, qualifyingData: Uint8Array, hashAlg: number, indices: number[]): Promise<{ quote: Uint8Array; signature: Uint8Array }> {
    const pcrs = [...new Set(indices)].sort((a, b) => a - b);
    const { r } = await this.command('Quote', [handle], true, (w) => {
      w.tpm2b(qualifyingData);
      w.u16(TPM_ALG.NULL); // inScheme: the key's scheme
      writePcrSelections(w, [{ hashAlg, pcrs }]);
    });
    const quote = r.tpm2b();
    const signature = readTpmSignature(r);
    return { quote, signature };
  }
}

export class TpmConnectionError extends UserError {}

function pcrHandle(index: number): number {
  if (!Number.isInteger(index) || index < 0 || index > 23) throw new UserError(`PCR index must be 0..23, got ${index}`);
  return TPM_HR.PCR + index;
}

const RC_NAMES: Record<number, string> = {
  0x100: 'TPM_RC_INITIALIZE (TPM not started)',
  0x101: 'TPM_RC_FAILURE',
  0x143: 'TPM_RC_SEQUENCE',
  0x149: 'TPM_RC_AUTH_MISSING',
  0x14b: 'TPM_RC_COMMAND_CODE (command not supported)',
  0x902: 'TPM_RC_OBJECT_MEMORY (out of object slots)',
  0x903: 'TPM_RC_SESSION_MEMORY (out of session slots)',
  0x908: 'TPM_RC_YIELDED',
  0x922: 'TPM_RC_RETRY',
  0x923: 'TPM_RC_NV_UNAVAILABLE',
  0x921: 'TPM_RC_LOCKOUT',
};

const FMT1_NAMES: Record<number, string> = {
  0x01: 'ASYMMETRIC',
  0x02: 'ATTRIBUTES',
  0x03: 'HASH',
  0x04: 'VALUE',
  0x05: 'HIERARCHY',
  0x07: 'KEY_SIZE',
  0x08: 'MGF',
  0x09: 'MODE',
  0x0a: 'TYPE',
  0x0b: 'HANDLE',
  0x0c: 'KDF',
  0x0d: 'RANGE',
  0x0e: 'AUTH_FAIL',
  0x12: 'SCHEME',
  0x15: 'SIZE',
  0x16: 'SYMMETRIC',
  0x17: 'TAG',
  0x18: 'SELECTOR',
  0x1a: 'INSUFFICIENT',
  0x1b: 'SIGNATURE',
  0x1c: 'KEY',
  0x1d: 'POLICY_FAIL',
  0x1f: 'INTEGRITY',
  0x20: 'TICKET',
  0x21: 'RESERVED_BITS',
  0x22: 'BAD_AUTH',
  0x24: 'POLICY_CC',
  0x25: 'BINDING',
  0x26: 'CURVE',
  0x27: 'ECC_POINT',
};

/** A TPM response code in words (format-one codes name the failing handle, parameter or session). */
export function describeRc(rc: number): string {
  const hex = `0x${rc.toString(16).padStart(3, '0')}`;
  if (rc & 0x80) {
    const code = rc & 0x3f;
    const n = (rc >> 8) & 0xf;
    const where = rc & 0x40 ? `parameter ${n}` : n & 0x8 ? `session ${n & 0x7}` : n ? `handle ${n}` : 'unspecified';
    return `TPM_RC_${FMT1_NAMES[code] ?? `0x${code.toString(16)}`} at ${where} (${hex})`;
  }
  return `${RC_NAMES[rc] ?? 'TPM error'} (${hex})`;
}
