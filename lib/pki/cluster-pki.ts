/**
 * The cluster PKI (docs/design.md#cluster-pki), made by our code at init so that joining and signing work alike with every
 * Kubernetes backend: kubeadm's files by kubeadm's names (CA, front-proxy CA, etcd CA, service-account key;
 * ECDSA P-256, SEC1 keys as kubeadm writes them, 10-year CAs), kubelet certificates signed from a node's
 * CSR, kubeadm's discovery hash of the CA, and the admin kubeconfig. The clock is a parameter so tests pin
 * validity periods. A kubeadm-made PKI (RSA keys) loads and signs too.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  X509Certificate,
  type KeyObject,
} from 'node:crypto';
import { isIP } from 'node:net';
import type { Clock } from '../clock.js';
import { UserError } from '../errors.js';
import {
  basicConstraints,
  encodeName,
  extendedKeyUsage,
  issueCertificate,
  issuerFromCertificate,
  KEY_USAGE,
  keyUsage,
  OID,
  readCertificateRequest,
  subjectAltName,
  ipBytes,
  type Issuer,
} from './certificates.js';
import { DerError } from '../der.js';

export const PKI_FILE_NAMES = [
  'ca.crt',
  'ca.key',
  'front-proxy-ca.crt',
  'front-proxy-ca.key',
  'etcd/ca.crt',
  'etcd/ca.key',
  'sa.key',
  'sa.pub',
] as const;
export type PkiFileName = (typeof PKI_FILE_NAMES)[number];
/** The PKI as PEM text by kubeadm's file names (relative to /etc/kubernetes/pki). */
export type PkiFiles = Record<PkiFileName, string>;

export const CA_VALIDITY_DAYS = 3650;
export const LEAF_VALIDITY_DAYS = 365;
const DAY_MS = 86_400_000;
/** Certificates start a little in the past, so a node whose clock lags the join service's accepts them. */
export const BACKDATE_MS = 5 * 60_000;

const KUBELET_ORGANIZATION = 'system:nodes';
const KUBELET_NAME_PREFIX = 'system:node:';
const ADMIN_USER = 'kubernetes-admin';
const ADMIN_ORGANIZATION = 'system:masters';
/** Kubernetes node names are DNS-1123 subdomains. */
const NODE_NAME = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A loaded PKI: its files, and the cluster CA and etcd CA ready to sign. */
export interface ClusterPki {
  files: PkiFiles;
  ca: Issuer;
  etcdCa: Issuer;
}

