/** The TCP load balancer in-process: round-robin over control-plane backends, skipping ones that refuse. */
import assert from 'node:assert/strict';
import net from 'node:net';
import { startLoadBalancer, type LoadBalancer } from '../../../providers/local/load-balancer.js';
import { loopbackPrefixes } from './support.js';

const PORT = 9000;

function listen(server: net.Server, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(PORT, host, () => resolve());
  });
}

/** Connects, sends a line, returns what the other side answered before closing (or '' when it was dropped). */
function ask(host: string, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(PORT, host, () => socket.end(`${line}\n`));
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe('local provider: load balancer', () => {
  let prefix: string;
  let lb: LoadBalancer;
  const backends: net.Server[] = [];
  let registered: string[] = [];
  const sources: string[] = [];

  before(async () => {
    // Another test process may use a range right now: take the first one where everything binds.
    for (const candidate of loopbackPrefixes()) {
      const servers = ['10', '11'].map((host) =>
        net.createServer((socket) => {
          sources.push(socket.remoteAddress ?? '');
          socket.once('data', (d: Buffer) => socket.end(`${candidate}.${host} got ${d.toString().trim()}`));
        }),
      );
      try {
        for (const [i, s] of servers.entries()) await listen(s, `${candidate}.${['10', '11'][i]}`);
        lb = await startLoadBalancer({
          host: `${candidate}.1`,
          ports: [PORT],
          backends: () => registered,
          connectTimeoutMs: 500,
        });
      } catch {
        for (const s of servers) s.close();
        continue;
      }
      prefix = candidate;
      backends.push(...servers);
      return;
    }
  });

  after(async () => {
    await lb?.close();
    for (const s of backends) s.close();
  });

  it('forwards round-robin to the backends, from the gateway address', async () => {
    registered = [`${prefix}.10`, `${prefix}.11`];
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await ask(`${prefix}.1`, `hello ${i}`));
    assert.deepEqual(
      answers.sort(),
      [
        `${prefix}.10 got hello 0`,
        `${prefix}.10 got hello 2`,
        `${prefix}.11 got hello 1`,
        `${prefix}.11 got hello 3`,
      ].sort(),
    );
    assert.ok(
      sources.every((s) => s === `${prefix}.1`),
      `sources: ${sources.join(', ')}`,
    );
  });

  it('skips a backend that refuses connections', async () => {
    registered = [`${prefix}.12`, `${prefix}.10`];
    for (let i = 0; i < 3; i++) assert.equal(await ask(`${prefix}.1`, 'x'), `${prefix}.10 got x`);
  });

  it('drops the connection when no backend answers', async () => {
    registered = [`${prefix}.12`];
    assert.equal(await ask(`${prefix}.1`, 'x'), '');
    registered = [];
    assert.equal(await ask(`${prefix}.1`, 'x'), '');
  });

  it('with holdMs, holds a connection no backend takes on a held port and forwards it once one listens, else drops it after the hold; other ports drop at once', async () => {
    const held = await startLoadBalancer({
      host: `${prefix}.1`,
      ports: [PORT + 2, PORT + 3],
      backends: () => [`${prefix}.13`],
      holdMs: 1000,
      holdPorts: [PORT + 2],
      healthCheckIntervalMs: 60_000,
    });
    const late = net.createServer((socket) =>
      socket.once('data', (d: Buffer) => socket.end(`13 got ${d.toString().trim()}`)),
    );
    try {
      const ask2 = (line: string, port = PORT + 2) =>
        new Promise<{ answer: string; ms: number }>((resolve, reject) => {
          const started = Date.now();
          const socket = net.connect(port, `${prefix}.1`, () => socket.end(`${line}\n`));
          let answer = '';
          socket.on('data', (d: Buffer) => (answer += d.toString()));
          socket.on('close', () => resolve({ answer, ms: Date.now() - started }));
          socket.on('error', reject);
        });
      const dropped = await ask2('nobody');
      assert.equal(dropped.answer, '');
      assert.ok(dropped.ms >= 950, `dropped after ${dropped.ms} ms, before the hold ended`);
      const unheld = await ask2('nobody', PORT + 3);
      assert.equal(unheld.answer, '');
      assert.ok(unheld.ms < 900, `a port outside holdPorts was held ${unheld.ms} ms`);
      const waiting = ask2('early');
      await new Promise((resolve) => setTimeout(resolve, 100));
      await new Promise<void>((resolve) => late.listen(PORT + 2, `${prefix}.13`, resolve));
      const forwarded = await waiting;
      assert.equal(forwarded.answer, '13 got early'); // a connection still held when the hold ended is dropped
    } finally {
      await held.close();
      late.close();
    }
  });

  it('health-checks the backends and sends connections to the healthy ones first', async () => {
    const late = net.createServer((socket) => socket.once('data', () => socket.end('12 answered')));
    const ten = net.createServer((socket) => socket.once('data', () => socket.end('10 answered')));
    await new Promise<void>((resolve) => ten.listen(PORT + 1, `${prefix}.10`, resolve));
    // A second load balancer whose first check finds .12 down, and which checks again only much later.
    const checked = await startLoadBalancer({
      host: `${prefix}.1`,
      ports: [PORT + 1],
      backends: () => [`${prefix}.12`, `${prefix}.10`],
      healthCheckIntervalMs: 60_000,
    });
    try {
      await checked.healthChecked(); // the first health check found .12 down
      await new Promise<void>((resolve) => late.listen(PORT + 1, `${prefix}.12`, resolve));
      const ask1 = (line: string) =>
        new Promise<string>((resolve, reject) => {
          const socket = net.connect(PORT + 1, `${prefix}.1`, () => socket.end(`${line}\n`));
          let answer = '';
          socket.on('data', (d: Buffer) => (answer += d.toString()));
          socket.on('close', () => resolve(answer));
          socket.on('error', reject);
        });
      // .12 runs now, but until its next check it counts as down: round-robin goes to .10 both times.
      assert.deepEqual([await ask1('a'), await ask1('b')], ['10 answered', '10 answered']);
    } finally {
      await checked.close();
      late.close();
      ten.close();
    }
  });
});
