import assert from 'node:assert/strict';
import { randomBytes, X509Certificate } from 'node:crypto';
import {
  BootstrapTokenIssuer,
  MemoryTokenSink,
  TOKEN_PATTERN,
  TOKEN_TTL_MS,
} from '../../joinservice/bootstrap-token.js';
import { JoinConfigReader, type LoadedJoinConfig } from '../../joinservice/join-config.js';
import { nullLogger } from '../../lib/logging/index.js';
import { JoinTicketIssuer } from '../../joinservice/ticket-issuer.js';
import {
  deriveMeasurementSecret,
  deriveStateDiskKey,
  joinServicePublicKey,
  ticketSignatureValid,
} from '../../lib/kms/index.js';
import { RejoinTicket, SignedTicket } from '../../proto/gen/constellation/join.js';
import { discoveryTokenCaCertHash, PKI_FILE_NAMES } from '../../lib/pki/cluster-pki.js';
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { deriveSshCa, knownHostsCaLine, sshCaPublicKeyLine } from '../../lib/ssh/certificate.js';
import { generateSshHostKey } from '../../lib/ssh/host-key.js';
import { hello, kubeletCsr } from './support/join-client.js';
import { makeTestStore, TEST_NOW, type TestStore } from './support/test-store.js';
import { imagePcrs, measurementsFor } from './support/software-vtpm.js';