/** Makes a new cluster PKI. `clusterName` goes into the CAs' subjects (O=), so operators can tell clusters apart. */
export function createClusterPki(options: { clock: Clock; clusterName: string }): PkiFiles {
  const now = options.clock().getTime();
  const ca = (commonName: string) => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const der = issueCertificate(
      {
        subject: encodeName([
          [OID.commonName, commonName],
          [OID.organization, options.clusterName],
        ]),
        publicKey: publicKey.export({ type: 'spki', format: 'der' }),
        notBefore: new Date(now - BACKDATE_MS),
        notAfter: new Date(now + CA_VALIDITY_DAYS * DAY_MS),
        serial: randomSerial(),
        extensions: [
          basicConstraints(true),
          keyUsage([KEY_USAGE.digitalSignature, KEY_USAGE.keyEncipherment, KEY_USAGE.keyCertSign]),
        ],
      },
      { self: privateKey },
    );
    return { crt: pem('CERTIFICATE', der), key: ecKeyPem(privateKey) };
  };
  const cluster = ca('kubernetes');
  const frontProxy = ca('front-proxy-ca');
  const etcd = ca('etcd-ca');
  const sa = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return {
    'ca.crt': cluster.crt,
    'ca.key': cluster.key,
    'front-proxy-ca.crt': frontProxy.crt,
    'front-proxy-ca.key': frontProxy.key,
    'etcd/ca.crt': etcd.crt,
    'etcd/ca.key': etcd.key,
    'sa.key': ecKeyPem(sa.privateKey),
    'sa.pub': sa.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

/**
 * Loads and checks a PKI: every file present, every CA certificate a CA whose key is the one next to it,
 * the service-account keys a pair. `source` names where the files came from in messages.
 */
export function loadClusterPki(
  files: Partial<Record<string, string | Uint8Array>>,
  source = 'the cluster PKI',
): ClusterPki {
  const text = {} as PkiFiles;
  for (const name of PKI_FILE_NAMES) {
    const content = files[name];
    if (content === undefined || content.length === 0) {
      throw new UserError(`${source} has no ${name}.`, {
        hint: `The cluster PKI consists of ${PKI_FILE_NAMES.join(', ')}.`,
      });
    }
    text[name] = typeof content === 'string' ? content : Buffer.from(content).toString('utf8');
  }
  let clusterCa: Issuer | undefined;
  let etcdCa: Issuer | undefined;
  for (const base of ['ca', 'front-proxy-ca', 'etcd/ca'] as const) {
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(text[`${base}.crt`]);
    } catch {
      throw new UserError(`${source}: ${base}.crt is not a PEM certificate.`);
    }
    if (!cert.ca) throw new UserError(`${source}: ${base}.crt is not a CA certificate.`);
    const key = privateKey(text[`${base}.key`], `${source}: ${base}.key`);
    if (!samePublicKey(cert.publicKey, createPublicKey(key)))
      throw new UserError(`${source}: ${base}.key is not the key of ${base}.crt.`);
    if (base === 'ca') clusterCa = issuerFromCertificate(cert.raw, key);
    if (base === 'etcd/ca') etcdCa = issuerFromCertificate(cert.raw, key);
  }
  let saPublic: KeyObject;
  try {
    saPublic = createPublicKey(text['sa.pub']);
  } catch {
    throw new UserError(`${source}: sa.pub is not a PEM public key.`);
  }
  if (!samePublicKey(saPublic, createPublicKey(privateKey(text['sa.key'], `${source}: sa.key`)))) {
    throw new UserError(`${source}: sa.key and sa.pub are not a key pair.`);
  }
  return { files: text, ca: clusterCa!, etcdCa: etcdCa! };
}

/**
 * A name every etcd member's certificate carries: clients verify members by it (TLS server names must not be IP
 * addresses, RFC 6066), whichever member's address they connect to.
 */
export const ETCD_SERVER_NAME = 'etcd.constellation.internal';

/** A certificate and its key, PEM. */
export interface CertificatePair {
  cert: string;
  key: string;
}

/**
 * The certificates of a stacked etcd member (as kubeadm makes them, from the etcd CA): one for serving clients
 * and one for its peers, both for the node's IPs (and localhost), each serving and client auth.
 */
export function issueEtcdMemberCertificates(
  pki: ClusterPki,
  options: { name: string; ips: string[]; clock: Clock },
): { server: CertificatePair; peer: CertificatePair } {
  const ips = [...new Set([...options.ips, '127.0.0.1'])];
  const dns = [options.name, 'localhost', ETCD_SERVER_NAME];
  // The common name is no etcd user (lib/cluster-store/etcd-access.ts): whatever the node is called, a member's
  // certificate presented to a client port gets no access to the store.
  const commonName = `${ETCD_MEMBER_NAME_PREFIX}${options.name}`;
  const leaf = () =>
    issueLeaf(pki.etcdCa, { commonName, ips, dns, usages: [OID.serverAuth, OID.clientAuth], clock: options.clock });
  return { server: leaf(), peer: leaf() };
}

/** How the common name of an etcd member's certificates begins (no etcd user's name does). */
export const ETCD_MEMBER_NAME_PREFIX = 'etcd-member:';

/**
 * A client certificate of the etcd CA (the join services' and the CLI's access to the cluster store); its common
 * name is the etcd user it acts as. Valid LEAF_VALIDITY_DAYS, or `lifetimeMs` (a control plane's admin certificate
 * for one membership change).
 */
export function issueEtcdClientCertificate(
  pki: ClusterPki,
  options: { commonName: string; clock: Clock; lifetimeMs?: number },
): CertificatePair {
  return issueLeaf(pki.etcdCa, {
    commonName: options.commonName,
    ips: [],
    dns: [],
    usages: [OID.clientAuth],
    clock: options.clock,
    lifetimeMs: options.lifetimeMs,
  });
}

