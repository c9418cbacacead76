/**
 * A throwaway PKI for the fake IMDS's attested document (lib/attestation/azure-attested-document.ts), shaped as
 * Azure's: a root, an intermediate CA, and per fake IMDS a leaf for metadata.azure.com whose Authority Information
 * Access names the URL the intermediate is served from (the fake IMDS serves it itself). RSA keys, SHA-256, as
 * Azure's. Tests pass `imdsTestRoots()` as the trust anchor (CloudDeps.azureImdsRoots); no production code path
 * knows this CA. `signAttestedContent` builds the PKCS#7 SignedData (content attached, signed attributes with the
 * message digest) with @peculiar/asn1-cms, as IMDS's is.
 */
import { createHash, createSign, KeyObject, randomBytes, webcrypto } from 'node:crypto';
import {
  Attribute,
  CertificateChoices,
  CertificateSet,
  DigestAlgorithmIdentifiers,
  ContentInfo,
  EncapsulatedContent,
  EncapsulatedContentInfo,
  IssuerAndSerialNumber,
  SignedData,
  SignerIdentifier,
  SignerInfo,
  SignerInfos,
  id_data,
  id_signedData,
} from '@peculiar/asn1-cms';
import { AsnConvert, OctetString } from '@peculiar/asn1-schema';
import { AlgorithmIdentifier, Certificate } from '@peculiar/asn1-x509';
import { oid, set } from '../../../lib/der.js';
import * as x509 from '../../support/x509.js';

const ALGORITHM = {
  name: 'RSASSA-PKCS1-v1_5',
  hash: 'SHA-256',
  publicExponent: new Uint8Array([1, 0, 1]),
  modulusLength: 2048,
} as const;
type Keys = x509.X509CertificateCreateSelfSignedParams['keys'];
const generateKeys = async () =>
  (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as unknown as Keys;
const serialNumber = () => `01${randomBytes(15).toString('hex')}`;
const privateKeyOf = (keys: Keys) => KeyObject.from(keys.privateKey as unknown as webcrypto.CryptoKey);

export interface ImdsSigner {
  certDer: Uint8Array;
  privateKey: KeyObject;
}

/** A CA: its certificate (PEM) and keys. */
interface TestCa {
  cert: x509.X509Certificate;
  keys: Keys;
}

async function makeRoot(name: string): Promise<TestCa> {
  const now = Date.now();
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: [{ CN: [name] }],
    keys,
    signingAlgorithm: ALGORITHM,
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(now + 30 * 86_400_000),
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
  });
  return { cert, keys };
}

async function issue(
  ca: TestCa,
  subject: string,
  options: { isCa: boolean; aiaUrl?: string; notAfter?: Date },
): Promise<TestCa> {
  const now = Date.now();
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    issuer: ca.cert.subject,
    subject: [{ CN: [subject] }],
    publicKey: keys.publicKey,
    signingKey: ca.keys.privateKey,
    signingAlgorithm: ALGORITHM,
    notBefore: new Date(now - 3_600_000),
    notAfter: options.notAfter ?? new Date(now + 7 * 86_400_000),
    extensions: [
      new x509.BasicConstraintsExtension(options.isCa, undefined, true),
      ...(options.isCa ? [] : [new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: subject }])]),
      ...(options.aiaUrl ? [new x509.AuthorityInfoAccessExtension({ caIssuers: options.aiaUrl })] : []),
    ],
  });
  return { cert, keys };
}

const root = await makeRoot('Fake Azure IMDS Test Root');
const intermediate = await issue(root, 'Fake Azure RSA TLS Issuing CA', { isCa: true });

/** The trust anchors of the fake IMDS's documents (CloudDeps.azureImdsRoots in tests). */
export function imdsTestRoots(): string[] {
  return [root.cert.toString('pem')];
}

/** The intermediate CA's certificate, DER: what the leaf's AIA URL serves. */
export function imdsTestIntermediateDer(): Uint8Array {
  return new Uint8Array(intermediate.cert.rawData);
}

