import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MemoryTokenSink, TOKEN_PATTERN } from '../../joinservice/bootstrap-token.js';
import { startJoinService, type JoinServiceHandle } from '../../joinservice/server.js';
import {
  attestedChannelOptions,
  attestedClient,
  createAttestedClientCredentials,
  joinClientAdapter,
  joinHelloBoundFields,
} from '../../lib/atls/index.js';
import type { Issuer, Measurements } from '../../lib/attestation/types.js';
import { localInstanceInfo, VARIANT } from '../../lib/attestation/variants/local-vtpm.js';
import { VtpmIssuer } from '../../lib/attestation/vtpm-issuer.js';
import { deriveMeasurementSecret, deriveStateDiskKey } from '../../lib/kms/index.js';
import { createLogger } from '../../lib/logging/index.js';
import { TpmClient } from '../../lib/tpm/client.js';
import { TPM_ALG } from '../../lib/tpm/constants.js';
import { startSwtpm } from '../../lib/tpm/swtpm.js';
import { generateSshHostKey } from '../../lib/ssh/host-key.js';
import { JoinServiceClient } from '../../proto/gen/constellation/join.js';
import { diskUuidOf, hello, kubeletCsr, requestTicket } from './support/join-client.js';
import { makeTestStore, type TestStore } from './support/test-store.js';
import { imagePcrs, measurementsFor, SoftwareVtpm, TestAkRegistry } from './support/software-vtpm.js';
import { requireTool } from '../support/require-tool.js';

interface Harness {
  service: TestStore;
  join: JoinServiceHandle;
  address: string;
  registry: TestAkRegistry;
  sink: MemoryTokenSink;
  log: string[];
  /** How often the service called beforePeerJoins (before a control plane's ticket names the store's members). */
  peerJoins: number;
}

async function startHarness(measurements: Measurements): Promise<Harness> {
  const service = await makeTestStore(measurements);
  const registry = new TestAkRegistry();
  const sink = new MemoryTokenSink();
  const log: string[] = [];
  let peerJoins = 0;
  try {
    const join = await startJoinService({
      host: '127.0.0.1',
      port: 0,
      store: service.store,
      validatorDeps: { akRegistry: registry },
      logger: createLogger((line) => log.push(line)),
      tokenSink: sink,
      stepTimeoutMs: 10_000,
      beforePeerJoins: async () => void peerJoins++,
    });
    return {
      service,
      join,
      address: `127.0.0.1:${join.port}`,
      registry,
      sink,
      log,
      get peerJoins() {
        return peerJoins;
      },
    };
  } catch (err) {
    await service.store.close();
    throw err;
  }
}

async function stopHarness(h: Harness | undefined): Promise<void> {
  await h?.join.close();
  await h?.service.store.close();
}

function decisions(h: Harness): Array<Record<string, unknown>> {
  return h.log.map((line) => JSON.parse(line)).filter((l) => l.verdict !== undefined);
}

/** No secret of the cluster appears in the service's log. */
function assertNoSecretsLogged(h: Harness, secrets: Array<Uint8Array | string>): void {
  const text = h.log.join('\n');
  for (const secret of secrets) {
    for (const form of typeof secret === 'string'
      ? [secret]
      : [Buffer.from(secret).toString('hex'), Buffer.from(secret).toString('base64')]) {
      assert.ok(!text.includes(form), 'a secret was logged');
    }
  }
  assert.ok(!text.includes('PRIVATE KEY'));
}

