/**
 * Unified kernel images (UKI): one UEFI application = systemd-stub + the kernel (.linux) + the initrd (.initrd) +
 * the kernel command line (.cmdline) + os-release (.osrel) [+ .uname], each a PE section the stub finds at run
 * time, measures into PCR 11 and hands to the kernel (docs/measured-boot.md). `assembleUki` does what systemd's
 * `ukify` does, in-process and deterministically: it appends the sections to Debian's systemd-stub
 * (/usr/lib/systemd/boot/efi/linuxx64.efi.stub) after the stub's last section, each at the next page-aligned
 * virtual address and FileAlignment-aligned file offset, and fixes NumberOfSections, SizeOfImage,
 * SizeOfInitializedData and CheckSum. The stub's COFF symbol table (debug data after its last section) and any
 * signature are dropped, so the image has no bytes outside its headers and sections (Authenticode hashes those
 * oddly). Same inputs, same bytes: nothing depends on time or the host.
 *
 * Our own code: ukify is Python and not in Debian 12's systemd (it arrived in systemd 253), objcopy's
 * --add-section needs hand-picked VMAs, and no npm library writes PE sections.
 */
import { UserError } from '../errors.js';
import {
  parsePe,
  peChecksum,
  sectionData,
  SECTION_HEADER_SIZE,
  CERTIFICATE_TABLE_INDEX,
  type PeSection,
} from './pe.js';

/** The sections systemd-stub 252 knows, in the order it measures them into PCR 11 (.pcrsig is never measured). */
export const STUB_252_MEASURED_SECTIONS = [
  '.linux',
  '.osrel',
  '.cmdline',
  '.initrd',
  '.splash',
  '.dtb',
  '.pcrpkey',
] as const;
/** Sections that make a PE image a UKI (a stub refuses to boot without .linux). */
export const UKI_SECTION_NAMES = [...STUB_252_MEASURED_SECTIONS, '.uname', '.pcrsig'] as const;

export interface UkiInputs {
  linux: Buffer;
  osrel: Buffer | string;
  cmdline: Buffer | string;
  initrd: Buffer;
  uname?: Buffer | string;
}

export interface AssembleUkiOptions {
  /** More sections to append after the standard ones, e.g. `.splash`; names at most 8 bytes. */
  extraSections?: { name: string; data: Buffer | string }[];
}

export interface UkiSection extends PeSection {
  /** The section's bytes up to its VirtualSize (what systemd-stub measures and uses). */
  data: Buffer;
}

const IMAGE_SCN_CNT_INITIALIZED_DATA = 0x00000040;
const IMAGE_SCN_MEM_READ = 0x40000000;
const PAGE = 4096;

function alignUp(value: number, alignment: number): number {
  return Math.ceil(value / alignment) * alignment;
}

function toBuffer(data: Buffer | string): Buffer {
  return typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
}

/**
 * Appends the UKI sections to a systemd-stub and returns the new image. File order follows ukify (small sections
 * first, .initrd then .linux last); the measurement order is the stub's, not the file's.
 */
