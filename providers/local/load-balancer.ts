/**
 * The local cluster's TCP load balancer: listens on the gateway address (<prefix>.1) on the control plane's ports
 * and forwards each connection to the same port of a control-plane node, round-robin, skipping nodes that refuse
 * or do not answer the connect (so a node that is down or still booting costs a retry, not a failed connection).
 * Upstream connections come from the gateway address, so nodes see the load balancer, as in a cloud.
 */
import net from 'node:net';

export interface LoadBalancerOptions {
  host: string;
  ports: readonly number[];
  /** Current backend addresses (asked per connection, so registrations take effect at once). */
  backends: () => string[];
  connectTimeoutMs?: number;
}

export interface LoadBalancer {
  close(): Promise<void>;
}

function connect(host: string, port: number, localAddress: string, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port, localAddress, allowHalfOpen: true });
    const timer = setTimeout(() => socket.destroy(new Error('connect timed out')), timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeListener('error', reject);
      resolve(socket);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** Binds every port (rejecting with the bind error, e.g. EADDRINUSE, after closing what was bound) and forwards. */
export async function startLoadBalancer(options: LoadBalancerOptions): Promise<LoadBalancer> {
  const timeoutMs = options.connectTimeoutMs ?? 2000;
  const servers: net.Server[] = [];
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };

  const forward = async (client: net.Socket, port: number, next: () => number) => {
    track(client);
    client.pause();
    client.on('error', () => client.destroy());
    const backends = options.backends();
    const start = next();
    for (let i = 0; i < backends.length && !client.destroyed; i++) {
      const backend = backends[(start + i) % backends.length];
      let upstream: net.Socket;
      try {
        upstream = await connect(backend, port, options.host, timeoutMs);
      } catch {
        continue;
      }
      track(upstream);
      if (client.destroyed) {
        upstream.destroy();
        return;
      }
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.on('close', () => upstream.destroy());
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
      return;
    }
    client.destroy();
  };

  const close = async () => {
    for (const s of sockets) s.destroy();
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  };

  try {
    for (const port of options.ports) {
      let counter = 0;
      // Half-open: a client that finished sending still gets the whole answer.
      const server = net.createServer({ allowHalfOpen: true }, (client) => void forward(client, port, () => counter++));
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, options.host, () => {
          server.removeListener('error', reject);
          resolve();
        });
      });
      servers.push(server);
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { close };
}