/** A metadata.azure.com signer issued by the intermediate, its AIA naming `aiaUrl`. */
export async function makeImdsSigner(aiaUrl?: string, subject = 'metadata.azure.com'): Promise<ImdsSigner> {
  const leaf = await issue(intermediate, subject, { isCa: false, aiaUrl });
  return { certDer: new Uint8Array(leaf.cert.rawData), privateKey: privateKeyOf(leaf.keys) };
}

/** A metadata.azure.com signer of a CA nobody trusts (a re-signed document). */
export async function makeUntrustedImdsSigner(): Promise<ImdsSigner> {
  const other = await makeRoot('Not Microsoft');
  const leaf = await issue(other, 'metadata.azure.com', { isCa: false });
  return { certDer: new Uint8Array(leaf.cert.rawData), privateKey: privateKeyOf(leaf.keys) };
}

/** IMDS's time format, "MM/DD/YY HH:MM:SS -0000". */
export function imdsTime(date: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(date.getUTCMonth() + 1)}/${p(date.getUTCDate())}/${p(date.getUTCFullYear() % 100)} ${p(date.getUTCHours())}:${p(date.getUTCMinutes())}:${p(date.getUTCSeconds())} -0000`;
}

/** The JSON content IMDS signs for a VM. */
export function attestedContent(fields: { nonce: string; vmId: string; subscriptionId: string }): string {
  const now = new Date();
  return JSON.stringify({
    licenseType: '',
    nonce: fields.nonce,
    plan: { name: '', product: '', publisher: '' },
    sku: '',
    subscriptionId: fields.subscriptionId,
    timeStamp: { createdOn: imdsTime(now), expiresOn: imdsTime(new Date(now.getTime() + 6 * 3_600_000)) },
    vmId: fields.vmId,
  });
}

/** The PKCS#7 SignedData of `content` by `signer`, base64 (the document's `signature` field). */
export function signAttestedContent(content: string | Uint8Array, signer: ImdsSigner): string {
  const data = typeof content === 'string' ? Buffer.from(content, 'utf8') : Buffer.from(content);
  const cert = AsnConvert.parse(signer.certDer, Certificate);
  const sha256 = new AlgorithmIdentifier({ algorithm: '2.16.840.1.101.3.4.2.1', parameters: null });
  const attrs = [
    new Attribute({ attrType: '1.2.840.113549.1.9.3', attrValues: [new Uint8Array(oid(id_data)).buffer] }),
    new Attribute({
      attrType: '1.2.840.113549.1.9.4',
      attrValues: [AsnConvert.serialize(new OctetString(createHash('sha256').update(data).digest()))],
    }),
  ];
  const signedAttrs = set(...attrs.map((a) => new Uint8Array(AsnConvert.serialize(a))));
  const signature = createSign('sha256').update(signedAttrs).sign(signer.privateKey);
  const signerInfo = new SignerInfo({
    version: 1,
    sid: new SignerIdentifier({
      issuerAndSerialNumber: new IssuerAndSerialNumber({
        issuer: cert.tbsCertificate.issuer,
        serialNumber: cert.tbsCertificate.serialNumber,
      }),
    }),
    digestAlgorithm: sha256,
    signedAttrs: attrs,
    signatureAlgorithm: new AlgorithmIdentifier({ algorithm: '1.2.840.113549.1.1.1', parameters: null }),
    signature: new OctetString(signature),
  });
  const signedData = new SignedData({
    version: 1,
    digestAlgorithms: new DigestAlgorithmIdentifiers([sha256]),
    encapContentInfo: new EncapsulatedContentInfo({
      eContentType: id_data,
      eContent: new EncapsulatedContent({ single: new OctetString(data) }),
    }),
    certificates: new CertificateSet([new CertificateChoices({ certificate: cert })]),
    signerInfos: new SignerInfos([signerInfo]),
  });
  const info = new ContentInfo({ contentType: id_signedData, content: AsnConvert.serialize(signedData) });
  return Buffer.from(AsnConvert.serialize(info)).toString('base64');
}
