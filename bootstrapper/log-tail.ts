/**
 * The last lines this node logged, kept in memory so a failed init can send them back to the CLI (docs/design.md#nodes:
 * "on failure streams its log back"). It holds formatted lines, which lib/logging has already redacted, so
 * what it returns is as free of secrets as the node's log file.
 */
import type { LineSink } from '../lib/logging/index.js';

export class LogTail {
  private readonly lines: string[] = [];
  private bytes = 0;

  constructor(private readonly maxBytes = 64 * 1024) {}

  /** A sink to tee the logger's lines into. */
  readonly sink: LineSink = (line) => {
    this.lines.push(line);
    this.bytes += Buffer.byteLength(line) + 1;
    while (this.bytes > this.maxBytes && this.lines.length > 1)
      this.bytes -= Buffer.byteLength(this.lines.shift()!) + 1;
  };

  /** The kept lines, newline-terminated, as bytes (Failure.log). */
  snapshot(): Uint8Array {
    return Buffer.from(this.lines.map((line) => `${line}\n`).join(''), 'utf8');
  }
}
