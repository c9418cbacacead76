import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  webcrypto,
  X509Certificate,
} from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { UserError } from '../../lib/errors.js';
import {
  CA_VALIDITY_DAYS,
  createAdminKubeconfig,
  createClusterPki,
  discoveryTokenCaCertHash,
  LEAF_VALIDITY_DAYS,
  loadClusterPki,
  PKI_FILE_NAMES,
  signKubeletCertificate,
  type PkiFiles,
} from '../../lib/pki/cluster-pki.js';
import * as x509 from '../support/x509.js';
import { requireTool, toolRuns } from '../support/require-tool.js';

const NOW = new Date('2031-03-04T05:06:07.000Z');
const clock = () => NOW;
const DAY = 86_400_000;

/** A CSR made by an independent implementation (@peculiar/x509), with the given IP SANs. */
async function makeCsr(
  ips: string[] = [],
  keyAlgorithm: 'P-256' | 'RSA' = 'P-256',
  dnsNames: string[] = [],
): Promise<Uint8Array> {
  const algorithm =
    keyAlgorithm === 'RSA'
      ? { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', publicExponent: new Uint8Array([1, 0, 1]), modulusLength: 2048 }
      : { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: 'CN=whatever-the-node-asks',
    keys,
    signingAlgorithm: algorithm,
    extensions:
      ips.length + dnsNames.length
        ? [
            new x509.SubjectAlternativeNameExtension([
              ...dnsNames.map((value) => ({ type: 'dns' as const, value })),
              ...ips.map((value) => ({ type: 'ip' as const, value })),
            ]),
          ]
        : [],
  });
  return new Uint8Array(csr.rawData);
}

