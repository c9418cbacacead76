/**
 * The local cluster's TCP load balancer: listens on the gateway address (<prefix>.1) on the control plane's ports
 * and forwards each connection to the same port of a control-plane node, round-robin over the nodes whose last
 * health check passed (a TCP connect to that port, every `healthCheckIntervalMs`, as a cloud load balancer's TCP
 * probe), then over the others, skipping nodes that refuse or do not answer the connect (so a node that went down
 * since its last check costs a retry, not a failed connection). Upstream connections come from the gateway
 * address, so nodes see the load balancer, as in a cloud.
 *
 * With `holdMs`, a connection (on one of `holdPorts`) that no backend takes is held (its bytes wait) rather than dropped, and forwarded as
 * soon as a backend listens, for up to that long: while a cluster comes up, the CLI's init call and the nodes' join
 * requests then reach the control plane the moment its server listens, instead of after their next retry (up to half
 * a second later each), and a node waiting for the join service makes one attempt per hold instead of several. While
 * connections are held, the ports they wait for are probed every HOLD_PROBE_MS (a refused connect costs next to
 * nothing), once for all of them.
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
  /** How long a connection that no backend takes waits for one before it is dropped; default 0 (dropped at once). */
  holdMs?: number;
  /** The ports whose connections are held (holdMs); default every port. */
  holdPorts?: readonly number[];
}

/** How often the ports that held connections wait for are probed. */
export const HOLD_PROBE_MS = 25;

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
  let closed = false;

  /** Whether a backend accepts a connection on the port (a probe: the connection is closed at once). */
  const reaches = async (backend: string, port: number): Promise<boolean> => {
    try {
      (await connect(backend, port, options.host, timeoutMs)).destroy();
      return true;
    } catch {
      return false;
    }
  };

  /** Connects the client to a backend; false when none took it. */
  const tryBackends = async (client: net.Socket, port: number, next: () => number): Promise<boolean> => {
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
        return true; // the client is gone: nothing left to forward
      }
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.on('close', () => upstream.destroy());
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
      return true;
    }
    return false;
  };

  const forward = async (client: net.Socket, port: number, next: () => number) => {
    track(client);
    client.pause();
    client.on('error', () => client.destroy());
    const held = options.holdPorts === undefined || options.holdPorts.includes(port);
    const deadline = Date.now() + (held ? (options.holdMs ?? 0) : 0);
    while (!client.destroyed && !closed) {
      if (await tryBackends(client, port, next)) return;
      const left = deadline - Date.now();
      if (left <= 0) break;
      await backendListens(port, left, client);
    }
    client.destroy();
  };

  // Held connections: port → wake-ups of the connections that wait for a backend on it.
  const waiting = new Map<number, Set<() => void>>();
  let holdProbe: NodeJS.Timeout | undefined;
  /** Resolves when a probe finds a backend listening on `port`, after `ms`, or when the client or the balancer closes. */
  const backendListens = (port: number, ms: number, client: net.Socket) =>
    new Promise<void>((resolve) => {
      const waiters = waiting.get(port) ?? new Set();
      waiting.set(port, waiters);
      const wake = () => {
        clearTimeout(timer);
        client.removeListener('close', wake);
        waiters.delete(wake);
        if (waiters.size === 0) waiting.delete(port);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      client.once('close', wake);
      waiters.add(wake);
      holdProbe ??= setTimeout(probeHeld, HOLD_PROBE_MS);
    });
  const probeHeld = async () => {
    await Promise.all(
      [...waiting.keys()].map(async (port) => {
        for (const backend of options.backends()) {
          if (!(await reaches(backend, port))) continue;
          healthy.set(`${backend}:${port}`, true);
          for (const wake of [...(waiting.get(port) ?? [])]) wake();
          return;
        }
      }),
    );
    holdProbe = waiting.size > 0 && !closed ? setTimeout(probeHeld, HOLD_PROBE_MS) : undefined;
  };

  // backend:port → whether its last probe connected.
  const healthy = new Map<string, boolean>();
  const probe = async () => {
    const targets = options.backends().flatMap((b) => options.ports.map((port) => [b, port] as const));
    await Promise.all(
      targets.map(async ([backend, port]) => healthy.set(`${backend}:${port}`, await reaches(backend, port))),
    );
  };
  let probing: Promise<void> = probe();
  const checks = setInterval(() => {
    probing = probing.then(probe);
  }, options.healthCheckIntervalMs ?? 500);
  checks.unref();

  const close = async () => {
    closed = true;
    clearInterval(checks);
    clearTimeout(holdProbe);
    for (const waiters of waiting.values()) for (const wake of [...waiters]) wake();
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
