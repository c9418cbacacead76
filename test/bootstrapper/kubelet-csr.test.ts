import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import { createKubeletCsr } from '../../bootstrapper/kubelet-csr.js';
import { createClusterPki, loadClusterPki, signKubeletCertificate } from '../../lib/pki/cluster-pki.js';
import { readCertificateRequest } from '../../lib/pki/certificates.js';
import * as x509 from '../support/x509.js';
import { requireTool, toolRuns } from '../support/require-tool.js';

const pemOf = (der: Uint8Array) =>
  `-----BEGIN CERTIFICATE REQUEST-----\n${Buffer.from(der)
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END CERTIFICATE REQUEST-----\n`;

describe('bootstrapper/kubelet-csr', () => {
  it('requests CN=system:node:<name>, O=system:nodes and the node IP as SAN, signed by the key whose PKCS#8 PEM it returns', async () => {
    const { csr, privateKeyPem } = await createKubeletCsr('worker-3', '10.0.0.7');
    const read = readCertificateRequest(csr); // checks the signature
    assert.deepEqual(read.ipAddresses, ['10.0.0.7']);
    assert.deepEqual(read.dnsNames, []);
    const requested = createPublicKey({ key: read.publicKey, format: 'der', type: 'spki' });
    assert.equal(requested.asymmetricKeyDetails?.namedCurve, 'prime256v1');
    const derived = createPublicKey(createPrivateKey(privateKeyPem)).export({ type: 'spki', format: 'der' });
    assert.deepEqual(derived, read.publicKey);
    // An independent reader (@peculiar/x509) sees the same subject and verifies the signature.
    const parsed = new x509.Pkcs10CertificateRequest(csr);
    assert.equal(parsed.subject, 'CN=system:node:worker-3, O=system:nodes');
    assert.ok(await parsed.verify());
  });

  it('names no SAN when the node address is not an IP', async () => {
    const { csr } = await createKubeletCsr('worker-4', 'not-an-ip');
    assert.deepEqual(readCertificateRequest(csr).ipAddresses, []);
  });

  it('gets a kubelet certificate from the cluster CA', async () => {
    const pki = loadClusterPki(createClusterPki({ clock: () => new Date(), clusterName: 'demo' }));
    const { csr } = await createKubeletCsr('worker-5', '10.0.0.9');
    const cert = new X509Certificate(
      signKubeletCertificate(pki, csr, { nodeName: 'worker-5', ips: ['10.0.0.9'], clock: () => new Date() }),
    );
    assert.match(cert.subject, /CN=system:node:worker-5/);
    assert.match(cert.subjectAltName ?? '', /IP Address:10\.0\.0\.9/);
  });

  it('passes openssl req -verify (OpenSSL reads the request and checks its signature)', async function () {
    requireTool(this, toolRuns('openssl', ['version']), 'openssl');
    const { csr } = await createKubeletCsr('worker-6', '10.0.0.11');
    const out = execFileSync('openssl', ['req', '-verify', '-noout', '-subject'], {
      input: pemOf(csr),
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    assert.match(out, /subject=CN ?= ?system:node:worker-6, ?O ?= ?system:nodes/);
  });
});
