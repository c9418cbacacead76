/**
 * The kubelet's key pair and its certificate request (PKCS#10, ECDSA P-256, CN=system:node:<name>,
 * O=system:nodes, SAN = the node's IP) that goes into the JoinHello; the join service signs it with the
 * cluster CA. Made with @peculiar/x509 (through lib/x509) on WebCrypto.
 */
import { webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import * as x509 from '../lib/x509.js';

export interface KubeletCsr {
  /** DER PKCS#10. */
  csr: Uint8Array;
  /** PKCS#8 PEM of the kubelet's private key (kept on the state disk, never logged). */
  privateKeyPem: string;
}

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export async function createKubeletCsr(nodeName: string, nodeIp: string): Promise<KubeletCsr> {
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const request = await x509.Pkcs10CertificateRequestGenerator.create({
    name: [{ CN: [`system:node:${nodeName}`] }, { O: ['system:nodes'] }],
    keys: keys as unknown as x509.Pkcs10CertificateRequestCreateParams['keys'],
    signingAlgorithm: ALGORITHM,
    extensions: isIP(nodeIp) ? [new x509.SubjectAlternativeNameExtension([{ type: 'ip', value: nodeIp }])] : [],
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const lines = pkcs8.toString('base64').match(/.{1,64}/g) ?? [];
  return {
    csr: new Uint8Array(request.rawData),
    privateKeyPem: `-----BEGIN PRIVATE KEY-----\n${lines.join('\n')}\n-----END PRIVATE KEY-----\n`,
  };
}
