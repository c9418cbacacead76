/**
 * What an ELF file needs to run: its program interpreter (PT_INTERP) and the shared libraries it names (DT_NEEDED),
 * read from the file itself (64-bit little-endian, as every x86-64 binary of a node image), so that the image build
 * can prove every program in the initrd finds its libraries inside the initrd (docs/workflows/node-images.md) without
 * running anything as root or in a chroot.
 */

export interface ElfDeps {
  interpreter?: string;
  needed: string[];
  /** DT_RUNPATH / DT_RPATH, as written (may hold $ORIGIN). */
  runpath: string[];
}

/** Whether the bytes start with the ELF magic. */
export function isElf(data: Buffer): boolean {
  return data.length >= 64 && data[0] === 0x7f && data[1] === 0x45 && data[2] === 0x4c && data[3] === 0x46;
}

const PT_INTERP = 3;
const PT_DYNAMIC = 2;
const PT_LOAD = 1;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;
const DT_RPATH = 15n;
const DT_RUNPATH = 29n;

/** The interpreter and needed libraries of a 64-bit little-endian ELF; undefined for other ELF classes. */
export function elfDependencies(data: Buffer): ElfDeps | undefined {
  if (!isElf(data) || data[4] !== 2 || data[5] !== 1) return undefined;
  const phoff = Number(data.readBigUInt64LE(0x20));
  const phentsize = data.readUInt16LE(0x36);
  const phnum = data.readUInt16LE(0x38);
  const loads: Array<{ vaddr: bigint; offset: bigint; filesz: bigint }> = [];
  let interpreter: string | undefined;
  let dynamic: { offset: number; size: number } | undefined;
  for (let i = 0; i < phnum; i++) {
    const p = phoff + i * phentsize;
    const type = data.readUInt32LE(p);
    const offset = data.readBigUInt64LE(p + 8);
    const vaddr = data.readBigUInt64LE(p + 16);
    const filesz = data.readBigUInt64LE(p + 32);
    if (type === PT_LOAD) loads.push({ vaddr, offset, filesz });
    if (type === PT_INTERP)
      interpreter = data
        .subarray(Number(offset), Number(offset + filesz))
        .toString('latin1')
        .replace(/\0.*$/s, '');
    if (type === PT_DYNAMIC) dynamic = { offset: Number(offset), size: Number(filesz) };
  }
  const deps: ElfDeps = { interpreter, needed: [], runpath: [] };
  if (!dynamic) return deps;
  const toOffset = (addr: bigint): number => {
    const seg = loads.find((l) => addr >= l.vaddr && addr < l.vaddr + l.filesz);
    if (!seg) throw new Error('ELF: dynamic string table outside any loaded segment');
    return Number(addr - seg.vaddr + seg.offset);
  };
  const entries: Array<[bigint, bigint]> = [];
  for (let p = dynamic.offset; p + 16 <= dynamic.offset + dynamic.size; p += 16) {
    const tag = data.readBigInt64LE(p);
    if (tag === 0n) break;
    entries.push([tag, data.readBigUInt64LE(p + 8)]);
  }
  const strtab = entries.find(([t]) => t === DT_STRTAB);
  if (!strtab) return deps;
  const base = toOffset(strtab[1]);
  const str = (off: bigint) => {
    const start = base + Number(off);
    return data.subarray(start, data.indexOf(0, start)).toString('latin1');
  };
  for (const [tag, value] of entries) {
    if (tag === DT_NEEDED) deps.needed.push(str(value));
    if (tag === DT_RPATH || tag === DT_RUNPATH) deps.runpath.push(...str(value).split(':').filter(Boolean));
  }
  return deps;
}

/**
 * A 64-bit little-endian ELF without the bytes no loader reads: everything after the last byte a program header
 * covers (the symbol tables and debug information of an unstripped program) and the section header table, whose
 * offset, count and name index become zero. The kernel and ld.so map a program by its program headers alone, so the
 * result runs the same; unlike `strip` it is a function of the bytes only (no tool version can change it). Returns
 * the input itself when there is nothing after the mapped bytes or the section headers lie among them.
 */
export function withoutUnmappedTail(data: Buffer): Buffer {
  if (!isElf(data) || data[4] !== 2 || data[5] !== 1) return data;
  const phoff = Number(data.readBigUInt64LE(0x20));
  const shoff = Number(data.readBigUInt64LE(0x28));
  const phentsize = data.readUInt16LE(0x36);
  const phnum = data.readUInt16LE(0x38);
  let end = phoff + phentsize * phnum;
  for (let i = 0; i < phnum; i++) {
    const p = phoff + i * phentsize;
    end = Math.max(end, Number(data.readBigUInt64LE(p + 8) + data.readBigUInt64LE(p + 32)));
  }
  if (end >= data.length || (shoff !== 0 && shoff < end)) return data;
  const out = Buffer.from(data.subarray(0, end));
  out.writeBigUInt64LE(0n, 0x28);
  out.writeUInt16LE(0, 0x3c);
  out.writeUInt16LE(0, 0x3e);
  return out;
}
