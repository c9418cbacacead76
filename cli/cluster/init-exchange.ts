/**
 * The CLI side of the attested Init call (docs/design.md#attested-channels; port 9000): waits until the bootstrapper accepts connections,
 * verifies its attestation, seals InitSecrets to it only when the attestation passed, streams its Progress, and
 * opens the InitResult it seals back. A rejected attestation ends the stream with nothing sent (init requests
 * cannot carry a Failure); a Failure from the node surfaces as InitFailedError with the node's log.
 * grpc-js and the generated code load on first use.
 */
import type { Validator } from '../../lib/attestation/types.js';
import { PeerFailureError } from '../../lib/atls/channel.js';
import { UserError } from '../../lib/errors.js';
import type { InitResult, InitSecrets } from '../../proto/gen/constellation/init.js';

export const INIT_PORT = 9000;

export interface InitExchangeOptions {
  /** host:port of the bootstrapper (the cluster endpoint, port 9000). */
  address: string;
  validator: Validator;
  secrets: InitSecrets;
  progress?: (step: string, message: string) => void;
  /** How long to wait for the bootstrapper to accept a connection (nodes may still be booting). */
  connectTimeoutMs?: number;
  /** Longest wait for any one message of the node, including between progress messages (kubeadm init takes minutes). */
  stepTimeoutMs?: number;
}

/** The node ended init with a Failure: its message, and its log for constellation-cluster.log. */
export class InitFailedError extends UserError {
  constructor(
    readonly nodeMessage: string,
    readonly nodeLog: Uint8Array,
  ) {
    super(`The node failed to initialize the cluster: ${nodeMessage}`);
  }
}

/**
 * Loads the modules the init call needs (gRPC, the init API, aTLS) without running anything, for a caller that
 * waits anyway (mini up, while the control planes boot). Loaded when the call starts, they took 0.07-0.15 s of the
 * CLI's CPU after the control plane already listened, in half the runs of a 1+2 `mini up` here. A failed load
 * surfaces when the call loads them again.
 */
export function preloadInitExchange(): void {
  void initExchangeModules().catch(() => undefined);
}

function initExchangeModules() {
  return Promise.all([import('../../proto/gen/constellation/init.js'), import('../../lib/atls/index.js')]);
}

export async function runInitExchange(options: InitExchangeOptions): Promise<InitResult> {
  const [{ InitClient, InitSecrets: InitSecretsCodec, InitResult: InitResultCodec }, atls] =
    await initExchangeModules();
  const peer = `the bootstrapper at ${options.address}`;
  const client = new InitClient(options.address, await atls.createAttestedClientCredentials(), {
    ...atls.attestedChannelOptions,
    // Nodes come up within seconds: retry the connection often rather than with gRPC's 1 s+ backoff; a retry every
    // quarter second at most (a refused TCP connection costs nothing) finds a process node soon after it listens.
    'grpc.initial_reconnect_backoff_ms': 100,
    'grpc.max_reconnect_backoff_ms': 250,
  });
  try {
    await waitForReady(client, options.connectTimeoutMs ?? 120_000, peer);
    const call = client.init();
    try {
      const session = await atls.verifierClient(call, atls.initClientAdapter, {
        purpose: 'init',
        peer,
        validator: options.validator,
        expectReply: true,
        timeoutMs: options.stepTimeoutMs ?? 300_000,
        secrets: () => InitSecretsCodec.encode(options.secrets).finish(),
      });
      for (;;) {
        const message = await session.channel.receive(
          ['progress', 'sealed'],
          'the progress or result of the initialization',
        );
        if (message.kind === 'progress') {
          options.progress?.(message.value.step, message.value.message);
          continue;
        }
        const result = atls.decodeMessage(InitResultCodec, await session.unseal(message.value.jwe), 'The init result');
        session.channel.end();
        return result;
      }
    } catch (err) {
      call.cancel();
      if (err instanceof PeerFailureError) throw new InitFailedError(err.peerMessage, err.log);
      throw err;
    }
  } finally {
    client.close();
  }
}

function waitForReady(
  client: { waitForReady(deadline: number, cb: (err?: Error) => void): void },
  timeoutMs: number,
  peer: string,
): Promise<void> {
  return new Promise((resolve, reject) => {
    client.waitForReady(Date.now() + timeoutMs, (err) => {
      if (!err) resolve();
      else {
        reject(
          new UserError(`Could not reach ${peer} within ${Math.round(timeoutMs / 1000)} s.`, {
            hint: "Check that the cluster's nodes run (`constellation status`); if the node failed to boot, see its log. Then run the command again.",
            cause: err,
          }),
        );
      }
    });
  });
}