describe('joinservice/ticket-issuer', () => {
  let service: TestStore;
  let config: LoadedJoinConfig;
  let sink: MemoryTokenSink;
  let issuer: JoinTicketIssuer;
  const clock = () => TEST_NOW;

  before(async () => {
    service = await makeTestStore(measurementsFor(imagePcrs()));
    config = await new JoinConfigReader(service.store, { logger: nullLogger }).current();
  });
  beforeEach(() => {
    sink = new MemoryTokenSink(clock);
    issuer = new JoinTicketIssuer({ tokens: new BootstrapTokenIssuer({ sink, clock }), clock });
  });

  it("signs a ticket with the join-service key over the node's exchange key: valid for that exchange and kind only", () => {
    const ticket = RejoinTicket.encode(issuer.rejoinTicket(hello(), config)).finish();
    const nodeKey = randomBytes(65);
    const signed = SignedTicket.decode(issuer.sign(ticket, 'rejoin', nodeKey, config));
    const publicKey = joinServicePublicKey(service.contents.joinServiceKey);
    assert.deepEqual(new Uint8Array(signed.ticket), new Uint8Array(ticket));
    assert.ok(ticketSignatureValid(publicKey, 'rejoin', nodeKey, signed.ticket, signed.signature));
    assert.ok(
      !ticketSignatureValid(publicKey, 'rejoin', randomBytes(65), signed.ticket, signed.signature),
      'another exchange',
    );
    assert.ok(!ticketSignatureValid(publicKey, 'join', nodeKey, signed.ticket, signed.signature), 'another kind');
    assert.ok(
      !ticketSignatureValid(joinServicePublicKey(randomBytes(32)), 'rejoin', nodeKey, signed.ticket, signed.signature),
      'another cluster',
    );
  });

  it('gives a worker its disk key, the measurement values, a kubelet certificate, a token, the discovery hash and the SSH CA, but no CA files', async () => {
    const request = hello({ certificateRequest: await kubeletCsr(['10.0.0.7']), nodeName: 'worker-7' });
    issuer.checkHello(request, 'join');
    const ticket = await issuer.joinTicket(request, config, [], {
      name: 'worker-7',
      role: 'worker',
      addresses: ['10.0.0.7'],
    });

    assert.deepEqual(new Uint8Array(ticket.stateDiskKey), deriveStateDiskKey(service.masterSecret, request.diskUuid));
    assert.deepEqual(new Uint8Array(ticket.measurementSecret), deriveMeasurementSecret(service.masterSecret));
    assert.deepEqual(new Uint8Array(ticket.measurementSalt), new Uint8Array(service.contents.measurementSalt));
    assert.equal(ticket.apiServerEndpoint, '127.0.0.1:6443');
    assert.equal(ticket.kubernetesVersion, 'v1.31.1');
    assert.match(ticket.token, TOKEN_PATTERN);
    assert.ok(sink.isValid(ticket.token), 'the token was registered');
    assert.equal(ticket.tokenExpiresAt, (TEST_NOW.getTime() + TOKEN_TTL_MS) / 1000);
    assert.equal(ticket.discoveryTokenCaCertHash, discoveryTokenCaCertHash(service.pki['ca.crt']));
    assert.deepEqual(ticket.controlPlaneFiles, []);
    assert.equal(
      ticket.sshCaPublicKey.toString(),
      sshCaPublicKeyLine(deriveSshCa(service.masterSecret).publicKey),
      'the emergency SSH CA of the master secret',
    );

    const cert = new X509Certificate(ticket.kubeletCert);
    assert.ok(cert.verify(new X509Certificate(service.pki['ca.crt']).publicKey));
    assert.match(cert.subject, /CN=system:node:worker-7/);
    assert.equal(cert.subjectAltName, 'DNS:worker-7, IP Address:10.0.0.7');
  });

  it("certifies the node's SSH host key with the cluster's SSH CA, for the provider's addresses and the node name only", async () => {
    const hostKey = generateSshHostKey();
    const request = hello({
      certificateRequest: await kubeletCsr(['10.0.0.7']),
      nodeName: 'worker-7',
      hostPublicKey: Buffer.from(hostKey.publicKey.blob),
    });
    issuer.checkHello(request, 'join');
    const ticket = await issuer.joinTicket(request, config, [], {
      name: 'worker-7',
      role: 'worker',
      addresses: ['10.0.0.7'],
    });
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'host-cert-'));
    try {
      // ssh-keygen reads the certificate as OpenSSH's client will.
      await fs.writeFile(path.join(dir, 'host-cert.pub'), ticket.hostCertificate);
      const listed = execFileSync('ssh-keygen', ['-L', '-f', path.join(dir, 'host-cert.pub')], { encoding: 'utf8' });
      assert.match(listed, /Type: ssh-ed25519-cert-v01@openssh.com host certificate/);
      assert.match(listed, /Public key: ED25519-CERT SHA256:/);
      assert.match(listed, /Principals: \n\s+10\.0\.0\.7\n\s+worker-7\n\s+Critical/);
      assert.match(listed, /Valid: after \S+\n/, 'valid from (a little before) now, with no end');
      // Its CA is the one `constellation ssh` writes into known_hosts.
      const caLine = knownHostsCaLine(deriveSshCa(service.masterSecret).publicKey);
      const caKey = caLine.split(' ')[3];
      await fs.writeFile(path.join(dir, 'ca.pub'), `ssh-ed25519 ${caKey}\n`);
      const caFingerprint = execFileSync('ssh-keygen', ['-l', '-f', path.join(dir, 'ca.pub')], { encoding: 'utf8' });
      assert.match(listed, new RegExp(`Signing CA: ED25519 ${caFingerprint.split(' ')[1].replace(/[+/]/g, '\\$&')} `));
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
    assert.equal(
      (await issuer.joinTicket(hello({ certificateRequest: await kubeletCsr([]) }), config)).hostCertificate.length,
      0,
      'no host key asked: no certificate',
    );
    assert.throws(
      () =>
        issuer.checkHello(hello({ certificateRequest: Buffer.alloc(1), hostPublicKey: Buffer.from('junk') }), 'join'),
      /SSH host key is not an SSH public key/,
    );
  });

  it('derives the disk key of the disk the node names (upper-case UUIDs derive like lower-case)', async () => {
    const a = await issuer.joinTicket(
      hello({ certificateRequest: await kubeletCsr([]), diskUuid: 'AAAAAAAA-0000-4000-8000-000000000001' }),
      config,
    );
    const b = await issuer.joinTicket(
      hello({ certificateRequest: await kubeletCsr([]), diskUuid: 'aaaaaaaa-0000-4000-8000-000000000002' }),
      config,
    );
    assert.deepEqual(
      new Uint8Array(a.stateDiskKey),
      deriveStateDiskKey(service.masterSecret, 'aaaaaaaa-0000-4000-8000-000000000001'),
    );
    assert.notDeepEqual(a.stateDiskKey, b.stateDiskKey);
  });

  it('gives a control-plane node the cluster PKI by kubeadm names and where to join the cluster store, nothing of the join service', async () => {
    const endpoints = ['https://127.0.4.10:2379', 'https://127.0.4.11:2379'];
    const ticket = await issuer.joinTicket(
      hello({ certificateRequest: await kubeletCsr(), isControlPlane: true, nodeName: 'cp-1' }),
      config,
      endpoints,
      { name: 'cp-1', role: 'control-plane', addresses: ['10.0.0.7'] },
    );
    assert.deepEqual(ticket.controlPlaneFiles.map((f) => f.name).sort(), [...PKI_FILE_NAMES].sort());
    const byName = new Map(ticket.controlPlaneFiles.map((f) => [f.name, f.data.toString()]));
    assert.equal(byName.get('ca.key'), service.pki['ca.key']);
    assert.equal(byName.get('etcd/ca.crt'), service.pki['etcd/ca.crt']);
    assert.deepEqual(ticket.storeEndpoints, endpoints);
    const worker = await issuer.joinTicket(hello({ certificateRequest: await kubeletCsr([]) }), config, endpoints);
    assert.deepEqual(worker.storeEndpoints, [], 'a worker learns nothing about the store');
  });

  it('gives a rejoining node only its disk key and the measurement secret', () => {
    const request = hello();
    issuer.checkHello(request, 'rejoin');
    const ticket = issuer.rejoinTicket(request, config);
    assert.deepEqual(Object.keys(ticket).sort(), ['measurementSecret', 'stateDiskKey']);
    assert.deepEqual(new Uint8Array(ticket.stateDiskKey), deriveStateDiskKey(service.masterSecret, request.diskUuid));
    assert.equal(sink.size, 0, 'no token for a rejoin');
  });

  it('checkHello names a bad disk UUID, a bad node name and a missing CSR', () => {
    assert.throws(
      () => issuer.checkHello(hello({ diskUuid: 'measurementSecret' }), 'rejoin'),
      /"measurementSecret" is not a UUID/,
    );
    assert.throws(() => issuer.checkHello(hello({ nodeName: 'Worker_1' }), 'rejoin'), /not a valid node name/);
    assert.throws(() => issuer.checkHello(hello(), 'join'), /no certificate request/);
  });

  it("refuses a worker's CSR asking for the API endpoint's IP, and issues no token", async () => {
    const request = hello({ certificateRequest: await kubeletCsr(['10.0.0.7', '127.0.0.1']), nodeName: 'worker-7' });
    await assert.rejects(
      issuer.joinTicket(request, config, [], { name: 'worker-7', role: 'worker', addresses: ['10.0.0.7'] }),
      /kubelet certificate request of node "worker-7" asks for the IP address 127\.0\.0\.1, which is not the node's/,
    );
    assert.equal(sink.size, 0);
  });

  it("names the addresses of the provider's instance listing when the attestation does not identify the instance", async () => {
    const listing = new Map([['worker-8', ['10.0.0.8']]]);
    const withListing = new JoinTicketIssuer({
      tokens: new BootstrapTokenIssuer({ sink, clock }),
      clock,
      instanceAddresses: async (name) => listing.get(name),
    });
    const ticket = await withListing.joinTicket(
      hello({ certificateRequest: await kubeletCsr([]), nodeName: 'worker-8' }),
      config,
    );
    assert.equal(new X509Certificate(ticket.kubeletCert).subjectAltName, 'DNS:worker-8, IP Address:10.0.0.8');
    await assert.rejects(
      withListing.joinTicket(
        hello({ certificateRequest: await kubeletCsr(['10.0.0.9']), nodeName: 'worker-8' }),
        config,
      ),
      /asks for the IP address 10\.0\.0\.9/,
    );
  });

  it('refuses every IP address when nothing says which addresses the instance has', async () => {
    await assert.rejects(
      issuer.joinTicket(hello({ certificateRequest: await kubeletCsr(['10.0.0.7']), nodeName: 'worker-9' }), config),
      /asks for the IP address 10\.0\.0\.7, which is not the node's: .*\(none is known for it\)/,
    );
  });

  it('issues no token when the CSR is bad', async () => {
    const csr = await kubeletCsr();
    csr[csr.length - 3] ^= 0xff;
    await assert.rejects(
      issuer.joinTicket(hello({ certificateRequest: csr }), config),
      /certificate request is not valid/,
    );
    assert.equal(sink.size, 0);
  });
});
