import { spawn } from 'node:child_process';
import net from 'node:net';

/** Whether a process exists: process.kill(pid, 0) checks without sending a signal; EPERM means it exists under another user. */
export function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs a program to its end and collects its stdout and stderr as one text (for error messages); never rejects: a
 * program that cannot start gives code -1 and the reason.
 */
export function runProgram(program: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', (err) => resolve({ code: -1, output: err.message }));
    child.once('close', (code) => resolve({ code: code ?? -1, output }));
  });
}

/** Whether a program listens on this Unix socket or TCP port yet (a connection is accepted, then closed at once). */
export function canConnect(target: string | { host: string; port: number }): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(typeof target === 'string' ? { path: target } : target);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
