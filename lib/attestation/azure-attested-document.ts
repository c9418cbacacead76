/**
 * Azure IMDS's attested document (GET /metadata/attested/document?nonce=…, docs/attestation.md#azure-vm-identity):
 * a PKCS#7 (CMS SignedData) whose content is JSON naming the VM ({ nonce, vmId, subscriptionId, timeStamp, … }),
 * signed by a certificate for metadata.azure.com that chains to Microsoft's public TLS roots. It is what makes the
 * vmId an azure-* node puts in its attestation Microsoft's word rather than only what the node read from IMDS: a
 * join service then asks ARM which VM has that vmId (providers/azure/instance-identity.ts).
 *
 * Verified here, before any field is believed:
 *   - the CMS structure (parsed with @peculiar/asn1-cms): one signer, SHA-256/384/512, content attached;
 *   - the signature over the signed attributes (whose messageDigest must be the content's digest) or, without
 *     signed attributes, over the content; RSA PKCS#1 v1.5 or ECDSA, checked with node:crypto;
 *   - the signer certificate is for metadata.azure.com and chains (intermediates from the document and from the
 *     node, which fetches them from the certificate's Authority Information Access URL as Azure's docs describe)
 *     to one of the pinned roots, each certificate valid when the document was made (its timeStamp.createdOn);
 *   - the nonce is the one derived from the attestation key (azureImdsNonce), so the document was asked for by the
 *     node holding this AK (the quote, which covers instanceInfo, makes it fresh);
 *   - its vmId is the one the attestation claims.
 * The roots are Azure's documented roots for these certificates (Azure Certificate Authority details): DigiCert
 * Global Root G2 and Microsoft RSA Root Certificate Authority 2017, shipped in ./variants/azure-imds-roots.ts.
 */
import { createHash, createVerify, X509Certificate, type KeyObject } from 'node:crypto';
import { ContentInfo, SignedData, id_signedData } from '@peculiar/asn1-cms';
import { AsnConvert, OctetString } from '@peculiar/asn1-schema';
import { set } from '../der.js';
import { parseJson } from '../json.js';
import { readCertificate, verifyCertChain } from './certificate.js';
import { certificatesDer } from './snp/certs.js';
import { AttestationError } from './types.js';

/** What the node carries in instanceInfo.identity.attested. */
export interface AzureAttestedDocumentEvidence {
  /** The document's `signature` field as IMDS returned it: base64 of the DER PKCS#7. */
  signature: string;
  /** Intermediate certificates (PEM) the node fetched from the signer certificate's AIA URL. */
  intermediates?: string[];
}

/** The signed content's fields this verifier reads. */
export interface AzureAttestedContent {
  nonce: string;
  vmId: string;
  subscriptionId?: string;
  createdOn: Date;
}

const OID = {
  sha256: '2.16.840.1.101.3.4.2.1',
  sha384: '2.16.840.1.101.3.4.2.2',
  sha512: '2.16.840.1.101.3.4.2.3',
  messageDigest: '1.2.840.113549.1.9.4',
  contentType: '1.2.840.113549.1.9.3',
  data: '1.2.840.113549.1.7.1',
};
const DIGESTS: Record<string, string> = { [OID.sha256]: 'sha256', [OID.sha384]: 'sha384', [OID.sha512]: 'sha512' };
const SIGNER_NAME = 'metadata.azure.com';

/**
 * The nonce a node asks IMDS for: 10 decimal digits (what IMDS accepts) of SHA-256 over a label and the AK's
 * TPMT_PUBLIC. Fixed per AK, so IMDS's caching of documents does no harm and the verifier can recompute it.
 */
export function azureImdsNonce(akPublic: Uint8Array): string {
  const digest = createHash('sha256').update('constellation azure imds nonce\0').update(akPublic).digest();
  return (digest.readBigUInt64BE(0) % 10_000_000_000n).toString().padStart(10, '0');
}

const fail = (message: string, cause?: unknown): never => {
  throw new AttestationError(`Azure's attested document: ${message}`, undefined, {
    hint: "The node's IMDS document must be signed by Azure's metadata.azure.com certificate for this VM and key.",
    ...(cause === undefined ? {} : { cause }),
  });
};

/** Azure's timeStamp format, "11/28/18 00:16:17 -0000" (MM/DD/YY HH:MM:SS ±ZZZZ); also accepts ISO 8601. */
function parseAzureTime(text: unknown): Date {
  if (typeof text !== 'string') return fail('its content has no timeStamp.createdOn');
  const m = /^(\d{2})\/(\d{2})\/(\d{2}) (\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})$/.exec(text);
  const date = m
    ? new Date(
        Date.UTC(2000 + Number(m[3]), Number(m[1]) - 1, Number(m[2]), Number(m[4]), Number(m[5]), Number(m[6])) -
          (m[7] === '-' ? -1 : 1) * (Number(m[8]) * 60 + Number(m[9])) * 60_000,
      )
    : new Date(text);
  if (Number.isNaN(date.getTime())) fail(`its timeStamp.createdOn "${text.slice(0, 40)}" is not a time`);
  return date;
}

function verifySignature(algorithm: string, key: KeyObject, signed: Uint8Array, signature: Uint8Array): boolean {
  try {
    return createVerify(algorithm).update(signed).verify(key, signature);
  } catch {
    return false;
  }
}

