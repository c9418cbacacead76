/**
 * The Authenticode PE image digest ("Windows Authenticode Portable Executable Signature Format", Microsoft), as
 * UEFI firmware computes it when LoadImage measures an EFI application into PCR 4 (EDK2/OVMF:
 * SecurityPkg Tcg2Dxe MeasureBootPeCoff.c): hash the headers up to SizeOfHeaders except the CheckSum field and
 * the certificate-table directory entry; then every section's raw data (SizeOfRawData bytes, sections with raw
 * data sorted by PointerToRawData); then, if the file is longer than the bytes hashed so far, the bytes from that
 * count to the end of the file less the certificate table's size. A signature therefore never changes the digest.
 * docs/measured-boot.md says where PCR 4 uses it.
 *
 * Our own code: no npm package computes Authenticode digests of PE files; tests cross-check against osslsigncode.
 */
import { createHash } from 'node:crypto';
import { CERTIFICATE_TABLE_INDEX, parsePe, type PeImage } from './pe.js';

export function authenticodeDigest(
  buf: Buffer,
  algorithm: 'sha256' | 'sha384' | 'sha1' = 'sha256',
  pe: PeImage = parsePe(buf),
): Buffer {
  const hash = createHash(algorithm);
  const headersEnd = pe.sizeOfHeaders;
  hash.update(buf.subarray(0, pe.checksumOffset));
  if (pe.numberOfRvaAndSizes > CERTIFICATE_TABLE_INDEX) {
    const certEntry = pe.dataDirectoryOffset + CERTIFICATE_TABLE_INDEX * 8;
    hash.update(buf.subarray(pe.checksumOffset + 4, certEntry));
    hash.update(buf.subarray(certEntry + 8, headersEnd));
  } else {
    hash.update(buf.subarray(pe.checksumOffset + 4, headersEnd));
  }
  let sumOfBytesHashed = headersEnd;
  const sections = pe.sections
    .filter((s) => s.sizeOfRawData > 0)
    .sort((a, b) => a.pointerToRawData - b.pointerToRawData);
  for (const s of sections) {
    hash.update(buf.subarray(s.pointerToRawData, s.pointerToRawData + s.sizeOfRawData));
    sumOfBytesHashed += s.sizeOfRawData;
  }
  const certSize = pe.numberOfRvaAndSizes > CERTIFICATE_TABLE_INDEX ? pe.certificateTable.size : 0;
  if (buf.length > sumOfBytesHashed + certSize) {
    hash.update(buf.subarray(sumOfBytesHashed, buf.length - certSize));
  }
  return hash.digest();
}
