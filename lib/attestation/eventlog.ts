/**
 * The TCG PC Client crypto-agile event log (TCG PC Client Platform Firmware Profile, §10): a parser and a
 * replayer that recomputes, per PCR bank, the PCR values the logged events produce. Comparing replayed values
 * with quoted ones shows which event explains a PCR. Our own: no maintained JavaScript parser exists.
 * The log is untrusted input: sizes are bounded and every read is checked.
 */
import { createHash } from 'node:crypto';
import { hashAlgInfo, hashAlgName } from '../tpm/constants.js';
import { AttestationError } from './types.js';

export const EV_NO_ACTION = 0x00000003;
const SPEC_ID_SIGNATURE = 'Spec ID Event03\0';
const STARTUP_LOCALITY_SIGNATURE = 'StartupLocality\0';
const MAX_EVENT_SIZE = 16 * 1024 * 1024;

export interface SpecIdEvent {
  platformClass: number;
  specVersion: string;
  uintnSize: number;
  /** The banks the log carries digests for, with their digest sizes. */
  algorithms: { algorithmId: number; digestSize: number }[];
}

export interface TcgEvent {
  pcrIndex: number;
  eventType: number;
  /** hashAlg -> digest of this event in that bank. */
  digests: Map<number, Uint8Array>;
  data: Uint8Array;
}

export interface EventLog {
  specId: SpecIdEvent;
  /** Every event after the Spec ID header, in log order. */
  events: TcgEvent[];
}

export class EventLogError extends AttestationError {}

class LeReader {
  private readonly view: DataView;
  offset = 0;
  constructor(readonly data: Uint8Array) {
    this.view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  }
  get remaining(): number {
    return this.data.length - this.offset;
  }
  private need(n: number): void {
    if (n > this.remaining)
      throw new EventLogError(
        `The event log is truncated at byte ${this.offset} (needs ${n} bytes, has ${this.remaining})`,
      );
  }
  u8(): number {
    this.need(1);
    return this.view.getUint8(this.offset++);
  }
  u16(): number {
    this.need(2);
    const v = this.view.getUint16(this.offset, true);
    this.offset += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = this.view.getUint32(this.offset, true);
    this.offset += 4;
    return v;
  }
  bytes(n: number): Uint8Array {
    this.need(n);
    return this.data.subarray(this.offset, (this.offset += n));
  }
}

export function parseEventLog(log: Uint8Array): EventLog {
  const r = new LeReader(log);
  // The first event is in the SHA-1 (TCG 1.2) format and carries the Spec ID header naming the banks.
  const pcrIndex = r.u32();
  const eventType = r.u32();
  r.bytes(20);
  const size = r.u32();
  const header = new LeReader(r.bytes(boundedSize(size)));
  if (pcrIndex !== 0 || eventType !== EV_NO_ACTION || text(header.bytes(16)) !== SPEC_ID_SIGNATURE) {
    throw new EventLogError(
      'The event log does not start with a "Spec ID Event03" header: not a crypto-agile TCG event log',
    );
  }
  const platformClass = header.u32();
  const minor = header.u8();
  const major = header.u8();
  const errata = header.u8();
  const uintnSize = header.u8();
  const count = header.u32();
  if (count === 0 || count > 16) throw new EventLogError(`The event log header lists ${count} algorithms`);
  const algorithms = Array.from({ length: count }, () => ({ algorithmId: header.u16(), digestSize: header.u16() }));
  const specId: SpecIdEvent = { platformClass, specVersion: `${major}.${minor}.${errata}`, uintnSize, algorithms };
  const sizes = new Map(algorithms.map((a) => [a.algorithmId, a.digestSize]));

  const events: TcgEvent[] = [];
  const padding = paddingStart(log);
  while (r.remaining > 0) {
    if (r.offset >= padding) break; // firmware buffers are often padded to their size
    const pcr = r.u32();
    const type = r.u32();
    const n = r.u32();
    if (n > count)
      throw new EventLogError(`Event ${events.length + 1} has ${n} digests, the header lists ${count} banks`);
    const digests = new Map<number, Uint8Array>();
    for (let i = 0; i < n; i++) {
      const alg = r.u16();
      const digestSize = sizes.get(alg);
      if (digestSize === undefined)
        throw new EventLogError(
          `Event ${events.length + 1} has a digest of ${hashAlgName(alg)}, which the header does not list`,
        );
      digests.set(alg, r.bytes(digestSize));
    }
    const data = r.bytes(boundedSize(r.u32()));
    events.push({ pcrIndex: pcr, eventType: type, digests, data });
  }
  return { specId, events };
}

/**
 * The PCR values the log produces, per bank (hashAlg -> PCR index -> value), for every PCR the log touches.
 * Starts from reset values (zero; all ones for PCRs 17–22; PCR 0's locality from a StartupLocality event) and
 * extends every event but EV_NO_ACTION. Banks whose hash we do not know are left out.
 */
export function replayEventLog(log: Uint8Array | EventLog): Map<number, Map<number, Uint8Array>> {
  const parsed = log instanceof Uint8Array ? parseEventLog(log) : log;
  const banks = new Map<number, Map<number, Uint8Array>>();
  for (const { algorithmId, digestSize } of parsed.specId.algorithms) {
    const info = hashAlgInfo(algorithmId);
    if (info && info.size === digestSize) banks.set(algorithmId, new Map());
  }
  const resetValue = (size: number, pcr: number) => new Uint8Array(size).fill(pcr >= 17 && pcr <= 22 ? 0xff : 0);

  for (const event of parsed.events) {
    if (event.pcrIndex > 23) throw new EventLogError(`An event extends PCR ${event.pcrIndex}, which does not exist`);
    if (event.eventType === EV_NO_ACTION) {
      if (
        event.pcrIndex === 0 &&
        event.data.length >= 17 &&
        text(event.data.subarray(0, 16)) === STARTUP_LOCALITY_SIGNATURE
      ) {
        for (const [alg, pcrs] of banks) {
          if (pcrs.has(0)) continue; // only before the first measurement into PCR 0
          const value = resetValue(hashAlgInfo(alg)!.size, 0);
          value[value.length - 1] = event.data[16];
          pcrs.set(0, value);
        }
      }
      continue;
    }
    for (const [alg, pcrs] of banks) {
      const digest = event.digests.get(alg);
      if (!digest) throw new EventLogError(`An event for PCR ${event.pcrIndex} lacks its ${hashAlgName(alg)} digest`);
      const info = hashAlgInfo(alg)!;
      const old = pcrs.get(event.pcrIndex) ?? resetValue(info.size, event.pcrIndex);
      pcrs.set(event.pcrIndex, new Uint8Array(createHash(info.name).update(old).update(digest).digest()));
    }
  }
  return banks;
}

function boundedSize(size: number): number {
  if (size > MAX_EVENT_SIZE) throw new EventLogError(`An event claims ${size} bytes of data`);
  return size;
}

/**
 * Where the log's trailing padding starts: the first offset from which every byte to the end is 0x00, or every
 * one is 0xff (the log's length when it ends in neither). Found once, from the end, so that checking "is the
 * rest padding?" before each event costs nothing; rescanning the rest per event made a 256 KiB log take 34 s.
 */
function paddingStart(log: Uint8Array): number {
  const last = log[log.length - 1];
  if (last !== 0 && last !== 0xff) return log.length;
  let start = log.length;
  while (start > 0 && log[start - 1] === last) start--;
  return start;
}

function text(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('latin1');
}
