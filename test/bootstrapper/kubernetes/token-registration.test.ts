/**
 * The join service with the kubeadm backend's token sink (stand-in kubectl on PATH, software vTPM nodes, gRPC on
 * 127.0.0.1): a ticket carries only a token registered with the API server, and a token that could not be registered
 * refuses the join with kubectl's reason, without the token.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createBackend, type BackendOptions } from '../../../bootstrapper/kubernetes/backend.js';
import { startJoinService, type JoinServiceHandle } from '../../../joinservice/server.js';
import { createLogger } from '../../../lib/logging/index.js';
import { hello, kubeletCsr, requestTicket } from '../../joinservice/support/join-client.js';
import { makeTestStore, type TestStore } from '../../joinservice/support/test-store.js';
import { imagePcrs, measurementsFor, SoftwareVtpm, TestAkRegistry } from '../../joinservice/support/software-vtpm.js';
import { ADMIN_CONF_CONTENT, installStandinKubeadm, type Standin } from './standin-kubeadm.js';

describe('bootstrapper/kubernetes: the join service registers its tokens with kubeadm', () => {
  let dir: string;
  let service: TestStore;
  let standin: Standin;
  let join: JoinServiceHandle | undefined;
  let log: string[];
  const registry = new TestAkRegistry();

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'token-registration-'));
    service = await makeTestStore(measurementsFor(imagePcrs()));
    standin = await installStandinKubeadm(dir);
    await fs.mkdir(path.dirname(standin.adminConf), { recursive: true });
    await fs.writeFile(standin.adminConf, ADMIN_CONF_CONTENT);
    log = [];
  });
  afterEach(async () => {
    await join?.close();
    join = undefined;
    await service.store.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  async function startWithKubeadm(over: Partial<BackendOptions> = {}): Promise<string> {
    const logger = createLogger((line) => log.push(line));
    const backend = createBackend('kubeadm', {
      workDir: path.join(dir, 'work'),
      pkiDir: standin.pkiDir,
      adminConfPath: standin.adminConf,
      env: standin.env,
      ...over,
    });
    join = await startJoinService({
      host: '127.0.0.1',
      port: 0,
      store: service.store,
      validatorDeps: { akRegistry: registry },
      logger,
      tokenSink: backend.tokenSink(logger),
      stepTimeoutMs: 10_000,
    });
    return `127.0.0.1:${join.port}`;
  }

  function worker(name: string): SoftwareVtpm {
    const vtpm = new SoftwareVtpm(name);
    registry.register(name, vtpm.akPublic, 'worker');
    return vtpm;
  }

  it("hands out the token it registered (kubeadm's bootstrap-token Secret, through kubectl), and logs it only by its id", async () => {
    const address = await startWithKubeadm();
    const attempt = await requestTicket(
      address,
      worker('worker-1'),
      hello({ nodeName: 'worker-1', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(attempt.error, undefined, attempt.error?.message);
    const token = attempt.ticket!.token;
    const calls = await standin.calls();
    assert.deepEqual(
      calls.map((c) => c.args),
      [
        [
          'apply',
          '--server-side',
          '--force-conflicts',
          '--kubeconfig',
          standin.adminConf,
          '-f',
          path.join(dir, 'work', `bootstrap-token-${token.split('.')[0]}.yaml`),
        ],
      ],
    );
    assert.equal(
      (calls[0]!.docs[0] as { stringData: Record<string, string> }).stringData['token-secret'],
      token.split('.')[1],
    );
    const text = log.join('\n');
    assert.ok(text.includes(`bootstrap token ${token.split('.')[0]} registered with the API server`));
    assert.ok(!text.includes(token.split('.')[1]!), 'the token secret is not logged');
  });

  it("refuses the join when the token cannot be registered: kubectl's reason, no ticket, no token anywhere", async () => {
    const address = await startWithKubeadm({ env: { ...standin.env, STANDIN_FAIL_KUBECTL: '1' } });
    const attempt = await requestTicket(
      address,
      worker('worker-2'),
      hello({ nodeName: 'worker-2', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(attempt.ticket, undefined);
    assert.deepEqual(attempt.responses, ['challenge', 'failure'], 'no Sealed message on the wire');
    const message = attempt.error!.message;
    assert.match(
      message,
      /The bootstrap token for this join could not be registered with Kubernetes, so no ticket was issued: kubectl bootstrap token failed with exit code 1:/,
    );
    assert.match(message, /unable to recognize/);

    const [call] = await standin.calls();
    const secretHalf = (call!.docs[0] as { stringData: Record<string, string> }).stringData['token-secret']!;
    assert.ok(!message.includes(secretHalf), 'the token is not in the refusal');
    const text = log.join('\n');
    assert.ok(!text.includes(secretHalf), 'the token is not logged');
    const decision = log
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((l) => l.verdict !== undefined)!;
    assert.equal(decision.verdict, 'refused');
    assert.match(String(decision.reason), /could not be registered with Kubernetes/);
  });

  it('refuses the join on a node without the admin kubeconfig, without running kubeadm', async () => {
    const address = await startWithKubeadm({ adminConfPath: path.join(dir, 'no-such-admin.conf') });
    const attempt = await requestTicket(
      address,
      worker('worker-3'),
      hello({ nodeName: 'worker-3', certificateRequest: await kubeletCsr() }),
      'join',
    );
    assert.equal(attempt.ticket, undefined);
    assert.deepEqual(attempt.responses, ['challenge', 'failure']);
    assert.match(
      attempt.error!.message,
      /This node has no admin kubeconfig at .*no-such-admin\.conf, so it cannot register the bootstrap token/,
    );
    assert.deepEqual(await standin.calls(), []);
  });
});
