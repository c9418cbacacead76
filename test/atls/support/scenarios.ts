/**
 * Whole exchanges over real gRPC for the tests: Init (verifier = gRPC client) and IssueJoinTicket
 * (verifier = gRPC server), each with a recorded wire, returning what each side ended with.
 */
import type { Issuer, ValidationResult, Validator } from '../../../lib/attestation/types.js';
import {
  attestedClient,
  attestedServer,
  initClientAdapter,
  initServerAdapter,
  joinClientAdapter,
  joinHelloBoundFields,
  joinServerAdapter,
  verifierClient,
  verifierServer,
  type Purpose,
} from '../../../lib/atls/index.js';
import {
  InitClient,
  InitResult,
  InitSecrets,
  InitService,
  type InitRequest,
  type InitResponse,
} from '../../../proto/gen/constellation/init.js';
import {
  JoinHello,
  JoinServiceClient,
  JoinServiceService,
  JoinTicket,
  type JoinRequest,
  type JoinResponse,
} from '../../../proto/gen/constellation/join.js';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import { clientOptions, recordWire, startTestServer, type Wire, type WireOptions } from './wire.js';

export const MASTER_KEY = Buffer.alloc(32, 0xab);
export const KUBECONFIG = Buffer.from('apiVersion: v1\nkind: Config\n');
export const DISK_KEY = Buffer.alloc(32, 0xcd);
const STEP_TIMEOUT_MS = 10_000;

export interface Outcome<T, U> {
  /** The verifier's result, or its error. */
  verifier: { value?: T; error?: unknown; validation?: ValidationResult };
  /** What the attested side received, or its error. */
  attested: { value?: U; error?: unknown };
  wire: Wire;
}

export interface InitScenario {
  issuer: Issuer;
  validator: Validator;
  /** The purpose the node attests for (a misbehaving node may use another). */
  nodePurpose?: Purpose;
  wire?: WireOptions;
}

export async function runInit(scenario: InitScenario): Promise<Outcome<InitResult, InitSecrets>> {
  const attested: Outcome<InitResult, InitSecrets>['attested'] = {};
  let nodeDone!: Promise<void>;
  const server = await startTestServer(InitService, {
    init: (call: ServerDuplexStream<InitRequest, InitResponse>) => {
      nodeDone = (async () => {
        try {
          const session = await attestedServer(call, initServerAdapter, {
            purpose: scenario.nodePurpose ?? 'init',
            issuer: scenario.issuer,
            peer: 'the CLI',
            timeoutMs: STEP_TIMEOUT_MS,
          });
          attested.value = InitSecrets.decode(session.secrets);
          session.channel.send({
            kind: 'progress',
            value: { step: 'kubernetes', message: 'initializing the cluster' },
          });
          const result = InitResult.encode({
            kubeconfig: KUBECONFIG,
            clusterId: Buffer.alloc(32, 1),
            kubernetesBackend: 'none',
            storeCredentials: Buffer.alloc(0),
          }).finish();
          session.channel.send({ kind: 'sealed', value: { jwe: await session.sealToVerifier(result) } });
          session.channel.end();
        } catch (err) {
          attested.error = err;
        }
      })();
    },
  });
  const wire = recordWire(scenario.wire);
  const { credentials, options } = await clientOptions(wire);
  const client = new InitClient(server.address, credentials, options);
  const verifier: Outcome<InitResult, InitSecrets>['verifier'] = {};
  try {
    const session = await verifierClient(client.init(), initClientAdapter, {
      purpose: 'init',
      validator: scenario.validator,
      peer: 'the node',
      expectReply: true,
      timeoutMs: STEP_TIMEOUT_MS,
      secrets: () =>
        InitSecrets.encode(
          InitSecrets.fromPartial({ masterKey: MASTER_KEY, masterSalt: Buffer.alloc(32, 2), clusterName: 'test' }),
        ).finish(),
    });
    verifier.validation = session.peer.result;
    for (;;) {
      const message = await session.channel.receive(['progress', 'sealed'], 'the init result');
      if (message.kind === 'sealed') {
        verifier.value = InitResult.decode(await session.unseal(message.value.jwe));
        break;
      }
    }
  } catch (err) {
    verifier.error = err;
  } finally {
    await nodeDone;
    client.close();
    await server.stop();
  }
  return { verifier, attested, wire };
}

export interface JoinScenario {
  issuer: Issuer;
  validator: Validator;
  /** What the join service handler verifies for ('join' for IssueJoinTicket). */
  servicePurpose?: Purpose;
  nodePurpose?: Purpose;
  hello?: Partial<JoinHello>;
  wire?: WireOptions;
}

export async function runJoin(scenario: JoinScenario): Promise<Outcome<JoinHello, JoinTicket>> {
  const verifier: Outcome<JoinHello, JoinTicket>['verifier'] = {};
  let serviceDone!: Promise<void>;
  const server = await startTestServer(JoinServiceService, {
    issueJoinTicket: (call: ServerDuplexStream<JoinRequest, JoinResponse>) => {
      serviceDone = (async () => {
        try {
          const session = await verifierServer(call, joinServerAdapter, {
            purpose: scenario.servicePurpose ?? 'join',
            validator: scenario.validator,
            peer: 'the joining node',
            timeoutMs: STEP_TIMEOUT_MS,
            hello: {
              what: 'the join request',
              bound: (message) => {
                if (message.kind?.$case !== 'hello') throw new Error('expected a hello');
                return joinHelloBoundFields(message.kind.value);
              },
            },
            secrets: () =>
              JoinTicket.encode(
                JoinTicket.fromPartial({ stateDiskKey: DISK_KEY, token: 'abcdef.0123456789abcdef' }),
              ).finish(),
          });
          verifier.validation = session.peer.result;
          if (session.hello?.kind?.$case === 'hello') verifier.value = session.hello.kind.value;
          session.channel.end();
        } catch (err) {
          verifier.error = err;
        }
      })();
    },
    issueRejoinTicket: (call: ServerDuplexStream<JoinRequest, JoinResponse>) => call.end(),
  });
  const wire = recordWire(scenario.wire);
  const { credentials, options } = await clientOptions(wire);
  const client = new JoinServiceClient(server.address, credentials, options);
  const attested: Outcome<JoinHello, JoinTicket>['attested'] = {};
  const hello = JoinHello.fromPartial({
    diskUuid: '0b5c1f9e-1111-4d2a-9c1e-2f6f0c7d8e9a',
    nodeName: 'worker-0',
    ...scenario.hello,
  });
  try {
    const session = await attestedClient(client.issueJoinTicket(), joinClientAdapter, {
      purpose: scenario.nodePurpose ?? 'join',
      issuer: scenario.issuer,
      peer: 'the join service',
      timeoutMs: STEP_TIMEOUT_MS,
      hello: { kind: { $case: 'hello', value: hello } },
      bound: joinHelloBoundFields(hello),
    });
    attested.value = JoinTicket.decode(session.secrets);
  } catch (err) {
    attested.error = err;
  } finally {
    await serviceDone;
    client.close();
    await server.stop();
  }
  return { verifier, attested, wire };
}