describe('pki/cluster-pki', () => {
  let files: PkiFiles;
  before(() => {
    files = createClusterPki({ clock, clusterName: 'demo' });
  });

  it('makes the kubeadm files: three CAs valid for 10 years with their keys, and a service-account key pair', () => {
    assert.deepEqual(Object.keys(files).sort(), [...PKI_FILE_NAMES].sort());
    for (const [base, cn] of [
      ['ca', 'kubernetes'],
      ['front-proxy-ca', 'front-proxy-ca'],
      ['etcd/ca', 'etcd-ca'],
    ] as const) {
      const cert = new X509Certificate(files[`${base}.crt`]);
      assert.equal(cert.ca, true, base);
      assert.match(cert.subject, new RegExp(`CN=${cn}`));
      assert.ok(cert.verify(cert.publicKey), `${base} is self-signed`);
      assert.equal(new Date(cert.validTo).getTime(), NOW.getTime() + CA_VALIDITY_DAYS * DAY);
      assert.ok(new Date(cert.validFrom).getTime() <= NOW.getTime());
      assert.match(files[`${base}.key`], /^-----BEGIN EC PRIVATE KEY-----/);
      assert.ok(cert.checkPrivateKey(createPrivateKey(files[`${base}.key`])));
    }
    const sa = createPublicKey(createPrivateKey(files['sa.key'])).export({ type: 'spki', format: 'der' });
    assert.ok(sa.equals(createPublicKey(files['sa.pub']).export({ type: 'spki', format: 'der' })));
    // Three different CAs.
    assert.equal(new Set([files['ca.crt'], files['front-proxy-ca.crt'], files['etcd/ca.crt']]).size, 3);
  });

  it('signs a kubelet certificate from a CSR that verifies against the CA, with the right subject, SANs and validity', async () => {
    const pki = loadClusterPki(files);
    const der = signKubeletCertificate(pki, await makeCsr(['10.9.8.7', 'fd00::5']), {
      nodeName: 'worker-3',
      ips: ['10.9.8.7', 'fd00:0::5'],
      clock,
    });
    const cert = new X509Certificate(der);
    const ca = new X509Certificate(files['ca.crt']);
    assert.ok(cert.verify(ca.publicKey));
    assert.ok(cert.checkIssued(ca));
    assert.equal(cert.ca, false);
    assert.deepEqual(cert.subject.split('\n').sort(), ['CN=system:node:worker-3', 'O=system:nodes']);
    assert.equal(cert.subjectAltName, 'DNS:worker-3, IP Address:10.9.8.7, IP Address:FD00:0:0:0:0:0:0:5');
    assert.deepEqual(cert.keyUsage?.sort(), ['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']);
    assert.equal(new Date(cert.validTo).getTime(), NOW.getTime() + LEAF_VALIDITY_DAYS * DAY);
    assert.ok(new Date(cert.validFrom).getTime() <= NOW.getTime());
  });

  it('names the IPs given by the caller, also when the CSR asks for none, and signs CSRs of RSA keys', async () => {
    const pki = loadClusterPki(files);
    const cert = new X509Certificate(
      signKubeletCertificate(pki, await makeCsr([], 'RSA'), { nodeName: 'cp-0', ips: ['192.168.1.2'], clock }),
    );
    assert.equal(cert.subjectAltName, 'DNS:cp-0, IP Address:192.168.1.2');
    assert.equal(cert.publicKey.asymmetricKeyType, 'rsa');
  });

  it("refuses a CSR asking for an IP address that is not the node's (a worker asking for the API endpoint's)", async () => {
    const pki = loadClusterPki(files);
    const csr = await makeCsr(['10.0.0.11', '10.0.0.1']);
    assert.throws(
      () => signKubeletCertificate(pki, csr, { nodeName: 'worker-1', ips: ['10.0.0.11'], clock }),
      (err: Error) =>
        err instanceof UserError &&
        err.message ===
          'The kubelet certificate request of node "worker-1" asks for the IP address 10.0.0.1, which is not the node\'s: a kubelet certificate names only the node\'s own name and addresses (its addresses are 10.0.0.11).',
    );
  });

  it("refuses a CSR asking for another DNS name than the node's", async () => {
    const pki = loadClusterPki(files);
    const csr = await makeCsr([], 'P-256', ['kubernetes.default.svc']);
    assert.throws(
      () => signKubeletCertificate(pki, csr, { nodeName: 'worker-1', ips: [], clock }),
      /asks for the DNS name "kubernetes.default.svc", which is not the node's/,
    );
  });

  it('passes openssl verify (an independent X.509 implementation) when openssl is installed', async function () {
    requireTool(this, toolRuns('openssl', ['version']), 'openssl');
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'pki-openssl-'));
    try {
      const pki = loadClusterPki(files);
      const der = signKubeletCertificate(pki, await makeCsr(['10.1.2.3']), {
        nodeName: 'node-a',
        ips: ['10.1.2.3'],
        clock,
      });
      await fs.writeFile(path.join(dir, 'ca.crt'), files['ca.crt']);
      await fs.writeFile(path.join(dir, 'kubelet.crt'), new X509Certificate(der).toString());
      const out = execFileSync(
        'openssl',
        [
          'verify',
          '-attime',
          String(NOW.getTime() / 1000 + 60),
          '-purpose',
          'sslclient',
          '-CAfile',
          'ca.crt',
          'kubelet.crt',
        ],
        { cwd: dir, encoding: 'utf8' },
      );
      assert.match(out, /kubelet\.crt: OK/);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses a CSR whose signature does not verify, and garbage', async () => {
    const pki = loadClusterPki(files);
    const csr = Buffer.from(await makeCsr(['10.0.0.1']));
    csr[csr.length - 5] ^= 0x01; // inside the signature
    assert.throws(
      () => signKubeletCertificate(pki, csr, { nodeName: 'worker-1', ips: [], clock }),
      (err: Error) => {
        assert.ok(err instanceof UserError);
        assert.match(err.message, /signature does not verify/);
        return true;
      },
    );
    assert.throws(
      () => signKubeletCertificate(pki, Buffer.from('not a csr'), { nodeName: 'worker-1', ips: [], clock }),
      UserError,
    );
    assert.throws(
      () => signKubeletCertificate(pki, new Uint8Array(0), { nodeName: 'worker-1', ips: [], clock }),
      UserError,
    );
  });

  it('refuses node names Kubernetes would refuse', async () => {
    const pki = loadClusterPki(files);
    const csr = await makeCsr();
    for (const name of ['', 'Upper', 'a,O=system:masters', 'x'.repeat(254), '-lead']) {
      assert.throws(
        () => signKubeletCertificate(pki, csr, { nodeName: name, ips: [], clock }),
        /not a valid node name/,
        name,
      );
    }
  });

  it("computes the discovery hash as SHA-256 of the CA's SubjectPublicKeyInfo (checked with openssl where present)", function () {
    const spki = new X509Certificate(files['ca.crt']).publicKey.export({ type: 'spki', format: 'der' });
    const expected = `sha256:${createHash('sha256').update(spki).digest('hex')}`;
    assert.equal(discoveryTokenCaCertHash(files['ca.crt']), expected);
    if (spawnSync('openssl', ['version']).status === 0) {
      const pub = execFileSync('openssl', ['x509', '-pubkey', '-noout'], { input: files['ca.crt'] });
      const der = execFileSync('openssl', ['pkey', '-pubin', '-outform', 'der'], { input: pub });
      assert.equal(
        discoveryTokenCaCertHash(files['ca.crt']),
        `sha256:${createHash('sha256').update(der).digest('hex')}`,
      );
    }
  });

  it('loadClusterPki names a missing file, a key that does not belong to its certificate, and a broken key without quoting it', () => {
    const { 'etcd/ca.key': _omitted, ...missing } = files;
    assert.throws(() => loadClusterPki(missing, 'pki'), /pki has no etcd\/ca\.key/);
    const other = createClusterPki({ clock, clusterName: 'other' });
    assert.throws(() => loadClusterPki({ ...files, 'ca.key': other['ca.key'] }), /ca\.key is not the key of ca\.crt/);
    assert.throws(
      () => loadClusterPki({ ...files, 'sa.pub': other['sa.pub'] }),
      /sa\.key and sa\.pub are not a key pair/,
    );
    assert.throws(
      () => loadClusterPki({ ...files, 'ca.key': 'garbage' }),
      (err: Error) => err instanceof UserError && !err.message.includes('garbage'),
    );
  });

  it('loadClusterPki refuses a leaf certificate in place of a CA', async () => {
    const pki = loadClusterPki(files);
    const leaf = new X509Certificate(
      signKubeletCertificate(pki, await makeCsr(), { nodeName: 'n1', ips: [], clock }),
    ).toString();
    assert.throws(
      () => loadClusterPki({ ...files, 'front-proxy-ca.crt': leaf }),
      /front-proxy-ca\.crt is not a CA certificate/,
    );
  });

  it('loads a kubeadm-style PKI with an RSA CA and signs with it', async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const keys = {
      privateKey: await webcrypto.subtle.importKey(
        'pkcs8',
        privateKey.export({ type: 'pkcs8', format: 'der' }),
        { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
        true,
        ['sign'],
      ),
      publicKey: await webcrypto.subtle.importKey(
        'spki',
        createPublicKey(privateKey).export({ type: 'spki', format: 'der' }),
        { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
        true,
        ['verify'],
      ),
    };
    const ca = await x509.X509CertificateGenerator.createSelfSigned({
      name: 'CN=kubernetes',
      keys,
      signingAlgorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
      notBefore: new Date(NOW.getTime() - DAY),
      notAfter: new Date(NOW.getTime() + DAY),
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    const pki = loadClusterPki({
      ...files,
      'ca.crt': ca.toString('pem'),
      'ca.key': privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
    });
    const cert = new X509Certificate(signKubeletCertificate(pki, await makeCsr(), { nodeName: 'n1', ips: [], clock }));
    assert.ok(cert.verify(new X509Certificate(ca.toString('pem')).publicKey));
    assert.ok(cert.checkIssued(new X509Certificate(ca.toString('pem'))));
  });

  it('writes an admin kubeconfig whose client certificate is CN=kubernetes-admin, O=system:masters, signed by the CA', async () => {
    const pki = loadClusterPki(files);
    const config = parse(
      await createAdminKubeconfig({ pki, clusterName: 'demo', server: 'https://10.0.0.1:6443', clock }),
    );
    assert.equal(config.kind, 'Config');
    assert.equal(config.clusters[0].cluster.server, 'https://10.0.0.1:6443');
    assert.equal(
      Buffer.from(config.clusters[0].cluster['certificate-authority-data'], 'base64').toString(),
      files['ca.crt'],
    );
    assert.equal(config['current-context'], 'kubernetes-admin@demo');
    const user = config.users[0].user;
    const cert = new X509Certificate(Buffer.from(user['client-certificate-data'], 'base64'));
    assert.deepEqual(cert.subject.split('\n').sort(), ['CN=kubernetes-admin', 'O=system:masters']);
    assert.ok(cert.verify(new X509Certificate(files['ca.crt']).publicKey));
    assert.ok(cert.checkPrivateKey(createPrivateKey(Buffer.from(user['client-key-data'], 'base64').toString())));
  });
});
