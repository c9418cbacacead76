/**
 * `mini logs <node>` (docs/workflows/mini.md#reading-a-nodes-logs): a node's log from its folder, for the nodes of
 * `mini up` (process nodes, local provider) and `mini up --vm` (VM nodes, qemu provider). Both keep everything a
 * node prints in <workspace>/constellation-local/nodes/<name>/node.log (providers/local/layout.ts):
 *
 *   process node   the launcher's lines (it measures the image as firmware would), then the node program's log
 *   VM node        the serial console: firmware, kernel, /init's boot report, then the node program's log
 *
 * By default only the node program's log is printed: its JSON lines (lib/logging/logger.ts), each from where it
 * starts on the console. `boot` prints the whole file (the boot log), with /init's event-log dump (base64 chunks of
 * the firmware's TPM event log, which `verify` reads) shortened to one line. `follow` keeps printing what is
 * appended until `signal` aborts. Reading a log takes no workspace lock: nothing is written.
 */
import { promises as fs } from 'node:fs';
import { UserError } from '../../lib/errors.js';
import { ClusterFile } from '../../providers/local/cluster-file.js';
import { clusterPaths, nodePaths } from '../../providers/local/layout.js';

export interface MiniLogsOptions {
  workspaceDir: string;
  node: string;
  /** The whole console (firmware, kernel, boot report, launcher), not only the node program's log. */
  boot?: boolean;
  /** Keep printing appended lines until `signal` aborts. */
  follow?: boolean;
  signal?: AbortSignal;
  /** How often a followed file is looked at; default 500 ms. */
  pollMs?: number;
  /** Receives each line, without its newline. */
  write: (line: string) => void;
}

/** Where a node program's log line starts on a console line. */
const LOG_LINE_START = '{"time":"';
const EVENTLOG_LINE = /^CONSTELLATION-BOOT eventlog /;

/** Prints the node's log (see the module header); returns the file it read. */
export async function miniLogs(options: MiniLogsOptions): Promise<{ file: string }> {
  const paths = clusterPaths(options.workspaceDir);
  const store = await ClusterFile.load(paths);
  if (!store) {
    throw new UserError(`There is no local or VM cluster in ${options.workspaceDir}.`, {
      hint: '`constellation mini up` (or `mini up --vm`) makes one; run `mini logs` in its workspace (or pass -C <workspace>).',
    });
  }
  const known = Object.keys(store.record.nodes).sort();
  if (!known.includes(options.node)) {
    throw new UserError(`The cluster has no node "${options.node}".`, {
      hint: known.length > 0 ? `Its nodes: ${known.join(', ')}.` : 'It has no nodes (yet).',
    });
  }
  const file = nodePaths(options.workspaceDir, options.node).log;
  const printer = linePrinter(options);
  let offset = 0;
  const readMore = async (): Promise<void> => {
    const handle = await fs.open(file, 'r').catch(() => undefined);
    if (!handle) return;
    try {
      const { size } = await handle.stat();
      if (size < offset) offset = 0; // the file was replaced: start over
      while (offset < size) {
        const chunk = Buffer.alloc(Math.min(size - offset, 1 << 20));
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, offset);
        if (bytesRead === 0) break;
        offset += bytesRead;
        printer.push(chunk.subarray(0, bytesRead));
      }
    } finally {
      await handle.close();
    }
  };
  await readMore();
  if (!options.follow) {
    printer.flush();
    return { file };
  }
  const signal = options.signal;
  while (!signal?.aborted) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, options.pollMs ?? 500);
      signal?.addEventListener('abort', done, { once: true });
      function done(): void {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      }
    });
    await readMore();
  }
  printer.flush();
  return { file };
}

/** Splits bytes into lines (a partial last line waits for its end) and prints those the options ask for. */
function linePrinter(options: Pick<MiniLogsOptions, 'boot' | 'write'>): { push(bytes: Buffer): void; flush(): void } {
  let pending = Buffer.alloc(0);
  let eventlogLines = 0;
  const endEventlog = () => {
    if (eventlogLines > 0)
      options.write(`CONSTELLATION-BOOT eventlog (${eventlogLines} lines of base64: the firmware's TPM event log)`);
    eventlogLines = 0;
  };
  const line = (raw: string) => {
    const text = raw.replace(/\r/g, '');
    if (!options.boot) {
      const start = text.indexOf(LOG_LINE_START);
      if (start >= 0) options.write(text.slice(start));
      return;
    }
    if (EVENTLOG_LINE.test(text)) {
      eventlogLines++;
      return;
    }
    endEventlog();
    options.write(text);
  };
  return {
    push(bytes) {
      pending = Buffer.concat([pending, bytes]);
      let newline: number;
      while ((newline = pending.indexOf(0x0a)) >= 0) {
        line(pending.subarray(0, newline).toString('utf8'));
        pending = pending.subarray(newline + 1);
      }
    },
    flush() {
      if (pending.length > 0) line(pending.toString('utf8'));
      pending = Buffer.alloc(0);
      endEventlog();
    },
  };
}