export function assembleUki(stub: Buffer, sections: UkiInputs, options: AssembleUkiOptions = {}): Buffer {
  const pe = parsePe(stub);
  const existing = pe.sections.map((s) => s.name).filter((n) => (UKI_SECTION_NAMES as readonly string[]).includes(n));
  if (existing.length > 0) {
    throw new UserError(`the stub already has UKI sections (${existing.join(', ')})`, {
      hint: 'Pass the bare systemd-stub (linuxx64.efi.stub), not a unified kernel image.',
    });
  }
  const added: { name: string; data: Buffer }[] = [
    { name: '.osrel', data: toBuffer(sections.osrel) },
    { name: '.cmdline', data: toBuffer(sections.cmdline) },
    ...(sections.uname === undefined ? [] : [{ name: '.uname', data: toBuffer(sections.uname) }]),
    ...(options.extraSections ?? []).map((s) => ({ name: s.name, data: toBuffer(s.data) })),
    { name: '.initrd', data: sections.initrd },
    { name: '.linux', data: sections.linux },
  ];
  for (const s of added) {
    if (Buffer.byteLength(s.name, 'latin1') > 8 || !s.name.startsWith('.')) {
      throw new UserError(`invalid PE section name ${JSON.stringify(s.name)}`, {
        hint: 'Use ".name" of at most 8 bytes.',
      });
    }
  }
  if (sections.linux.length === 0) throw new UserError('the kernel (.linux) is empty');
  if (toBuffer(sections.cmdline).some((b) => b < 0x20 || b >= 0x7f)) {
    throw new UserError(
      'the kernel command line must be printable ASCII without control characters (no trailing newline)',
      {
        hint: 'Only such command lines have a verified PCR 9 prediction (docs/measured-boot.md).',
      },
    );
  }

  // Keep headers and section data; drop the COFF symbol table and any signature after the last section.
  const rawEnd = Math.max(pe.sizeOfHeaders, ...pe.sections.map((s) => s.pointerToRawData + s.sizeOfRawData));
  let image = Buffer.from(stub.subarray(0, rawEnd));
  const fa = pe.fileAlignment || 0x200;
  const tableEnd = pe.sectionTableOffset + (pe.numberOfSections + added.length) * SECTION_HEADER_SIZE;
  const firstRaw = Math.min(...pe.sections.filter((s) => s.sizeOfRawData > 0).map((s) => s.pointerToRawData), rawEnd);
  let sectionsHeaders = pe.sections.map((s) => ({ ...s }));
  let sizeOfHeaders = pe.sizeOfHeaders;
  if (tableEnd > Math.min(sizeOfHeaders, firstRaw)) {
    // Not enough room for the new section headers: grow the headers and move every section's file data.
    const delta = alignUp(tableEnd - Math.min(sizeOfHeaders, firstRaw), fa);
    const firstVa = Math.min(...pe.sections.map((s) => s.virtualAddress));
    if (sizeOfHeaders + delta > firstVa) {
      throw new UserError('the stub has no room for more section headers', {
        hint: "Use Debian's systemd-stub (systemd-boot-efi).",
      });
    }
    image = Buffer.concat([image.subarray(0, firstRaw), Buffer.alloc(delta), image.subarray(firstRaw)]);
    sizeOfHeaders += delta;
    sectionsHeaders = sectionsHeaders.map((s) =>
      s.sizeOfRawData > 0 ? { ...s, pointerToRawData: s.pointerToRawData + delta } : s,
    );
  }

  const sectionAlignment = Math.max(pe.sectionAlignment, PAGE);
  let va = alignUp(
    Math.max(...pe.sections.map((s) => s.virtualAddress + Math.max(s.virtualSize, s.sizeOfRawData))),
    sectionAlignment,
  );
  let fileOffset = alignUp(image.length, fa);
  const chunks: Buffer[] = [image, Buffer.alloc(fileOffset - image.length)];
  const newHeaders: PeSection[] = [];
  let initializedData = 0;
  for (const s of added) {
    const sizeOfRawData = alignUp(s.data.length, fa);
    newHeaders.push({
      name: s.name,
      virtualSize: s.data.length,
      virtualAddress: va,
      sizeOfRawData,
      pointerToRawData: fileOffset,
      characteristics: IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ,
      headerOffset: 0,
    });
    chunks.push(s.data, Buffer.alloc(sizeOfRawData - s.data.length));
    initializedData += sizeOfRawData;
    fileOffset += sizeOfRawData;
    va = alignUp(va + s.data.length, sectionAlignment);
  }
  const out = Buffer.concat(chunks);

  // Section table: rewrite all entries (the moved old ones and the new ones).
  [...sectionsHeaders, ...newHeaders].forEach((s, i) => {
    const h = pe.sectionTableOffset + i * SECTION_HEADER_SIZE;
    if (i >= pe.numberOfSections) {
      out.fill(0, h, h + SECTION_HEADER_SIZE);
      out.write(s.name, h, 8, 'latin1');
      out.writeUInt32LE(s.characteristics, h + 36);
    }
    out.writeUInt32LE(s.virtualSize, h + 8);
    out.writeUInt32LE(s.virtualAddress, h + 12);
    out.writeUInt32LE(s.sizeOfRawData, h + 16);
    out.writeUInt32LE(s.pointerToRawData, h + 20);
  });
  out.writeUInt16LE(pe.numberOfSections + added.length, pe.coffOffset + 2);
  out.writeUInt32LE(0, pe.coffOffset + 8); // PointerToSymbolTable: dropped
  out.writeUInt32LE(0, pe.coffOffset + 12); // NumberOfSymbols
  const opt = pe.optionalOffset;
  out.writeUInt32LE((out.readUInt32LE(opt + 8) + initializedData) >>> 0, opt + 8); // SizeOfInitializedData
  out.writeUInt32LE(va, opt + 56); // SizeOfImage: end of the last section, section-aligned
  out.writeUInt32LE(sizeOfHeaders, opt + 60);
  if (pe.numberOfRvaAndSizes > CERTIFICATE_TABLE_INDEX) {
    out.fill(
      0,
      pe.dataDirectoryOffset + CERTIFICATE_TABLE_INDEX * 8,
      pe.dataDirectoryOffset + CERTIFICATE_TABLE_INDEX * 8 + 8,
    );
  }
  out.writeUInt32LE(peChecksum(out, pe.checksumOffset), pe.checksumOffset);
  return out;
}

/** Every section of a PE image with its data up to VirtualSize, in section-table order. */
export function ukiSections(uki: Buffer): UkiSection[] {
  return parsePe(uki).sections.map((s) => ({ ...s, data: sectionData(uki, s) }));
}

/** Whether the PE image carries a kernel section, i.e. is a UKI rather than a plain EFI application. */
export function isUki(sections: readonly PeSection[]): boolean {
  return sections.some((s) => s.name === '.linux');
}
