/**
 * The kubelet's key pair and its certificate request (PKCS#10, ECDSA P-256, CN=system:node:<name>,
 * O=system:nodes, SAN = the node's IP) that goes into the JoinHello; the join service signs it with the
 * cluster CA. Built as DER by lib/pki/certificates.ts and signed with node:crypto.
 */
import { generateKeyPair } from 'node:crypto';
import { isIP } from 'node:net';
import { promisify } from 'node:util';
import { createCertificateRequest, encodeName, OID, subjectAltName } from '../lib/pki/certificates.js';

export interface KubeletCsr {
  /** DER PKCS#10. */
  csr: Uint8Array;
  /** PKCS#8 PEM of the kubelet's private key (kept on the state disk, never logged). */
  privateKeyPem: string;
}

const generateEcKeyPair = promisify(generateKeyPair);

export async function createKubeletCsr(nodeName: string, nodeIp: string): Promise<KubeletCsr> {
  const keys = await generateEcKeyPair('ec', { namedCurve: 'P-256' });
  const subject = encodeName([
    [OID.commonName, `system:node:${nodeName}`],
    [OID.organization, 'system:nodes'],
  ]);
  const request = createCertificateRequest(subject, keys, isIP(nodeIp) ? [subjectAltName({ ips: [nodeIp] })] : []);
  return {
    csr: new Uint8Array(request),
    privateKeyPem: keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}
