/**
 * The local cluster's TCP load balancer: listens on the gateway address (<prefix>.1) on the control plane's ports
 * and forwards each connection to the same port of a control-plane node, round-robin over the nodes whose last
 * health check passed (a TCP connect to that port, every `healthCheckIntervalMs`, as a cloud load balancer's TCP
 * probe), then over the others, skipping nodes that refuse or do not answer the connect (so a node that went down
 * since its last check costs a retry, not a failed connection). Upstream connections come from the gateway
 * address, so nodes see the load balancer, as in a cloud.
 */
import net from 'node:net';

export interface LoadBalancerOptions {
  host: string;
  ports: readonly number[];
  /** Current backend addresses (asked per connection, so registrations take effect at once). */
  backends: () => string[];
  connectTimeoutMs?: number;
  /** How often each backend's port is probed; default 500 ms. */
  healthCheckIntervalMs?: number;
}

export interface LoadBalancer {
  /** Resolves when the health-check round under way (the first one, right after the start) has ended. */
  healthChecked(): Promise<void>;
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
    const all = options.backends();
    const start = next();
    const rotated = all.map((_, i) => all[(start + i) % all.length]);
    // Healthy ones first; the others stay as a last resort (a node that just came up is not checked yet).
    const backends = [
      ...rotated.filter((b) => healthy.get(`${b}:${port}`) !== false),
      ...rotated.filter((b) => healthy.get(`${b}:${port}`) === false),
    ];
    for (let i = 0; i < backends.length && !client.destroyed; i++) {
      const backend = backends[i];
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

  // backend:port → whether its last probe connected.
  const healthy = new Map<string, boolean>();
  const probe = async () => {
    const targets = options.backends().flatMap((b) => options.ports.map((port) => [b, port] as const));
    await Promise.all(
      targets.map(async ([backend, port]) => {
        try {
          (await connect(backend, port, options.host, timeoutMs)).destroy();
          healthy.set(`${backend}:${port}`, true);
        } catch {
          healthy.set(`${backend}:${port}`, false);
        }
      }),
    );
  };
  let probing: Promise<void> = probe();
  const checks = setInterval(() => {
    probing = probing.then(probe);
  }, options.healthCheckIntervalMs ?? 500);
  checks.unref();

  const close = async () => {
    clearInterval(checks);
    await probing;
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
  return { healthChecked: () => probing, close };
}
