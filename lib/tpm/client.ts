/**
 * Our TPM 2.0 client: raw TPM 2.0 commands to swtpm's socket or a TPM character device such as /dev/tpmrm0
 * (./transport.ts; docs/design.md#providers, docs/design.md#environment).
 * One TpmClient owns one TPM connection and serializes every command through one queue, because swtpm serves a
 * single connection and answers one command at a time. swtpm has no resource manager, so connecting flushes
 * transient objects and sessions left behind by an earlier owner. Our own code: no maintained JavaScript
 * TPM 2.0 stack exists; the command set is the few commands attestation needs.
 */
import { UserError } from '../errors.js';
import {
  hashAlgInfo,
  hashAlgName,
  MAX_EVENT_DATA,
  PCR_COUNT,
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
  TPMA_NV,
  TPMA_OBJECT,
} from './constants.js';
import { TpmReader, TpmWriter } from './marshal.js';
import { openTpmTransport, TpmConnectionError, type TpmTransport } from './transport.js';
import {
  encodeTpmPublic,
  readPcrSelections,
  readTpmPublic,
  readTpmSignature,
  writePcrSelections,
  type PcrSelection,
  type TpmEccPublic,
  type TpmPublic,
} from './structures.js';

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
  /**
   * Flush transient objects and sessions an earlier owner left behind. Default true, except on the kernel's resource
   * manager (/dev/tpmrm<N>), which shows each open file only its own objects and sessions and flushes them when it
   * is closed: a new connection there has nothing to flush, and three TPM commands fewer at a node's start.
   */
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

/** The kernel's TPM resource manager devices. */
const RESOURCE_MANAGER = /^\/dev\/tpmrm\d+$/;

export class TpmClient {
  private queue: Promise<unknown> = Promise.resolve();
  private closedError: Error | undefined;
  private ak: Promise<{ handle: number; publicArea: Uint8Array }> | undefined;
  private akSource: AkSource = { kind: 'template', template: AK_TEMPLATE };

  private constructor(
    private readonly transport: TpmTransport,
    private readonly commandTimeoutMs: number,
  ) {}

  /** The path of the TPM (socket or device) this client talks to. */
  get path(): string {
    return this.transport.path;
  }

