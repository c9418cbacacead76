/**
 * A gRPC client at the HTTP/2 level, for attackers in tests and benchmarks: grpc-js cannot choose its source
 * address, and an attacker must come from another address than the honest client (127.0.0.2 vs 127.0.0.1; all
 * of 127.0.0.0/8 is this machine on Linux). Opens streams on one TLS connection, sends length-prefixed messages
 * and reports the call's grpc-status; it never verifies the server (attested servers use self-signed TLS).
 */
import http2 from 'node:http2';

export interface RawCallStatus {
  code: number;
  message: string;
}

export interface RawCall {
  send(message: Uint8Array): void;
  /** The call's status once the server ends it (trailers, or a trailers-only response). */
  status: Promise<RawCallStatus>;
  cancel(): void;
}

export interface RawSession {
  call(path: string): RawCall;
  close(): void;
}

/** A TLS HTTP/2 session to `host:port` from `localAddress`. */
export async function openRawSession(host: string, port: number, localAddress: string): Promise<RawSession> {
  const session = http2.connect(`https://${host}:${port}`, {
    rejectUnauthorized: false,
    localAddress,
    servername: 'constellation',
  } as http2.SecureClientSessionOptions);
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  session.on('error', () => {});
  return {
    call(path) {
      const stream = session.request({
        ':method': 'POST',
        ':path': path,
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      stream.on('error', () => {});
      stream.on('data', () => {});
      const status = new Promise<RawCallStatus>((resolve) => {
        const settle = (headers: http2.IncomingHttpHeaders) => {
          if (headers['grpc-status'] === undefined) return false;
          resolve({
            code: Number(headers['grpc-status']),
            message: decodeURIComponent(String(headers['grpc-message'] ?? '')),
          });
          return true;
        };
        stream.on('response', settle);
        stream.on('trailers', settle);
        stream.on('close', () => resolve({ code: -1, message: 'the stream closed without a status' }));
      });
      return {
        send(message) {
          const frame = Buffer.alloc(5 + message.length);
          frame.writeUInt32BE(message.length, 1);
          frame.set(message, 5);
          stream.write(frame);
        },
        status,
        cancel: () => stream.close(http2.constants.NGHTTP2_CANCEL),
      };
    },
    close: () => session.destroy(),
  };
}
