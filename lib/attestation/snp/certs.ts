/**
 * The certificates around an SEV-SNP report: reading PEM/DER input, AMD's VCEK/VLEK extensions (TCB,
 * hardware id, product name), and the chain VCEK/VLEK → ASK/ASVK → ARK, which is trusted only when its ARK is
 * byte for byte one of the roots we ship (or the caller's roots in tests).
 */
import { createHash, type X509Certificate, type KeyObject } from 'node:crypto';
import { readCertificate, signedBy, type ReadCertificate } from '../certificate.js';
import { AMD_CHAINS } from './amd-roots.js';
import { certificateFields, children, decodeOid, decodeSmallInteger, expectTag, readElement, TAG } from '../../der.js';
import { SNP_PRODUCTS, type SnpProduct, type SnpSigningKey, type TcbVersion } from './report.js';

/** AMD's VCEK/VLEK extension OIDs (AMD "VCEK certificate and KDS interface specification", 57230). */
export const AMD_OID = {
  structVersion: '1.3.6.1.4.1.3704.1.1',
  productName: '1.3.6.1.4.1.3704.1.2',
  blSpl: '1.3.6.1.4.1.3704.1.3.1',
  teeSpl: '1.3.6.1.4.1.3704.1.3.2',
  snpSpl: '1.3.6.1.4.1.3704.1.3.3',
  ucodeSpl: '1.3.6.1.4.1.3704.1.3.8',
  fmcSpl: '1.3.6.1.4.1.3704.1.3.9',
  hwId: '1.3.6.1.4.1.3704.1.4',
  cspId: '1.3.6.1.4.1.3704.1.5',
} as const;

/** Trust anchors per product: the ARKs (and for convenience the full shipped chains). */
export type AmdRoots = Partial<Record<SnpProduct, { vcek: string; vlek: string }>>;
export const AMD_ROOTS: AmdRoots = AMD_CHAINS;

export interface EndorsementKeyInfo {
  /** CN=SEV-VCEK or CN=SEV-VLEK. */
  kind: SnpSigningKey | undefined;
  productName?: string;
  tcb: Partial<TcbVersion>;
  hwId?: Uint8Array;
  cspId?: string;
}

const PEM_BEGIN = '-----BEGIN CERTIFICATE-----';
const PEM_END = '-----END CERTIFICATE-----';

/**
 * The DER bytes of each certificate in a PEM string (or of one DER certificate). One forward scan with indexOf,
 * so the time is linear in the input whatever it holds (a lazy regex over many BEGIN lines without an END took
 * seconds per MiB). Text between blocks is ignored; a BEGIN without an END ends the scan.
 */
export function certificatesDer(input: string | Uint8Array): Uint8Array[] {
  if (typeof input !== 'string') {
    const text = Buffer.from(input.subarray(0, 64)).toString('latin1');
    if (!text.includes('-----BEGIN')) return [input];
    input = Buffer.from(input).toString('utf8');
  }
  const out: Uint8Array[] = [];
  for (let at = input.indexOf(PEM_BEGIN); at !== -1;) {
    const bodyStart = at + PEM_BEGIN.length;
    const end = input.indexOf(PEM_END, bodyStart);
    if (end === -1) break;
    // A BEGIN inside the body means the earlier block had no END: the block starts at the last BEGIN.
    const lastBegin = input.lastIndexOf(PEM_BEGIN, end);
    const body = input.slice(lastBegin + PEM_BEGIN.length, end).replace(/\s+/g, '');
    out.push(new Uint8Array(Buffer.from(body, 'base64')));
    at = input.indexOf(PEM_BEGIN, end + PEM_END.length);
  }
  return out;
}

export function commonName(cert: X509Certificate, field: 'subject' | 'issuer' = 'subject'): string | undefined {
  for (const line of cert[field].split('\n')) if (line.startsWith('CN=')) return line.slice(3);
  return undefined;
}