describe('joinservice/server (software vTPM nodes, real local-vtpm validator, gRPC on 127.0.0.1)', () => {
  let h: Harness;
  const goodPcrs = imagePcrs('image v1');
  before(async () => {
    h = await startHarness(measurementsFor(goodPcrs));
  });
  after(() => stopHarness(h));

  function node(
    name: string,
    pcrs = goodPcrs,
    registered = true,
    role: 'control-plane' | 'worker' = 'worker',
    addresses?: string[],
  ): SoftwareVtpm {
    const vtpm = new SoftwareVtpm(name, pcrs);
    if (registered) h.registry.register(name, vtpm.akPublic, role, addresses);
    return vtpm;
  }

  it('gives an attested worker its ticket, and logs the decision without secrets', async () => {
    const request = hello({ nodeName: 'worker-1', certificateRequest: await kubeletCsr(['10.0.0.11']) });
    const attempt = await requestTicket(
      h.address,
      node('worker-1', goodPcrs, true, 'worker', ['10.0.0.11']),
      request,
      'join',
    );
    assert.equal(attempt.error, undefined);
    const ticket = attempt.ticket!;
    assert.deepEqual(attempt.responses, ['challenge', 'sealedTicket']);
    assert.deepEqual(new Uint8Array(ticket.stateDiskKey), deriveStateDiskKey(h.service.masterSecret, request.diskUuid));
    assert.deepEqual(new Uint8Array(ticket.measurementSecret), deriveMeasurementSecret(h.service.masterSecret));
    assert.match(ticket.token, TOKEN_PATTERN);
    assert.ok(h.sink.isValid(ticket.token));
    assert.deepEqual(ticket.controlPlaneFiles, []);
    const cert = new X509Certificate(ticket.kubeletCert);
    assert.ok(cert.verify(new X509Certificate(h.service.pki['ca.crt']).publicKey));
    assert.equal(cert.subjectAltName, 'DNS:worker-1, IP Address:10.0.0.11');

    const decision = decisions(h).find((d) => d.nodeName === 'worker-1')!;
    assert.equal(decision.verdict, 'accepted');
    assertNoSecretsLogged(h, [ticket.stateDiskKey, ticket.measurementSecret, ticket.token, h.service.masterSecret.key]);
    assert.equal(h.peerJoins, 0, 'a worker does not join the store');
  });

  it('gives an attested control-plane node the CA files; a rejoining node gets its disk key back', async () => {
    const peerJoinsBefore = h.peerJoins;
    const cp = await requestTicket(
      h.address,
      node('cp-1', goodPcrs, true, 'control-plane'),
      hello({ nodeName: 'cp-1', isControlPlane: true, certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(cp.error, undefined);
    assert.equal(
      cp.ticket!.controlPlaneFiles.find((f) => f.name === 'ca.key')?.data.toString(),
      h.service.pki['ca.key'],
    );
    assert.equal(
      h.peerJoins,
      peerJoinsBefore + 1,
      "the store host heard of the new member before the ticket named the store's members",
    );

    const rejoin = await requestTicket(h.address, node('worker-2'), hello({ nodeName: 'worker-2' }), 'rejoin');
    assert.equal(rejoin.error, undefined);
    assert.equal(h.peerJoins, peerJoinsBefore + 1, 'a rejoin adds no member');
    assert.deepEqual(
      new Uint8Array(rejoin.ticket!.stateDiskKey),
      deriveStateDiskKey(h.service.masterSecret, diskUuidOf('worker-2')),
    );
  });

  it('refuses control-plane files to a node the provider created as a worker: no ticket, no CA key', async () => {
    const attempt = await requestTicket(
      h.address,
      node('worker-5'),
      hello({ nodeName: 'worker-5', isControlPlane: true, certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(attempt.ticket, undefined);
    assert.deepEqual(attempt.responses, ['challenge', 'failure'], 'no Sealed message on the wire');
    assert.match(
      attempt.error!.message,
      /control-plane ticket was asked for, but the provider created instance "worker-5" as a worker node/,
    );
  });

  it('refuses a join request that names another node than the attested instance', async () => {
    const attempt = await requestTicket(
      h.address,
      node('worker-6'),
      hello({ nodeName: 'worker-1', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(attempt.ticket, undefined);
    assert.deepEqual(attempt.responses, ['challenge', 'failure'], 'no Sealed message on the wire');
    assert.match(attempt.error!.message, /names node "worker-1", but the attestation comes from instance "worker-6"/);
  });

  it("refuses a worker asking for a kubelet certificate for the API endpoint's IP: no ticket, no token, a clear message", async () => {
    const apiEndpointIp = h.service.contents.cluster.apiServerEndpoint.split(':')[0];
    const tokensBefore = h.sink.size;
    const request = hello({
      nodeName: 'worker-evil',
      certificateRequest: await kubeletCsr(['10.0.0.12', apiEndpointIp]),
    });
    const attempt = await requestTicket(
      h.address,
      node('worker-evil', goodPcrs, true, 'worker', ['10.0.0.12']),
      request,
      'join',
    );
    assert.equal(attempt.ticket, undefined);
    assert.deepEqual(attempt.responses, ['challenge', 'failure'], 'no Sealed message on the wire');
    assert.equal(
      attempt.error!.message,
      `The join service ended the exchange: The kubelet certificate request of node "worker-evil" asks for the IP address ${apiEndpointIp}, which is not the node's: a kubelet certificate names only the node's own name and addresses (its addresses are 10.0.0.12).`,
    );
    assert.equal(h.sink.size, tokensBefore);
    const decision = decisions(h).find((d) => d.nodeName === 'worker-evil')!;
    assert.equal(decision.level, 'warn');
    assert.equal(decision.verdict, 'refused');
  });

  it('refuses a document with a "constructor": null key as a refusal (warn), not as an internal error', async () => {
    const vtpm = node('worker-proto');
    const hostile: Issuer = {
      variant: vtpm.variant,
      issue: async (userData, nonce) => {
        const document = await vtpm.issue(userData, nonce);
        return { ...document, attestation: { ...document.attestation, constructor: null } };
      },
    };
    const attempt = await requestTicket(
      h.address,
      hostile,
      hello({ nodeName: 'worker-proto', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(attempt.ticket, undefined);
    assert.match(
      attempt.error!.message,
      /attestation document has the key "attestation\.constructor", which is not allowed/,
    );
    const decision = decisions(h).find((d) => d.nodeName === 'worker-proto')!;
    assert.equal(decision.level, 'warn');
    assert.doesNotMatch(String(decision.reason), /internal error/);
  });

  it('refuses a worker whose image changed: the message names the PCR, expected and actual; no ticket, no token', async () => {
    const changed = new Map(goodPcrs);
    changed.set(9, new Uint8Array(createHash('sha256').update('tampered initramfs').digest()));
    const tokensBefore = h.sink.size;
    const attempt = await requestTicket(
      h.address,
      node('worker-bad', changed),
      hello({ nodeName: 'worker-bad', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(attempt.ticket, undefined);
    assert.deepEqual(attempt.responses, ['challenge', 'failure'], 'no Sealed message on the wire');
    const message = attempt.error!.message;
    assert.match(message, /PCR 9/);
    assert.ok(message.includes(Buffer.from(goodPcrs.get(9)!).toString('hex')), 'names the expected value');
    assert.ok(message.includes(Buffer.from(changed.get(9)!).toString('hex')), 'names the actual value');
    assert.equal(h.sink.size, tokensBefore);
    const decision = decisions(h).find((d) => d.nodeName === 'worker-bad')!;
    assert.equal(decision.verdict, 'refused');
    assert.match(String(decision.reason), /PCR 9/);
  });

  it('refuses a node the provider did not register, even with the right PCRs', async () => {
    const attempt = await requestTicket(
      h.address,
      node('stranger', goodPcrs, false),
      hello({ nodeName: 'stranger', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(attempt.ticket, undefined);
    assert.deepEqual(attempt.responses, ['challenge', 'failure']);
    assert.match(attempt.error!.message, /no attestation key is registered for instance "stranger"/);
  });

  it('refuses a node whose attestation does not bind the join request it sent (asks to be control plane after attesting as worker)', async () => {
    const vtpm = node('worker-3');
    const sent = hello({ nodeName: 'worker-3', isControlPlane: true, certificateRequest: await kubeletCsr() });
    const client = new JoinServiceClient(h.address, await createAttestedClientCredentials(), attestedChannelOptions);
    try {
      const call = client.issueJoinTicket();
      await assert.rejects(
        attestedClient(call, joinClientAdapter, {
          purpose: 'join',
          peer: 'the join service',
          issuer: vtpm,
          bound: joinHelloBoundFields({ ...sent, isControlPlane: false }),
          hello: { kind: { $case: 'hello', value: sent } },
        }),
        /not bound to this join exchange/,
      );
    } finally {
      client.close();
    }
    const decision = decisions(h).find((d) => d.nodeName === 'worker-3')!;
    assert.equal(decision.level, 'warn');
    assert.match(String(decision.reason), /not bound to this join exchange/);
  });

  it('refuses a join request whose SSH host key is not the one the attestation binds (a swapped host key)', async () => {
    const vtpm = node('worker-4');
    const attested = generateSshHostKey().publicKey.blob;
    const sent = hello({
      nodeName: 'worker-4',
      certificateRequest: await kubeletCsr(),
      hostPublicKey: Buffer.from(generateSshHostKey().publicKey.blob),
    });
    const client = new JoinServiceClient(h.address, await createAttestedClientCredentials(), attestedChannelOptions);
    try {
      await assert.rejects(
        attestedClient(client.issueJoinTicket(), joinClientAdapter, {
          purpose: 'join',
          peer: 'the join service',
          issuer: vtpm,
          bound: joinHelloBoundFields({ ...sent, hostPublicKey: Buffer.from(attested) }),
          hello: { kind: { $case: 'hello', value: sent } },
        }),
        /not bound to this join exchange/,
      );
    } finally {
      client.close();
    }
  });

  it('refuses a malformed join request before attesting', async () => {
    const attempt = await requestTicket(
      h.address,
      node('worker-4'),
      hello({ nodeName: 'worker-4', diskUuid: 'measurementSecret' }),
      'join',
    );
    assert.deepEqual(attempt.responses, ['failure']);
    assert.match(attempt.error!.message, /"measurementSecret" is not a UUID/);
  });

  it('reloads a changed attestation config without restart: the new image is accepted, the old refused', async () => {
    const newPcrs = imagePcrs('image v2');
    const v2 = { nodeName: 'worker-v2', certificateRequest: await kubeletCsr() };
    const before = await requestTicket(h.address, node('worker-v2', newPcrs), hello(v2), 'join');
    assert.match(before.error!.message, /PCR 4/);

    await h.service.store.writeJoinConfig({
      attestation: { variant: 'local-vtpm', config: { measurements: measurementsFor(newPcrs) } },
    });
    const after = await requestTicket(
      h.address,
      node('worker-v2b', newPcrs),
      hello({ ...v2, nodeName: 'worker-v2b' }),
      'join',
    );
    assert.equal(after.error, undefined);
    const old = await requestTicket(
      h.address,
      node('worker-v1', goodPcrs),
      hello({ nodeName: 'worker-v1', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.match(old.error!.message, /PCR 4/);

    // During an upgrade the old measurements stay accepted next to the new ones.
    await h.service.store.writeJoinConfig({
      attestation: {
        variant: 'local-vtpm',
        config: { measurements: measurementsFor(newPcrs) },
        previous: [{ measurements: measurementsFor(goodPcrs) }],
      },
    });
    const during = await requestTicket(
      h.address,
      node('worker-v1b', goodPcrs),
      hello({ nodeName: 'worker-v1b', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(during.error, undefined);
  });

  it('keeps serving with the last good config when the new one is broken', async () => {
    h.service.store.entries.set('join/attestation-config', '{"variant": "local-vtpm", "conf');
    await h.service.store.putNode({
      name: 'x',
      role: 'worker',
      diskUuid: 'x',
      joinedAt: 'x',
      lastEntry: 'join',
      lastEntryAt: 'x',
    }); // a new revision
    const attempt = await requestTicket(
      h.address,
      node('worker-5', goodPcrs),
      hello({ nodeName: 'worker-5', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(attempt.error, undefined);
    assert.ok(h.log.some((l) => l.includes('keeping the last good one')));
  });
});

const hasSwtpm = spawnSync('swtpm', ['--version'], { stdio: 'ignore' }).status === 0;

describe('joinservice/server (swtpm nodes, VtpmIssuer, local-vtpm validator from the registry)', function () {
  interface SwtpmNode {
    issuer: Issuer;
    ak: Uint8Array;
    pcrs: Map<number, Uint8Array>;
    extend(index: number, what: string): Promise<void>;
    close(): Promise<void>;
  }
  const nodes: SwtpmNode[] = [];
  let h: Harness | undefined;
  let tmp: string;

  /** A node with its own swtpm, measured like the node image. */
  async function swtpmNode(instance: string): Promise<SwtpmNode> {
    const swtpm = await startSwtpm({ stateDir: path.join(tmp, instance) });
    const tpm = await TpmClient.connect(swtpm.serverSocket).catch(async (err) => {
      await swtpm.stop();
      throw err;
    });
    const node: SwtpmNode = {
      issuer: new VtpmIssuer({ variant: VARIANT, tpm, instanceInfo: localInstanceInfo(instance) }),
      ak: (await tpm.createAttestationKey()).publicArea,
      pcrs: new Map(),
      extend: async (index, what) =>
        tpm.pcrExtend(index, [{ hashAlg: TPM_ALG.SHA256, digest: createHash('sha256').update(what).digest() }]),
      close: async () => {
        tpm.close();
        await swtpm.stop();
      },
    };
    nodes.push(node);
    for (const index of [4, 9, 11]) await node.extend(index, `image v1 part ${index}`);
    node.pcrs = await tpm.pcrRead(TPM_ALG.SHA256, [...Array(24).keys()]);
    return node;
  }

  before(async function () {
    requireTool(this, hasSwtpm, 'swtpm');
    tmp = await mkdtemp(path.join(os.tmpdir(), 'js-swtpm-'));
  });
  after(async () => {
    await stopHarness(h);
    for (const node of nodes) await node.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('accepts a registered node, refuses it once its image changed (naming the PCR), and refuses an unregistered node', async () => {
    const [good, stranger] = await Promise.all([swtpmNode('node-a'), swtpmNode('node-b')]);
    assert.deepEqual(stranger.pcrs.get(9), good.pcrs.get(9), 'the stranger runs the same image');
    h = await startHarness(measurementsFor(good.pcrs));
    h.registry.register('node-a', good.ak);

    const accepted = await requestTicket(
      h.address,
      good.issuer,
      hello({ nodeName: 'node-a', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(accepted.error, undefined);
    assert.deepEqual(
      new Uint8Array(accepted.ticket!.stateDiskKey),
      deriveStateDiskKey(h.service.masterSecret, diskUuidOf('node-a')),
    );

    const unregistered = await requestTicket(
      h.address,
      stranger.issuer,
      hello({ nodeName: 'node-b', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(unregistered.ticket, undefined);
    assert.deepEqual(unregistered.responses, ['challenge', 'failure']);
    assert.match(unregistered.error!.message, /no attestation key is registered for instance "node-b"/);

    await good.extend(9, 'a changed initramfs');
    const changed = await requestTicket(
      h.address,
      good.issuer,
      hello({ nodeName: 'node-a', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(changed.ticket, undefined);
    assert.deepEqual(changed.responses, ['challenge', 'failure'], 'no Sealed message on the wire');
    assert.match(changed.error!.message, /PCR 9: expected [0-9a-f]{64}, got [0-9a-f]{64}/);
  });
});
