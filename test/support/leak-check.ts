/**
 * A mocha root hook plugin (.mocharc.json `require`): after the last test, nothing a test started may still be
 * running in this process: no listening server, no socket, no child process, no pending timer that keeps the
 * process alive. Like upstream's goleak. What is left is named in a failure of the "after all" hook and then
 * closed, so the run fails and still ends by itself (mocha runs without `exit: true`).
 *
 * Servers, sockets and child processes are the process's active handles (unref'ed ones do not count: they do not
 * keep the process alive); those that existed when this plugin loaded (mocha's stdout, stderr) are not tests'.
 * Timers are not handles: setTimeout and setInterval are wrapped to remember where each pending one was made.
 */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';

/** How long the check waits for what tests closed at their very end to finish closing. */
const GRACE_MS = 2_000;

declare const process: NodeJS.Process & { _getActiveHandles(): unknown[] };

interface Timer {
  hasRef(): boolean;
  _destroyed?: boolean;
}

const before = new Set(process._getActiveHandles());
const timers = new Map<Timer, string>();

/** Wraps a timer function so that its timers are remembered with the place that made them. */
function tracked<F extends (...args: never[]) => unknown>(make: F): F {
  return ((...args: Parameters<F>) => {
    const timer = make(...args) as Timer;
    if (timers.size > 10_000) for (const t of timers.keys()) if (t._destroyed) timers.delete(t);
    timers.set(
      timer,
      new Error().stack
        ?.split('\n')
        .slice(2, 4)
        .map((l) => l.trim().replace(/^at /, ''))
        .join(' ← ') ?? '',
    );
    return timer;
  }) as F;
}
globalThis.setTimeout = tracked(globalThis.setTimeout);
globalThis.setInterval = tracked(globalThis.setInterval);

interface Leak {
  what: string;
  close(): void;
}

function describeHandle(handle: unknown): Leak | undefined {
  if (before.has(handle)) return undefined;
  if (handle instanceof net.Server) {
    const address = handle.address();
    const where =
      typeof address === 'string' ? address : address ? `${address.address}:${address.port}` : 'an unbound address';
    return { what: `a server listening on ${where}`, close: () => handle.close() };
  }
  if (handle instanceof net.Socket) {
    const where = handle.remoteAddress
      ? `${handle.localAddress}:${handle.localPort} → ${handle.remoteAddress}:${handle.remotePort}`
      : 'a pipe or Unix socket';
    return { what: `a socket (${where})`, close: () => handle.destroy() };
  }
  const child = handle as Partial<ChildProcess>;
  if (typeof child.pid === 'number' && Array.isArray(child.spawnargs)) {
    return {
      what: `child process ${child.pid} (${child.spawnargs.join(' ')})`,
      close: () => {
        child.kill?.('SIGKILL');
        for (const stream of child.stdio ?? []) stream?.destroy();
      },
    };
  }
  const name = (handle as object)?.constructor?.name ?? typeof handle;
  return { what: `a ${name} handle`, close: () => (handle as { close?: () => void }).close?.() };
}

function leaks(): Leak[] {
  const handles = process._getActiveHandles();
  // A child's stdio pipes are named with the child.
  const stdio = new Set(handles.flatMap((h) => ((h as Partial<ChildProcess>).stdio ?? []).filter(Boolean)));
  const found = handles.flatMap((h) => (stdio.has(h as never) ? [] : (describeHandle(h) ?? [])));
  for (const [timer, where] of timers) {
    if (timer._destroyed || !timer.hasRef()) continue;
    found.push({
      what: `a pending timer made at ${where}`,
      close: () => clearTimeout(timer as unknown as NodeJS.Timeout),
    });
  }
  return found;
}

export const mochaHooks = {
  async afterAll(this: Mocha.Context): Promise<void> {
    this.timeout(GRACE_MS + 5_000);
    const deadline = Date.now() + GRACE_MS;
    let left = leaks();
    while (left.length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50).unref());
      left = leaks();
    }
    if (left.length === 0) return;
    for (const leak of left) leak.close();
    throw new Error(
      `Tests left ${left.length} thing(s) running (closed now):\n${left.map((l) => `  - ${l.what}`).join('\n')}`,
    );
  },
};
