/**
 * Big-endian reader and writer for TPM 2.0 wire structures (TPM2B, lists, unions are built on these).
 * Our own: no maintained JavaScript TPM 2.0 marshalling library exists. Every read is bounds-checked and
 * fails with TpmFormatError, because the bytes often come from a remote party.
 */
import { UserError } from '../errors.js';

/** A TPM structure is truncated or malformed. */
export class TpmFormatError extends UserError {}

export class TpmWriter {
  private buf = new Uint8Array(256);
  private view = new DataView(this.buf.buffer);
  private len = 0;

  get length(): number {
    return this.len;
  }

  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  u8(v: number): this {
    this.ensure(1);
    this.view.setUint8(this.len, v);
    this.len += 1;
    return this;
  }

  u16(v: number): this {
    this.ensure(2);
    this.view.setUint16(this.len, v);
    this.len += 2;
    return this;
  }

  u32(v: number): this {
    this.ensure(4);
    this.view.setUint32(this.len, v >>> 0);
    this.len += 4;
    return this;
  }

  u64(v: bigint): this {
    this.ensure(8);
    this.view.setBigUint64(this.len, v);
    this.len += 8;
    return this;
  }

  bytes(data: Uint8Array): this {
    this.ensure(data.length);
    this.buf.set(data, this.len);
    this.len += data.length;
    return this;
  }

  /** TPM2B_*: a 16-bit size, then the bytes. */
  tpm2b(data: Uint8Array): this {
    if (data.length > 0xffff) throw new TpmFormatError(`TPM2B too large: ${data.length} bytes`);
    return this.u16(data.length).bytes(data);
  }

  /** A TPM2B whose content is itself a structure (TPM2B_PUBLIC, TPM2B_SENSITIVE_CREATE). */
  sized(build: (w: TpmWriter) => void): this {
    const inner = new TpmWriter();
    build(inner);
    return this.tpm2b(inner.finish());
  }

  /** Overwrites a 32-bit value already written (a command's size field). */
  patchU32(offset: number, v: number): this {
    this.view.setUint32(offset, v >>> 0);
    return this;
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

export class TpmReader {
  private readonly view: DataView;
  offset = 0;

  constructor(
    readonly data: Uint8Array,
    private readonly what = 'TPM structure',
  ) {
    this.view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  }

  get remaining(): number {
    return this.data.length - this.offset;
  }

  private need(n: number): void {
    if (this.offset + n > this.data.length) {
      throw new TpmFormatError(
        `${this.what} is truncated: needs ${n} more bytes at offset ${this.offset}, has ${this.remaining}`,
      );
    }
  }

  u8(): number {
    this.need(1);
    return this.view.getUint8(this.offset++);
  }

  u16(): number {
    this.need(2);
    const v = this.view.getUint16(this.offset);
    this.offset += 2;
    return v;
  }

  u32(): number {
    this.need(4);
    const v = this.view.getUint32(this.offset);
    this.offset += 4;
    return v;
  }

  u64(): bigint {
    this.need(8);
    const v = this.view.getBigUint64(this.offset);
    this.offset += 8;
    return v;
  }

  bytes(n: number): Uint8Array {
    this.need(n);
    const out = this.data.slice(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }

  tpm2b(max = 0xffff): Uint8Array {
    const size = this.u16();
    if (size > max) throw new TpmFormatError(`${this.what}: TPM2B of ${size} bytes exceeds the limit of ${max}`);
    return this.bytes(size);
  }

  /** Fails unless every byte was consumed: trailing bytes would be unauthenticated data. */
  end(): void {
    if (this.remaining !== 0) throw new TpmFormatError(`${this.what} has ${this.remaining} unexpected trailing bytes`);
  }
}
