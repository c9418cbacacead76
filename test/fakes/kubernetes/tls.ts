/**
 * Certificates of the fake Kubernetes API server's world, from the cluster CA of a real cluster PKI (lib/pki):
 * the server's serving certificate (as kubeadm signs apiserver.crt) and kubeconfigs of users other than the admin
 * (whose kubeconfig is lib/pki's createAdminKubeconfig), e.g. one outside system:masters for 403s.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { stringify } from 'yaml';
import {
  basicConstraints,
  encodeName,
  extendedKeyUsage,
  issueCertificate,
  KEY_USAGE,
  keyUsage,
  OID,
  subjectAltName,
  type Issuer,
} from '../../../lib/pki/certificates.js';
import { pem, type CertificatePair, type ClusterPki } from '../../../lib/pki/cluster-pki.js';

const DAY_MS = 86_400_000;

function issue(
  issuer: Issuer,
  options: { subject: [string, string][]; usage: string; ips?: string[]; dns?: string[] },
): CertificatePair {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const now = Date.now();
  const names = options.ips || options.dns ? [subjectAltName({ ips: options.ips ?? [], dns: options.dns ?? [] })] : [];
  const der = issueCertificate(
    {
      subject: encodeName(options.subject),
      publicKey: publicKey.export({ type: 'spki', format: 'der' }),
      notBefore: new Date(now - 60_000),
      notAfter: new Date(now + DAY_MS),
      serial: Buffer.concat([Buffer.of(0x01), randomBytes(15)]),
      extensions: [
        basicConstraints(false),
        keyUsage([KEY_USAGE.digitalSignature, KEY_USAGE.keyEncipherment]),
        extendedKeyUsage([options.usage]),
        ...names,
      ],
    },
    issuer,
  );
  return { cert: pem('CERTIFICATE', der), key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/** A serving certificate of the cluster CA for these addresses and names. */
export function issueServingCertificate(pki: ClusterPki, options: { ips: string[]; dns: string[] }): CertificatePair {
  return issue(pki.ca, { subject: [[OID.commonName, 'kube-apiserver']], usage: OID.serverAuth, ...options });
}

/** A kubeconfig of a user with a client certificate of the cluster CA: CN = user, one O per group. */
export function userKubeconfig(pki: ClusterPki, server: string, user: { name: string; groups: string[] }): string {
  const client = issue(pki.ca, {
    subject: [...user.groups.map((g) => [OID.organization, g] as [string, string]), [OID.commonName, user.name]],
    usage: OID.clientAuth,
  });
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server, 'certificate-authority-data': b64(pki.files['ca.crt']) } }],
    contexts: [{ name: `${user.name}@test`, context: { cluster: 'test', user: user.name } }],
    'current-context': `${user.name}@test`,
    users: [
      { name: user.name, user: { 'client-certificate-data': b64(client.cert), 'client-key-data': b64(client.key) } },
    ],
  });
}

/** A kubeconfig that authenticates with a bearer token. */
export function tokenKubeconfig(pki: ClusterPki, server: string, token: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'test',
        cluster: { server, 'certificate-authority-data': Buffer.from(pki.files['ca.crt']).toString('base64') },
      },
    ],
    contexts: [{ name: 'token@test', context: { cluster: 'test', user: 'token' } }],
    'current-context': 'token@test',
    users: [{ name: 'token', user: { token } }],
  });
}
