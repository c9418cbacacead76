/**
 * Test harness for attested exchanges over real gRPC (TLS on 127.0.0.1, ephemeral port): a server with
 * attested credentials, and a client interceptor that records every message crossing the wire in both
 * directions (and can alter one, playing a man in the middle), so tests assert what each side really sent.
 */
import {
  InterceptingCall,
  type Interceptor,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import {
  attestedChannelOptions,
  createAttestedClientCredentials,
  JOIN_SERVICE_LIMITS,
  startAttestedServer,
} from '../../../lib/atls/index.js';

export interface WireEntry {
  from: 'client' | 'server';
  message: unknown;
}

export interface Wire {
  log: WireEntry[];
  interceptor: Interceptor;
  /** The oneof cases each side sent, in order, e.g. ['client:challenge', 'server:evidence']. */
  cases(): string[];
}

export interface WireOptions {
  /** Alters a message the server sent before the client sees it. */
  fromServer?: (message: unknown) => unknown;
  /** Alters a message the client sends before it goes out. */
  fromClient?: (message: unknown) => unknown;
}

export function recordWire(options: WireOptions = {}): Wire {
  const log: WireEntry[] = [];
  const interceptor: Interceptor = (callOptions, nextCall) =>
    new InterceptingCall(nextCall(callOptions), {
      start(metadata, listener, next) {
        next(metadata, {
          onReceiveMessage(message, nextMessage) {
            const altered = options.fromServer ? options.fromServer(message) : message;
            log.push({ from: 'server', message: altered });
            nextMessage(altered);
          },
        });
      },
      sendMessage(message, next) {
        const altered = options.fromClient ? options.fromClient(message) : message;
        log.push({ from: 'client', message: altered });
        next(altered);
      },
    });
  return {
    log,
    interceptor,
    cases: () => log.map((e) => `${e.from}:${(e.message as { kind?: { $case: string } }).kind?.$case ?? 'message'}`),
  };
}

export interface TestServer {
  address: string;
  stop(): Promise<void>;
}

export async function startTestServer(
  service: ServiceDefinition,
  implementation: UntypedServiceImplementation,
): Promise<TestServer> {
  const server = await startAttestedServer({
    what: 'test server',
    service,
    implementation,
    host: '127.0.0.1',
    port: 0,
    shutdownGraceMs: 0,
    limits: JOIN_SERVICE_LIMITS,
  });
  return {
    address: `127.0.0.1:${server.port}`,
    stop: () => server.close(),
  };
}

export async function clientOptions(wire?: Wire) {
  return {
    credentials: await createAttestedClientCredentials(),
    options: { ...attestedChannelOptions, ...(wire ? { interceptors: [wire.interceptor] } : {}) },
  };
}
