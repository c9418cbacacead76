/**
 * Running an external program (kubeadm) with its output streamed line by line as it comes, and captured for error
 * messages. Injectable, so tests and other runtimes can replace it; the default spawns without a shell and finds
 * the program on the PATH of the environment it is given.
 */
import { spawn } from 'node:child_process';

/** Captured output keeps its last 64 KiB: enough for an error's tail, bounded for a chatty program. */
const CAPTURE_LIMIT = 64 * 1024;

export type OutputStream = 'stdout' | 'stderr';

export interface ExecOptions {
  env: NodeJS.ProcessEnv;
  /** Called with every complete output line (without its newline). */
  onLine?: (stream: OutputStream, line: string) => void;
}

export interface ExecResult {
  /** The exit code, or null when a signal ended the program. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The output (its last 64 KiB). */
  stdout: string;
  stderr: string;
}

/** Resolves when the program has ended, whatever its exit code; rejects only if it could not be started. */
export type Exec = (command: string, args: readonly string[], options: ExecOptions) => Promise<ExecResult>;

export const spawnExec: Exec = (command, args, options) =>
  new Promise((resolve, reject) => {
    const child = spawn(command, [...args], { env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const captured: Record<OutputStream, string> = { stdout: '', stderr: '' };
    const pending: Record<OutputStream, string> = { stdout: '', stderr: '' };
    for (const stream of ['stdout', 'stderr'] as const) {
      child[stream].setEncoding('utf8');
      child[stream].on('data', (chunk: string) => {
        captured[stream] = (captured[stream] + chunk).slice(-CAPTURE_LIMIT);
        const lines = (pending[stream] + chunk).split('\n');
        pending[stream] = lines.pop() ?? '';
        for (const line of lines) options.onLine?.(stream, line);
      });
    }
    child.once('error', reject);
    child.once('close', (exitCode, signal) => {
      for (const stream of ['stdout', 'stderr'] as const)
        if (pending[stream]) options.onLine?.(stream, pending[stream]);
      resolve({ exitCode, signal, stdout: captured.stdout, stderr: captured.stderr });
    });
  });
