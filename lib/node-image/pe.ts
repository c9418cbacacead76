/**
 * A reader for PE/COFF images (the format of UEFI applications: systemd-stub, a unified kernel image, the Linux
 * kernel's EFI stub), as far as measured boot needs it: the COFF header, the optional header fields that
 * Authenticode hashing skips or bounds (CheckSum, the certificate-table directory entry, SizeOfHeaders), and the
 * section table. Layout per the Microsoft PE format specification ("PE Format", learn.microsoft.com); see
 * docs/measured-boot.md for how the sections of a unified kernel image are measured.
 *
 * Our own code: the npm PE parsers (pe-library, pe-parser, ...) are Windows-resource oriented, unmaintained or
 * do not expose raw header offsets, and measured-boot prediction needs exactly those offsets. The input is
 * untrusted (a user's image file): every offset and size is bounds-checked and a bad file is a UserError.
 */
import { UserError } from '../errors.js';

export const PE32_MAGIC = 0x10b;
export const PE32PLUS_MAGIC = 0x20b;
/** Index of the certificate table ("security directory") in the optional header's data directories. */
export const CERTIFICATE_TABLE_INDEX = 4;
export const SECTION_HEADER_SIZE = 40;
/** The most bytes a section may have in memory beyond its raw data (zero-filled by the loader). */
const MAX_ZERO_FILL = 16 * 1024 * 1024;

export interface PeSection {
  /** Name without trailing NULs (at most 8 bytes in the header; longer COFF names are not used by UEFI images). */
  name: string;
  virtualSize: number;
  virtualAddress: number;
  sizeOfRawData: number;
  pointerToRawData: number;
  characteristics: number;
  /** Offset of this section's 40-byte header in the file. */
  headerOffset: number;
}

export interface PeImage {
  /** Offset of the "PE\0\0" signature (e_lfanew). */
  peOffset: number;
  /** Offset of the COFF file header (peOffset + 4). */
  coffOffset: number;
  machine: number;
  numberOfSections: number;
  pointerToSymbolTable: number;
  numberOfSymbols: number;
  sizeOfOptionalHeader: number;
  /** Offset of the optional header. */
  optionalOffset: number;
  magic: typeof PE32_MAGIC | typeof PE32PLUS_MAGIC;
  sectionAlignment: number;
  fileAlignment: number;
  sizeOfImage: number;
  sizeOfHeaders: number;
  /** Offset of the CheckSum field (4 bytes, skipped by Authenticode). */
  checksumOffset: number;
  numberOfRvaAndSizes: number;
  /** Offset of the first data directory entry (8 bytes each: RVA, size). */
  dataDirectoryOffset: number;
  /** Certificate table: a file offset (not an RVA) and size; zero when the image is unsigned or has no entry. */
  certificateTable: { offset: number; size: number };
  /** Offset of the section table. */
  sectionTableOffset: number;
  sections: PeSection[];
}

export class PeFormatError extends UserError {
  constructor(message: string) {
    super(message, { hint: 'The file must be a PE/COFF image (a UEFI application such as a unified kernel image).' });
  }
}

function need(buf: Buffer, offset: number, length: number, what: string): void {
  if (offset < 0 || length < 0 || offset + length > buf.length) {
    throw new PeFormatError(`not a valid PE image: ${what} lies outside the file (${buf.length} bytes)`);
  }
}