  /** Connects to the TPM at `path`: swtpm's unix socket, or a TPM character device such as /dev/tpmrm0. */
  static async connect(path: string, options: ConnectOptions = {}): Promise<TpmClient> {
    const client = new TpmClient(await openTpmTransport(path), options.commandTimeoutMs ?? 30_000);
    if (options.flushLeftovers ?? !RESOURCE_MANAGER.test(path)) {
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
    this.transport.close();
  }

  /** Sends one raw command and returns the raw response (whatever its response code), in queue order. */
  transmit(command: Uint8Array): Promise<Uint8Array> {
    const run = () =>
      new Promise<Uint8Array>((resolve, reject) => {
        if (this.closedError) return reject(this.closedError);
        const timer = setTimeout(() => {
          this.closedError = new TpmConnectionError(
            `The TPM at ${this.path} did not answer within ${this.commandTimeoutMs} ms`,
            { hint: 'Another client may hold its only connection.' },
          );
          reject(this.closedError);
          this.transport.close();
        }, this.commandTimeoutMs);
        this.transport.exchange(command).then(
          (response) => {
            clearTimeout(timer);
            resolve(response);
          },
          (err: Error) => {
            clearTimeout(timer);
            reject(err);
          },
        );
      });
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  /** Builds, sends and checks one command; returns a reader positioned after the response header. */
  private async command(
    name: keyof typeof TPM_CC,
    handles: number[],
    authorized: boolean,
    params: (w: TpmWriter) => void,
  ): Promise<{ r: TpmReader; handles: number[] }> {
    const w = new TpmWriter();
    w.u16(authorized ? TPM_ST.SESSIONS : TPM_ST.NO_SESSIONS)
      .u32(0)
      .u32(TPM_CC[name]);
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
    const { r } = await this.command('GetCapability', [], false, (w) =>
      w.u32(capability).u32(property).u32(propertyCount),
    );
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

  /**
   * TPM2_PCR_Allocate with the platform's (empty) authorization: of the banks the TPM implements, those of `hashAlgs`
   * get all 24 PCRs and the others none. The allocation is stored at once and takes effect at the next TPM reset.
   */
  async pcrAllocate(hashAlgs: number[]): Promise<void> {
    const implemented = (await this.getCapability(TPM_CAP.PCRS, 0, 1)).pcrs ?? [];
    const missing = hashAlgs.filter((alg) => !implemented.some((b) => b.hashAlg === alg));
    if (missing.length > 0) {
      throw new UserError(
        `PCR_Allocate: the TPM has no ${missing.map(hashAlgName).join(', ')} PCR bank (it has ${implemented.map((b) => hashAlgName(b.hashAlg)).join(', ')})`,
      );
    }
    const all = Array.from({ length: PCR_COUNT }, (_, i) => i);
    const { r } = await this.command('PCR_Allocate', [TPM_RH.PLATFORM], true, (w) =>
      writePcrSelections(
        w,
        implemented.map((b) => ({ hashAlg: b.hashAlg, pcrs: hashAlgs.includes(b.hashAlg) ? all : [] })),
      ),
    );
    if (r.u8() !== 1) throw new UserError('PCR_Allocate: the TPM did not accept the PCR allocation');
  }

  /** TPM2_Shutdown: the TPM saves what it must before it loses power. */
  async shutdown(type: number = TPM_SU.CLEAR): Promise<void> {
    await this.command('Shutdown', [], false, (w) => w.u16(type));
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
        throw new UserError(
          `PCR_Extend: a ${hashAlgName(d.hashAlg)} digest must be ${info?.size ?? '?'} bytes, got ${d.digest.length}`,
        );
      }
    }
    await this.command('PCR_Extend', [pcrHandle(index)], true, (w) => {
      w.u32(digests.length);
      for (const d of digests) w.u16(d.hashAlg).bytes(d.digest);
    });
  }

  /** TPM2_PCR_Event: the TPM hashes `data` with every bank's algorithm and extends each bank. Returns the digests. */
  async pcrEvent(index: number, data: Uint8Array): Promise<TpmDigest[]> {
    if (data.length > MAX_EVENT_DATA)
      throw new UserError(`PCR_Event data may be at most ${MAX_EVENT_DATA} bytes, got ${data.length}`);
    const { r } = await this.command('PCR_Event', [pcrHandle(index)], true, (w) => w.tpm2b(data));
    const n = r.u32();
    return Array.from({ length: n }, () => {
      const hashAlg = r.u16();
      const size = hashAlgInfo(hashAlg)?.size;
      if (size === undefined)
        throw new UserError(`PCR_Event answered an unknown hash algorithm ${hashAlgName(hashAlg)}`);
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
      if (n !== selected.length)
        throw new UserError(`PCR_Read answered ${n} values for ${selected.length} selected PCRs`);
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

  /** Creates (re-derives) a primary key under the endorsement hierarchy from a template (default AK_TEMPLATE). */
  async createAttestationKey(
    template: TpmPublic | Uint8Array = AK_TEMPLATE,
  ): Promise<{ handle: number; publicArea: Uint8Array }> {
    const encoded = template instanceof Uint8Array ? template : encodeTpmPublic(template);
    const { r, handles } = await this.command('CreatePrimary', [TPM_RH.ENDORSEMENT], true, (w) => {
      w.sized((s) => s.tpm2b(new Uint8Array(0)).tpm2b(new Uint8Array(0))); // inSensitive: empty auth, no data
      w.tpm2b(encoded);
      w.tpm2b(new Uint8Array(0)); // outsideInfo
      w.u32(0); // creationPCR: none
    });
    const publicArea = r.tpm2b();
    return { handle: handles[0], publicArea };
  }

  /**
   * Which key attestationKey() returns: by default a primary key from AK_TEMPLATE; on clouds the platform's own AK
   * (GCE: a primary key from the template in its vTPM's NV; Azure: the paravisor's persistent key). Forgets the
   * key in use.
   */
  useAttestationKey(source: AkSource): void {
    this.akSource = source;
    this.ak = undefined;
  }

  /**
   * The attestation key of this connection: created on first use and kept loaded, so every issuer sharing the
   * connection uses one TPM object slot (swtpm has three). `renew` re-creates it, e.g. after TPM_RC_HANDLE.
   */
  attestationKey(options: { renew?: boolean } = {}): Promise<{ handle: number; publicArea: Uint8Array }> {
    if (options.renew || !this.ak) {
      const previous = this.ak;
      const source = this.akSource;
      const ak = (async () => {
        if (source.kind === 'persistent')
          return { handle: source.handle, publicArea: (await this.readPublic(source.handle)).publicArea };
        // Free the old object's slot if the TPM still holds it (after a reset it is gone: ignore that error).
        const old = await previous?.catch(() => undefined);
        if (old && old.handle >>> 24 === TPM_HR.TRANSIENT >>> 24)
          await this.flushContext(old.handle).catch(() => undefined);
        return this.createAttestationKey(source.template);
      })();
      this.ak = ak;
      ak.catch(() => {
        if (this.ak === ak) this.ak = undefined;
      });
    }
    return this.ak;
  }

  /** The public area of an NV index: its attributes and data size. */
  async nvReadPublic(index: number): Promise<NvPublic> {
    const { r } = await this.command('NV_ReadPublic', [index], false, () => {});
    const area = new TpmReader(r.tpm2b(), 'TPMS_NV_PUBLIC');
    return {
      index: area.u32(),
      nameAlg: area.u16(),
      attributes: area.u32(),
      authPolicy: area.tpm2b(),
      dataSize: area.u16(),
    };
  }

  /** Reads an NV index whole (or `size` bytes), in chunks; authorized as owner, platform or the index as its attributes allow. */
  async nvRead(index: number, size?: number): Promise<Uint8Array> {
    const pub = await this.nvReadPublic(index);
    const auth =
      pub.attributes & TPMA_NV.AUTHREAD ? index : pub.attributes & TPMA_NV.OWNERREAD ? TPM_RH.OWNER : TPM_RH.PLATFORM;
    const total = Math.min(size ?? pub.dataSize, pub.dataSize);
    const out = new Uint8Array(total);
    for (let offset = 0; offset < total; offset += NV_CHUNK) {
      const n = Math.min(NV_CHUNK, total - offset);
      const { r } = await this.command('NV_Read', [auth, index], true, (w) => w.u16(n).u16(offset));
      out.set(r.tpm2b(NV_CHUNK), offset);
    }
    return out;
  }

  /** Defines an NV index readable and writable by the owner and with its own (empty) auth. Provisioning, tests. */
  async nvDefine(index: number, dataSize: number): Promise<void> {
    const attributes = TPMA_NV.OWNERWRITE | TPMA_NV.AUTHWRITE | TPMA_NV.OWNERREAD | TPMA_NV.AUTHREAD | TPMA_NV.NO_DA;
    await this.command('NV_DefineSpace', [TPM_RH.OWNER], true, (w) => {
      w.tpm2b(new Uint8Array(0));
      w.sized((s) => s.u32(index).u16(TPM_ALG.SHA256).u32(attributes).tpm2b(new Uint8Array(0)).u16(dataSize));
    });
  }

  async nvUndefine(index: number): Promise<void> {
    await this.command('NV_UndefineSpace', [TPM_RH.OWNER, index], true, () => {});
  }

  /** Writes `data` into an NV index at `offset`, in chunks, authorized as owner. */
  async nvWrite(index: number, data: Uint8Array, offset = 0): Promise<void> {
    for (let at = 0; at < data.length; at += NV_CHUNK) {
      const chunk = data.subarray(at, at + NV_CHUNK);
      await this.command('NV_Write', [TPM_RH.OWNER, index], true, (w) => w.tpm2b(chunk).u16(offset + at));
    }
  }

  /** Makes a loaded key persistent at `persistentHandle` (owner hierarchy). Provisioning, tests. */
  async evictControl(objectHandle: number, persistentHandle: number): Promise<void> {
    await this.command('EvictControl', [TPM_RH.OWNER, objectHandle], true, (w) => w.u32(persistentHandle));
  }

  async readPublic(handle: number): Promise<{ publicArea: Uint8Array; name: Uint8Array; qualifiedName: Uint8Array }> {
    const { r } = await this.command('ReadPublic', [handle], false, () => {});
    const publicArea = r.tpm2b();
    readTpmPublic(new TpmReader(publicArea, 'TPMT_PUBLIC'));
    return { publicArea, name: r.tpm2b(), qualifiedName: r.tpm2b() };
  }

  /** TPM2_Quote over PCRs of one bank, signed with the key's own scheme. */
  async quote(
    handle: number,
    qualifyingData: Uint8Array,
    hashAlg: number,
    indices: number[],
  ): Promise<{ quote: Uint8Array; signature: Uint8Array }> {
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

export { TpmConnectionError } from './transport.js';

/** Where the attestation key comes from: a primary key made from a template, or a key the platform made persistent. */
export type AkSource = { kind: 'template'; template: TpmPublic | Uint8Array } | { kind: 'persistent'; handle: number };

export interface NvPublic {
  index: number;
  nameAlg: number;
  attributes: number;
  authPolicy: Uint8Array;
  dataSize: number;
}

/** Bytes per NV_Read/NV_Write: at most what every TPM accepts (TPM_PT_NV_BUFFER_MAX is at least 1024 in practice). */
const NV_CHUNK = 1024;

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