export function sha256Hex(...parts: Uint8Array[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update(Buffer.of(0));
  return h.digest('hex');
}

/**
 * The extensions of a DER certificate. Bytes after the certificate are ignored, as node:crypto's
 * X509Certificate (which parsed the same bytes first) ignores them.
 */
function extensionsOf(der: Uint8Array): Map<string, Buffer> {
  return certificateFields(readElement(der)).extensions;
}

/** An extension whose value is a DER string (AMD's productName and cspId are IA5Strings). */
function textExtension(extensions: Map<string, Buffer>, oid: string): string | undefined {
  const value = extensions.get(oid);
  return value === undefined ? undefined : readElement(value).content.toString('latin1');
}

/** The productName extension of a VCEK ("Milan-B0"), if it has one. */
export function endorsementKeyProductName(der: Uint8Array): string | undefined {
  return textExtension(extensionsOf(der), AMD_OID.productName);
}

/** Reads AMD's extensions of a VCEK or VLEK certificate. */
export function readEndorsementKeyInfo(cert: X509Certificate, der: Uint8Array): EndorsementKeyInfo {
  const extensions = extensionsOf(der);
  const tcb: Partial<TcbVersion> = {};
  const set = (key: keyof TcbVersion, oid: string) => {
    const value = extensions.get(oid);
    if (value !== undefined) tcb[key] = decodeSmallInteger(readElement(value));
  };
  set('bootloader', AMD_OID.blSpl);
  set('tee', AMD_OID.teeSpl);
  set('snp', AMD_OID.snpSpl);
  set('microcode', AMD_OID.ucodeSpl);
  set('fmc', AMD_OID.fmcSpl);
  const cn = commonName(cert);
  const hwId = extensions.get(AMD_OID.hwId);
  return {
    kind: cn === 'SEV-VCEK' ? 'vcek' : cn === 'SEV-VLEK' ? 'vlek' : undefined,
    productName: textExtension(extensions, AMD_OID.productName),
    tcb,
    hwId: hwId && Uint8Array.from(hwId),
    cspId: textExtension(extensions, AMD_OID.cspId),
  };
}

/** The product named by an ASK/ASVK/ARK common name (SEV-Milan, SEV-VLEK-Genoa, ARK-Turin). */
export function productFromCommonName(cn: string | undefined): SnpProduct | undefined {
  const name = cn?.replace(/^(SEV-VLEK-|SEV-|ARK-)/, '');
  return SNP_PRODUCTS.find((p) => p === name);
}

/** The product named by a VCEK's productName extension ("Milan-B0", "Genoa-B1", "Turin"). */
export function productFromProductName(name: string | undefined): SnpProduct | undefined {
  return SNP_PRODUCTS.find((p) => name === p || name?.startsWith(`${p}-`));
}

/**
 * The certificates of the trusted chains (AMD's ASKs, ASVKs and ARKs we ship, or a test's), decoded and parsed once
 * per roots object: they are constants, and parsing a 4096-bit RSA certificate costs about a third of a cold
 * verification. Only parsing is kept; every signature is still checked on every cold verification.
 */
interface Anchors {
  /** The ARK of each product. */
  arks: Map<SnpProduct, Uint8Array>;
  /** Parsed shipped certificates by their DER (hex). */
  parsed: Map<string, ReadCertificate>;
}
const anchorsByRoots = new WeakMap<AmdRoots, Anchors>();

function anchorsOf(roots: AmdRoots): Anchors {
  let anchors = anchorsByRoots.get(roots);
  if (!anchors) {
    anchors = { arks: new Map(), parsed: new Map() };
    for (const p of SNP_PRODUCTS) {
      const chains = roots[p];
      if (!chains) continue;
      const vcekChain = certificatesDer(chains.vcek);
      if (vcekChain[1]) anchors.arks.set(p, vcekChain[1]);
      for (const der of [...vcekChain, ...certificatesDer(chains.vlek)]) {
        try {
          anchors.parsed.set(Buffer.from(der).toString('hex'), readCertificate(der, 'a shipped AMD certificate'));
        } catch {
          // A root that does not parse is never matched; the chain's own certificate is parsed (and refused) instead.
        }
      }
    }
    anchorsByRoots.set(roots, anchors);
  }
  return anchors;
}

export interface VerifiedChain {
  product: SnpProduct;
  kind: SnpSigningKey;
  key: KeyObject;
  info: EndorsementKeyInfo;
  /** Validity windows of the three certificates, checked on every use (the cache does not outlive them). */
  validity: { name: string; notBefore: number; notAfter: number }[];
}

export interface ChainResult {
  chain?: VerifiedChain;
  /** Why the chain is not trusted (empty when `chain` is set). */
  failures: string[];
  /** The signing certificate's key and info even when the chain failed, so the report's own checks still run. */
  key: KeyObject;
  info: EndorsementKeyInfo;
  product?: SnpProduct;
  validity: VerifiedChain['validity'];
}

const RSASSA_PSS = '1.2.840.113549.1.1.10';
const SHA384 = '2.16.840.1.101.3.4.2.2';

/** Whether a certificate is signed with RSASSA-PSS over SHA-384 (an absent hashAlgorithm means SHA-1, RFC 4055). */
function isPss384(der: Uint8Array): boolean {
  const [algorithm, params] = children(certificateFields(readElement(der)).signatureAlgorithm);
  if (decodeOid(algorithm) !== RSASSA_PSS || params?.tag !== TAG.SEQUENCE) return false;
  const hashAlgorithm = children(params).find((field) => field.tag === 0xa0);
  return (
    hashAlgorithm !== undefined &&
    decodeOid(children(expectTag(children(hashAlgorithm)[0], TAG.SEQUENCE, 'hashAlgorithm'))[0]) === SHA384
  );
}

/**
 * Verifies signing certificate → ASK/ASVK → ARK against `roots`. Signature and structure checks only; the
 * certificates' validity at a given time is left to the caller (so that a verified chain can be cached).
 */
export function verifyChain(signingDer: Uint8Array, chainDer: Uint8Array[], roots: AmdRoots): ChainResult {
  const failures: string[] = [];
  const signingRead = readCertificate(signingDer, 'the VCEK/VLEK certificate');
  const signing = signingRead.cert;
  const info = readEndorsementKeyInfo(signing, signingDer);
  const key = signingRead.publicKey;
  const window = (name: string, c: ReadCertificate) => ({ name, notBefore: c.notBefore, notAfter: c.notAfter });
  const validity = [window(info.kind?.toUpperCase() ?? 'signing certificate', signingRead)];
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'secp384r1') {
    failures.push('the VCEK/VLEK certificate does not hold an ECDSA P-384 key');
  }
  if (chainDer.length < 1 || chainDer.length > 2) {
    return {
      failures: [
        ...failures,
        `the certificate chain has ${chainDer.length} certificates; expected the ASK or ASVK, then the ARK`,
      ],
      key,
      info,
      validity,
    };
  }
  const anchors = anchorsOf(roots);
  const read = (der: Uint8Array, what: string) =>
    anchors.parsed.get(Buffer.from(der).toString('hex')) ?? readCertificate(der, what);
  const askRead = read(chainDer[0], 'the ASK/ASVK certificate');
  const ask = askRead.cert;
  const askName = commonName(ask);
  const askProduct = productFromCommonName(askName);
  const askKind: SnpSigningKey = askName?.startsWith('SEV-VLEK-') ? 'vlek' : 'vcek';
  const product = askProduct ?? productFromProductName(info.productName);
  validity.push(window(askName ?? 'ASK', askRead));

  // The trust anchor: the chain's ARK (or, when the chain holds only the ASK, the shipped ARK of its product)
  // must be one of the known roots, compared byte for byte.
  let arkDer: Uint8Array | undefined = chainDer[1];
  let arkProduct: SnpProduct | undefined;
  for (const p of SNP_PRODUCTS) {
    const known = anchors.arks.get(p);
    if (!known) continue;
    if (arkDer === undefined && p === product) arkDer = known;
    if (arkDer && Buffer.from(known).equals(arkDer)) arkProduct = p;
  }
  if (!arkDer)
    return {
      failures: [...failures, `no AMD root (ARK) is known for product ${product ?? 'unknown'}`],
      key,
      info,
      product,
      validity,
    };
  const arkRead = read(arkDer, 'the ARK certificate');
  const ark = arkRead.cert;
  const arkName = commonName(ark);
  validity.push(window(arkName ?? 'ARK', arkRead));
  if (!arkProduct) {
    failures.push(`the chain's root (CN=${arkName}) is not AMD's ARK for ${SNP_PRODUCTS.join(', ')}`);
  } else if (askProduct !== arkProduct) {
    failures.push(`the ASK/ASVK (CN=${askName}) is not for the ARK's product ${arkProduct}`);
  }
  if (!isPss384(chainDer[0]) || !isPss384(signingDer))
    failures.push('a certificate in the chain is not signed with RSA-PSS SHA-384');
  if (!signedBy(ask, arkRead.publicKey))
    failures.push(`the ASK/ASVK (CN=${askName}) is not signed by the ARK (CN=${arkName})`);
  if (!signedBy(signing, askRead.publicKey))
    failures.push(
      `the ${info.kind?.toUpperCase() ?? 'signing'} certificate is not signed by the ASK/ASVK (CN=${askName})`,
    );
  if (info.kind === undefined)
    failures.push(`the signing certificate (CN=${commonName(signing)}) is neither a VCEK nor a VLEK`);
  else if (info.kind !== askKind)
    failures.push(
      `a ${info.kind.toUpperCase()} must chain to ${info.kind === 'vcek' ? 'an ASK' : 'an ASVK'}, not CN=${askName}`,
    );
  const named = productFromProductName(info.productName);
  if (info.productName !== undefined && named !== product) {
    failures.push(
      `the ${info.kind?.toUpperCase() ?? 'signing'} certificate is for ${info.productName}, the chain for ${product ?? 'an unknown product'}`,
    );
  }
  if (failures.length > 0 || !arkProduct || !info.kind)
    return { failures, key, info, product: arkProduct ?? product, validity };
  return {
    failures,
    key,
    info,
    product: arkProduct,
    validity,
    chain: { product: arkProduct, kind: info.kind, key, info, validity },
  };
}