/** The document's certificate for metadata.azure.com (unverified: for fetching its issuers); undefined without one. */
export function attestedDocumentSigner(signature: string): X509Certificate | undefined {
  try {
    for (const der of certificatesOf(signedDataOf(signature))) {
      const cert = new X509Certificate(der);
      if (isSigner(cert)) return cert;
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/** The document's PKCS#7 SignedData (an AttestationError when it is none). */
function signedDataOf(signature: string): SignedData {
  try {
    const info = AsnConvert.parse(Buffer.from(signature, 'base64'), ContentInfo);
    if (info.contentType !== id_signedData) fail('it is not a PKCS#7 SignedData');
    return AsnConvert.parse(info.content, SignedData);
  } catch (cause) {
    if (cause instanceof AttestationError) throw cause;
    return fail('it is not a PKCS#7 SignedData', cause);
  }
}

/** The certificates the SignedData carries, as DER. */
function certificatesOf(signedData: SignedData): Uint8Array[] {
  return (signedData.certificates ?? [])
    .map((c) => c.certificate)
    .filter((c) => c !== undefined)
    .map((c) => new Uint8Array(AsnConvert.serialize(c)));
}

function isSigner(cert: X509Certificate): boolean {
  return cert.subject.split('\n').includes(`CN=${SIGNER_NAME}`) || cert.checkHost(SIGNER_NAME) !== undefined;
}

/**
 * Verifies the document (see the module header) and returns its content. `roots` are the trusted roots (PEM);
 * `expected` the nonce and vmId it must name.
 */
export function verifyAzureAttestedDocument(
  evidence: AzureAttestedDocumentEvidence,
  expected: { nonce: string; vmId: string },
  roots: readonly string[],
): AzureAttestedContent {
  const signedData = signedDataOf(evidence.signature);
  const content = signedData.encapContentInfo.eContent?.single?.buffer;
  if (!content) return fail('it carries no content');
  if (signedData.signerInfos.length !== 1) fail(`it has ${signedData.signerInfos.length} signers, not one`);
  const signer = signedData.signerInfos[0]!;
  const hash = DIGESTS[signer.digestAlgorithm.algorithm];
  if (!hash) fail(`its digest algorithm ${signer.digestAlgorithm.algorithm} is not SHA-256, SHA-384 or SHA-512`);

  // The signer's certificate: the document's certificate for metadata.azure.com.
  const certs = certificatesOf(signedData);
  const leafIndex = certs.findIndex((der) => {
    return isSigner(readCertificate(der, 'a certificate of the attested document').cert);
  });
  if (leafIndex < 0) return fail(`it carries no certificate for ${SIGNER_NAME}`);
  const leafDer = certs[leafIndex]!;
  const leaf = readCertificate(leafDer, `the ${SIGNER_NAME} certificate`);

  // The signature: over the DER SET of the signed attributes (whose messageDigest is the content's digest), else the content.
  const contentBytes = new Uint8Array(content);
  let signedBytes: Uint8Array = contentBytes;
  if (signer.signedAttrs && signer.signedAttrs.length > 0) {
    const digestAttr = signer.signedAttrs.find((a) => a.attrType === OID.messageDigest);
    if (!digestAttr || digestAttr.attrValues.length !== 1) return fail('its signed attributes hold no message digest');
    const claimed = Buffer.from(AsnConvert.parse(digestAttr.attrValues[0]!, OctetString).buffer);
    if (!claimed.equals(createHash(hash!).update(contentBytes).digest()))
      fail('its content is not the content that was signed (the message digest differs)');
    signedBytes = set(...signer.signedAttrs.map((a) => new Uint8Array(AsnConvert.serialize(a))));
  }
  if (!verifySignature(hash!, leaf.publicKey, signedBytes, new Uint8Array(signer.signature.buffer)))
    fail(`its signature is not one of the ${SIGNER_NAME} certificate it carries`);

  // The content, then the chain at the time the document was made.
  let json: Record<string, unknown>;
  try {
    json = parseJson(Buffer.from(contentBytes).toString('utf8')) as Record<string, unknown>;
  } catch (cause) {
    return fail('its content is not JSON', cause);
  }
  if (typeof json !== 'object' || json === null) fail('its content is not a JSON object');
  const createdOn = parseAzureTime((json.timeStamp as { createdOn?: unknown } | undefined)?.createdOn);
  const intermediates = [
    ...certs.filter((_, i) => i !== leafIndex),
    ...(evidence.intermediates ?? []).flatMap((pem) => certificatesDer(pem)),
  ];
  const rootsDer = roots.flatMap((pem) => certificatesDer(pem));
  try {
    verifyCertChain(`the ${SIGNER_NAME} certificate`, leafDer, intermediates, rootsDer, createdOn);
  } catch (cause) {
    fail((cause as Error).message, cause);
  }
  if (json.nonce !== expected.nonce)
    fail(`it names nonce "${String(json.nonce).slice(0, 40)}", not the one derived from this node's attestation key`);
  if (typeof json.vmId !== 'string' || json.vmId.toLowerCase() !== expected.vmId.toLowerCase())
    fail(`it names VM ${String(json.vmId).slice(0, 40)}, not ${expected.vmId}, which the attestation claims`);
  return {
    nonce: json.nonce as string,
    vmId: json.vmId as string,
    ...(typeof json.subscriptionId === 'string' ? { subscriptionId: json.subscriptionId } : {}),
    createdOn,
  };
}