/** Parses the headers and section table of a PE/COFF image. Throws PeFormatError for anything else. */
export function parsePe(buf: Buffer): PeImage {
  need(buf, 0, 0x40, 'the DOS header');
  if (buf.readUInt16LE(0) !== 0x5a4d) throw new PeFormatError('not a PE image: no "MZ" DOS header');
  const peOffset = buf.readUInt32LE(0x3c);
  need(buf, peOffset, 24, 'the PE header');
  if (buf.readUInt32LE(peOffset) !== 0x00004550) throw new PeFormatError('not a PE image: no "PE" signature');
  const coffOffset = peOffset + 4;
  const machine = buf.readUInt16LE(coffOffset);
  const numberOfSections = buf.readUInt16LE(coffOffset + 2);
  const pointerToSymbolTable = buf.readUInt32LE(coffOffset + 8);
  const numberOfSymbols = buf.readUInt32LE(coffOffset + 12);
  const sizeOfOptionalHeader = buf.readUInt16LE(coffOffset + 16);
  const optionalOffset = coffOffset + 20;
  need(buf, optionalOffset, sizeOfOptionalHeader, 'the optional header');
  if (sizeOfOptionalHeader < 2) throw new PeFormatError('not a PE image: no optional header');
  const magic = buf.readUInt16LE(optionalOffset);
  if (magic !== PE32_MAGIC && magic !== PE32PLUS_MAGIC) {
    throw new PeFormatError(`not a PE image: unknown optional header magic 0x${magic.toString(16)}`);
  }
  // Offsets of the Windows-specific fields differ between PE32 and PE32+ (ImageBase is 4 vs 8 bytes, and PE32 has
  // BaseOfData); the data directories start at 96 (PE32) or 112 (PE32+).
  const fixed = magic === PE32PLUS_MAGIC ? 112 : 96;
  if (sizeOfOptionalHeader < fixed) throw new PeFormatError('not a PE image: optional header too short');
  const sectionAlignment = buf.readUInt32LE(optionalOffset + 32);
  const fileAlignment = buf.readUInt32LE(optionalOffset + 36);
  const sizeOfImage = buf.readUInt32LE(optionalOffset + 56);
  const sizeOfHeaders = buf.readUInt32LE(optionalOffset + 60);
  const checksumOffset = optionalOffset + 64;
  const numberOfRvaAndSizes = buf.readUInt32LE(optionalOffset + fixed - 4);
  const dataDirectoryOffset = optionalOffset + fixed;
  if (fixed + numberOfRvaAndSizes * 8 > sizeOfOptionalHeader) {
    throw new PeFormatError('not a PE image: data directories exceed the optional header');
  }
  let certificateTable = { offset: 0, size: 0 };
  if (numberOfRvaAndSizes > CERTIFICATE_TABLE_INDEX) {
    const entry = dataDirectoryOffset + CERTIFICATE_TABLE_INDEX * 8;
    certificateTable = { offset: buf.readUInt32LE(entry), size: buf.readUInt32LE(entry + 4) };
    if (certificateTable.size > 0) need(buf, certificateTable.offset, certificateTable.size, 'the certificate table');
  }
  const sectionTableOffset = optionalOffset + sizeOfOptionalHeader;
  need(buf, sectionTableOffset, numberOfSections * SECTION_HEADER_SIZE, 'the section table');
  if (sizeOfHeaders > buf.length) throw new PeFormatError('not a valid PE image: SizeOfHeaders exceeds the file');
  const sections: PeSection[] = [];
  for (let i = 0; i < numberOfSections; i++) {
    const h = sectionTableOffset + i * SECTION_HEADER_SIZE;
    const rawName = buf.subarray(h, h + 8);
    const nul = rawName.indexOf(0);
    const section: PeSection = {
      name: rawName.subarray(0, nul === -1 ? 8 : nul).toString('latin1'),
      virtualSize: buf.readUInt32LE(h + 8),
      virtualAddress: buf.readUInt32LE(h + 12),
      sizeOfRawData: buf.readUInt32LE(h + 16),
      pointerToRawData: buf.readUInt32LE(h + 20),
      characteristics: buf.readUInt32LE(h + 36),
      headerOffset: h,
    };
    // A loader zero-fills a section beyond its raw data; a few MiB of that is .bss, more is a malformed image
    // (and would make us hash gigabytes of zeros).
    if (section.virtualSize > section.sizeOfRawData + MAX_ZERO_FILL) {
      throw new PeFormatError(
        `not a valid PE image: section ${JSON.stringify(section.name)} is ${section.virtualSize} bytes in memory but ${section.sizeOfRawData} in the file`,
      );
    }
    if (section.sizeOfRawData > 0) {
      need(buf, section.pointerToRawData, section.sizeOfRawData, `the data of section ${JSON.stringify(section.name)}`);
    }
    sections.push(section);
  }
  return {
    peOffset,
    coffOffset,
    machine,
    numberOfSections,
    pointerToSymbolTable,
    numberOfSymbols,
    sizeOfOptionalHeader,
    optionalOffset,
    magic,
    sectionAlignment,
    fileAlignment,
    sizeOfImage,
    sizeOfHeaders,
    checksumOffset,
    numberOfRvaAndSizes,
    dataDirectoryOffset,
    certificateTable,
    sectionTableOffset,
    sections,
  };
}

/** Whether the bytes start like a PE image ("MZ" + a "PE\0\0" signature where e_lfanew points). */
export function looksLikePe(buf: Buffer): boolean {
  if (buf.length < 0x40 || buf.readUInt16LE(0) !== 0x5a4d) return false;
  const peOffset = buf.readUInt32LE(0x3c);
  return peOffset + 4 <= buf.length && buf.readUInt32LE(peOffset) === 0x00004550;
}

/**
 * A section's bytes as a loader maps them: the raw data up to VirtualSize, zero-filled when VirtualSize exceeds
 * SizeOfRawData (what systemd-stub hashes for PCR 11 and hands to the kernel).
 */
export function sectionData(buf: Buffer, section: PeSection): Buffer {
  const fromFile = Math.min(section.virtualSize, section.sizeOfRawData);
  const data = buf.subarray(section.pointerToRawData, section.pointerToRawData + fromFile);
  if (fromFile === section.virtualSize) return data;
  return Buffer.concat([data, Buffer.alloc(section.virtualSize - fromFile)]);
}

/** The PE checksum (the algorithm of Windows' imagehlp CheckSumMappedFile), skipping the CheckSum field itself. */
export function peChecksum(buf: Buffer, checksumOffset: number): number {
  let sum = 0;
  const words = Math.floor(buf.length / 2);
  for (let i = 0; i < words; i++) {
    const at = i * 2;
    if (at === checksumOffset || at === checksumOffset + 2) continue;
    sum += buf.readUInt16LE(at);
    sum = (sum & 0xffff) + (sum >>> 16);
  }
  if (buf.length % 2 === 1) {
    sum += buf[buf.length - 1]!;
    sum = (sum & 0xffff) + (sum >>> 16);
  }
  sum = (sum & 0xffff) + (sum >>> 16);
  return (sum + buf.length) >>> 0;
}
