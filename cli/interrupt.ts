/**
 * Ctrl-C (SIGINT) in any command: every command is resumable (docs/workflows/workspace.md: each step looks at
 * what the workspace holds and continues from there), so an interrupted command stops at once and says so: exit
 * code 130 (128 + SIGINT, as shells report it), "interrupted; run the same command again to continue", and what
 * keeps running on its own (a local cluster's processes, which the next run takes over, or `mini down` removes).
 * Files are written atomically and the workspace lock goes with the process, so stopping mid-step loses nothing.
 * A second Ctrl-C while the message is being put together exits without it.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

export const EXIT_INTERRUPTED = 130;
export const INTERRUPTED_MESSAGE = 'Interrupted; run the same command again to continue.';

/** How long the message may take to find what still runs before the CLI exits without that part. */
const DESCRIBE_TIMEOUT_MS = 1500;

export interface InterruptOptions {
  /** The workspace of the command (undefined before the flags are parsed). */
  workspaceDir: () => string | undefined;
  /** The command line that continues, e.g. "constellation mini up -C my-cluster". */
  command: () => string;
  write?: (text: string) => void;
  exit?: (code: number) => never;
}

/** Installs the SIGINT handler for this process (once). */
export function installInterruptHandler(options: InterruptOptions): void {
  if (installed) return;
  installed = true;
  const write = options.write ?? ((text: string) => process.stderr.write(text));
  const exit = options.exit ?? ((code: number) => process.exit(code));
  process.removeAllListeners('SIGINT'); // bin/constellation's, for the start-up
  process.once('SIGINT', () => {
    process.once('SIGINT', () => exit(EXIT_INTERRUPTED));
    void (async () => {
      let running: string[] = [];
      const workspaceDir = options.workspaceDir();
      if (workspaceDir) {
        running = await Promise.race([
          stillRunning(workspaceDir).catch(() => []),
          new Promise<string[]>((resolve) => setTimeout(() => resolve([]), DESCRIBE_TIMEOUT_MS).unref()),
        ]);
      }
      write(interruptedMessage(options.command(), running, process.stderr.isTTY === true));
      exit(EXIT_INTERRUPTED);
    })();
  });
}

let installed = false;

/** The text printed on Ctrl-C; `running` lists what keeps running (one line each). */
export function interruptedMessage(command: string, running: string[], tty = false): string {
  const lines = ['', `${INTERRUPTED_MESSAGE} (${command})`];
  if (running.length > 0) {
    lines.push(
      'Still running, on purpose (the next run takes them over; `constellation mini down` removes them):',
      ...running.map((r) => `  ${r}`),
    );
  }
  // The step list hides the cursor while it draws; give it back.
  return `${tty ? '\x1b[?25h' : ''}${lines.join('\n')}\n`;
}

/** What of the workspace's cluster keeps running without the CLI: a local cluster's processes. */
async function stillRunning(workspaceDir: string): Promise<string[]> {
  const { LOCAL_DIR } = await import('../providers/local/layout.js');
  const clusterDir = path.join(workspaceDir, LOCAL_DIR);
  if (!existsSync(clusterDir)) return [];
  const { describeClusterProcesses } = await import('../providers/local/processes.js');
  return describeClusterProcesses(clusterDir);
}
