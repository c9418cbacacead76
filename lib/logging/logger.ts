/**
 * The logger every library takes as a collaborator, and the debug log behind it: constellation-debug.log
 * holds one JSON object per line, `{"time","level","msg",...fields}`, appended by every run at debug level.
 * Fields go through redact() first, so secrets never reach the file. Lines are written synchronously: a run
 * that crashes or exits early still leaves every line it logged.
 */
import { closeSync, fchmodSync, fsyncSync, mkdirSync, writeSync } from 'node:fs';
import path from 'node:path';
import { openRegularFileForAppendSync } from '../workspace/regular-file.js';
import { redact } from './redact.js';

export { redact, REDACTED, isSecretKey } from './redact.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line (e.g. {component: "join"}). */
  child(fields: LogFields): Logger;
}

/** Where a logger's lines go; lets tests and other sinks (stderr under --debug) reuse the formatting. */
export type LineSink = (line: string) => void;

export const nullLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => nullLogger,
};

/** Formats one log line: JSON, redacted, byte arrays as hex, bigints as strings, without a newline. */
export function formatLogLine(level: LogLevel, msg: string, fields: LogFields, now: Date = new Date()): string {
  const record: LogFields = { time: undefined, level: undefined, msg: undefined, ...(redact(fields) as LogFields) };
  // Fields named time, level or msg cannot disguise a line.
  Object.assign(record, { time: now.toISOString(), level, msg });
  return JSON.stringify(record, jsonReplacer);
}

/** A logger writing formatted lines to `sink`. `clock` is a parameter so tests can fix the time. */
export function createLogger(sink: LineSink, fields: LogFields = {}, clock: () => Date = () => new Date()): Logger {
  const write = (level: LogLevel) => (msg: string, extra?: LogFields) =>
    sink(formatLogLine(level, msg, extra ? { ...fields, ...extra } : fields, clock()));
  return {
    debug: write('debug'),
    info: write('info'),
    warn: write('warn'),
    error: write('error'),
    child: (more) => createLogger(sink, { ...fields, ...more }, clock),
  };
}

/**
 * Opens `file` for appending (created with mode 0600, an existing file is set to 0600) and returns a logger
 * writing to it. A link or special file at `file` is refused (a UserError), never followed: the log would
 * otherwise append to, and chmod, whatever the link points to. After close() further lines are dropped rather than thrown: logging never breaks a command.
 */
export function createDebugLog(
  file: string,
  clock: () => Date = () => new Date(),
): Logger & { close(): Promise<void> } {
  mkdirSync(path.dirname(file), { recursive: true });
  let fd: number | undefined = openRegularFileForAppendSync(file, { what: 'the debug log', mode: 0o600 });
  fchmodSync(fd, 0o600);
  const logger = createLogger(
    (line) => {
      if (fd !== undefined) writeSync(fd, `${line}\n`);
    },
    {},
    clock,
  );
  return {
    ...logger,
    async close() {
      if (fd === undefined) return;
      const closing = fd;
      fd = undefined;
      fsyncSync(closing);
      closeSync(closing);
    },
  };
}

function jsonReplacer(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Uint8Array) return Buffer.from(value).toString('hex');
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [String(k), v]));
  if (value instanceof Set) return [...value];
  if (typeof value === 'function' || typeof value === 'symbol') return undefined;
  return value;
}
