/**
 * AES-256-XTS per 4 KiB sector, the cipher mode of disk encryption (dm-crypt's aes-xts-plain64): no size
 * expansion and random access, the tweak is the sector's number in the file (little-endian 64-bit, "plain64"),
 * so equal plaintext in two sectors gives different ciphertext. XTS gives confidentiality, not integrity.
 *
 * A sector whose ciphertext is all zeros reads as zeros: sectors never written on the sparse disk file (and
 * sectors discarded with zeros) are "unwritten". A real ciphertext sector is all zeros with probability 2^-32768.
 */
import { createCipheriv, createDecipheriv } from 'node:crypto';
import { isZero, SECTOR_SIZE } from './layout.js';

const ALGORITHM = 'aes-256-xts';

export class SectorCipher {
  constructor(private readonly key: Buffer) {}

  /** Encrypts whole sectors starting at sector `first`. */
  encrypt(first: number, plaintext: Buffer): Buffer {
    return this.run(first, plaintext, (tweak) => createCipheriv(ALGORITHM, this.key, tweak));
  }

  /** Decrypts whole sectors starting at sector `first`; unwritten (all-zero) sectors stay zero. */
  decrypt(first: number, ciphertext: Buffer): Buffer {
    return this.run(first, ciphertext, (tweak) => createDecipheriv(ALGORITHM, this.key, tweak), true);
  }

  private run(first: number, input: Buffer, make: (tweak: Buffer) => { update(b: Buffer): Buffer; final(): Buffer }, keepZero = false): Buffer {
    const output = Buffer.alloc(input.length);
    for (let offset = 0; offset < input.length; offset += SECTOR_SIZE) {
      const sector = input.subarray(offset, offset + SECTOR_SIZE);
      if (keepZero && isZero(sector)) continue;
      const cipher = make(tweak(first + offset / SECTOR_SIZE));
      const out = cipher.update(sector);
      cipher.final();
      out.copy(output, offset);
    }
    return output;
  }
}

function tweak(sector: number): Buffer {
  const iv = Buffer.alloc(16);
  iv.writeBigUInt64LE(BigInt(sector), 0);
  return iv;
}