function issueLeaf(
  issuer: Issuer,
  options: { commonName: string; ips: string[]; dns: string[]; usages: string[]; clock: Clock; lifetimeMs?: number },
): CertificatePair {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const now = options.clock().getTime();
  const names =
    options.ips.length > 0 || options.dns.length > 0 ? [subjectAltName({ dns: options.dns, ips: options.ips })] : [];
  const der = issueCertificate(
    {
      subject: encodeName([[OID.commonName, options.commonName]]),
      publicKey: publicKey.export({ type: 'spki', format: 'der' }),
      notBefore: new Date(now - BACKDATE_MS),
      notAfter: new Date(now + (options.lifetimeMs ?? LEAF_VALIDITY_DAYS * DAY_MS)),
      serial: randomSerial(),
      extensions: [
        basicConstraints(false),
        keyUsage([KEY_USAGE.digitalSignature, KEY_USAGE.keyEncipherment]),
        extendedKeyUsage(options.usages),
        ...names,
      ],
    },
    issuer,
  );
  return { cert: pem('CERTIFICATE', der), key: ecKeyPem(privateKey) };
}

export interface KubeletCertificateOptions {
  nodeName: string;
  /**
   * The node's IP addresses as the verifier knows them (the join service: the provider's view of the attested
   * instance), never as the request says: they become the certificate's IP subjectAltNames.
   */
  ips: string[];
  clock: Clock;
}

/**
 * Signs a kubelet certificate (DER) from the node's CSR (DER PKCS#10, whose signature must verify):
 * CN=system:node:<nodeName>, O=system:nodes, SANs = the node name and `ips`, client and server auth, one
 * year. The certificate is signed by the CA the admin kubeconfig trusts and carries serverAuth, so its names
 * come from the caller, not from the request: a request that asks for any other DNS name than the node's or
 * any IP address outside `ips` (a worker asking for the API endpoint's address) is refused with a UserError
 * naming what it asked for. The request's subject is ignored (the name comes from the attested join request).
 */
export function signKubeletCertificate(
  pki: ClusterPki,
  csrDer: Uint8Array,
  options: KubeletCertificateOptions,
): Uint8Array {
  checkNodeName(options.nodeName);
  let request;
  try {
    request = readCertificateRequest(csrDer);
  } catch (err) {
    if (err instanceof DerError) throw new UserError(`The kubelet certificate request is not valid: ${err.message}.`);
    throw err;
  }
  const ips = options.ips;
  for (const ip of ips) {
    if (isIP(ip) === 0)
      throw new UserError(
        `"${ip}" is not an IP address; a kubelet certificate names only IP addresses and the node name.`,
      );
  }
  checkRequestedNames(request, options.nodeName, ips);
  const now = options.clock().getTime();
  return new Uint8Array(
    issueCertificate(
      {
        subject: encodeName([
          [OID.organization, KUBELET_ORGANIZATION],
          [OID.commonName, `${KUBELET_NAME_PREFIX}${options.nodeName}`],
        ]),
        publicKey: request.publicKey,
        notBefore: new Date(now - BACKDATE_MS),
        notAfter: new Date(now + LEAF_VALIDITY_DAYS * DAY_MS),
        serial: randomSerial(),
        extensions: [
          basicConstraints(false),
          keyUsage([KEY_USAGE.digitalSignature, KEY_USAGE.keyEncipherment]),
          extendedKeyUsage([OID.clientAuth, OID.serverAuth]),
          subjectAltName({ dns: [options.nodeName], ips }),
        ],
      },
      pki.ca,
    ),
  );
}

/** The request asks only for names the certificate will carry anyway: the node name, and addresses among `ips`. */
function checkRequestedNames(
  request: { dnsNames: string[]; ipAddresses: string[] },
  nodeName: string,
  ips: string[],
): void {
  const refuse = (asked: string) => {
    const known = ips.length === 0 ? 'none is known for it' : `its addresses are ${ips.join(', ')}`;
    return new UserError(
      `The kubelet certificate request of node "${nodeName}" asks for ${asked}, which is not the node's: a kubelet certificate names only the node's own name and addresses (${known}).`,
      {
        hint: 'Only the node itself gets a certificate, for the addresses its provider gave it; a request for another address is refused.',
      },
    );
  };
  for (const dns of request.dnsNames) if (dns.toLowerCase() !== nodeName) throw refuse(`the DNS name "${dns}"`);
  const allowed = new Set(ips.map((ip) => ipBytes(ip).toString('hex')));
  for (const ip of request.ipAddresses)
    if (!allowed.has(ipBytes(ip).toString('hex'))) throw refuse(`the IP address ${ip}`);
}

/** A UserError unless `name` is a valid Kubernetes node name (DNS-1123 subdomain). */
export function checkNodeName(name: string): void {
  if (!NODE_NAME.test(name)) {
    throw new UserError(`"${name}" is not a valid node name.`, {
      hint: 'A node name is lowercase letters, digits, "-" and "." (a DNS-1123 subdomain), at most 253 characters.',
    });
  }
}

/** kubeadm's --discovery-token-ca-cert-hash: "sha256:" + hex(SHA-256(the CA's SubjectPublicKeyInfo, DER)). */
export function discoveryTokenCaCertHash(caCert: string | Uint8Array): string {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(caCert);
  } catch {
    throw new UserError('The CA certificate is not a PEM or DER certificate.');
  }
  const spki = cert.publicKey.export({ type: 'spki', format: 'der' });
  return `sha256:${createHash('sha256').update(spki).digest('hex')}`;
}

export interface AdminKubeconfigOptions {
  pki: ClusterPki;
  clusterName: string;
  /** The API server URL, e.g. https://10.0.0.1:6443. */
  server: string;
  clock: Clock;
}

/**
 * An admin kubeconfig with a fresh client certificate CN=kubernetes-admin, O=system:masters, one year. Written as
 * JSON, which is YAML (kubectl and client libraries read it as any kubeconfig): a control plane makes it during init,
 * and the YAML library would cost it tens of milliseconds to load there.
 */
export async function createAdminKubeconfig(options: AdminKubeconfigOptions): Promise<string> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const now = options.clock().getTime();
  const cert = issueCertificate(
    {
      subject: encodeName([
        [OID.organization, ADMIN_ORGANIZATION],
        [OID.commonName, ADMIN_USER],
      ]),
      publicKey: publicKey.export({ type: 'spki', format: 'der' }),
      notBefore: new Date(now - BACKDATE_MS),
      notAfter: new Date(now + LEAF_VALIDITY_DAYS * DAY_MS),
      serial: randomSerial(),
      extensions: [
        basicConstraints(false),
        keyUsage([KEY_USAGE.digitalSignature, KEY_USAGE.keyEncipherment]),
        extendedKeyUsage([OID.clientAuth]),
      ],
    },
    options.pki.ca,
  );
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const context = `${ADMIN_USER}@${options.clusterName}`;
  const kubeconfig = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: options.clusterName,
        cluster: { server: options.server, 'certificate-authority-data': b64(options.pki.files['ca.crt']) },
      },
    ],
    contexts: [{ name: context, context: { cluster: options.clusterName, user: ADMIN_USER } }],
    'current-context': context,
    preferences: {},
    users: [
      {
        name: ADMIN_USER,
        user: {
          'client-certificate-data': b64(pem('CERTIFICATE', cert)),
          'client-key-data': b64(ecKeyPem(privateKey)),
        },
      },
    ],
  };
  return `${JSON.stringify(kubeconfig, null, 2)}\n`;
}

export function pem(label: string, der: Uint8Array): string {
  const lines =
    Buffer.from(der)
      .toString('base64')
      .match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}

/** A random positive 128-bit serial number (RFC 5280 §4.1.2.2: unique per CA, at most 20 bytes). */
function randomSerial(): Uint8Array {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] & 0x7f) | 0x01;
  return bytes;
}

/** kubeadm writes ECDSA keys as SEC1 "EC PRIVATE KEY" PEM. */
function ecKeyPem(key: KeyObject): string {
  return key.export({ type: 'sec1', format: 'pem' }).toString();
}

function privateKey(keyPem: string, what: string): KeyObject {
  try {
    return createPrivateKey(keyPem);
  } catch {
    // The parser's message could quote the key; name only the file.
    throw new UserError(`${what} is not a PEM private key.`, {
      hint: 'Restore the cluster PKI from a backup of the control plane.',
    });
  }
}

function samePublicKey(a: KeyObject, b: KeyObject): boolean {
  return a.export({ type: 'spki', format: 'der' }).equals(b.export({ type: 'spki', format: 'der' }));
}
