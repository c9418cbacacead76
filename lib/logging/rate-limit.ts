/**
 * Collapsing repeated log lines: anyone who can open a stream to a node's init server or join service can make
 * it log a warning per stream, so a flood would otherwise fill the node's log (and bury what matters). Lines
 * are counted per (level, message): the first `burst` of a window are written as they come, the rest of that
 * window are counted, and when the window ends one line says how many were left out. Fields of left-out lines
 * are not kept (they differ per line: peer, port); the summary names the message and the count. Only warn and
 * error lines are limited by default: those are what a stranger can provoke (a refused call, a stream that
 * ended early); info lines record work done for attested peers and all stay.
 */
import type { LogFields, Logger, LogLevel } from './logger.js';

export interface RateLimitOptions {
  /** Lines of one (level, message) written per window; default 10. */
  burst?: number;
  /** Default 60 s. */
  windowMs?: number;
  /** The levels that are limited; default warn and error. */
  levels?: LogLevel[];
  /** Milliseconds now; default Date.now. */
  now?: () => number;
  /** Runs `fn` after `ms` without keeping the process alive; default an unref'd setTimeout. Tests pass a fake. */
  schedule?: (fn: () => void, ms: number) => void;
}

interface Window {
  start: number;
  written: number;
  suppressed: number;
  summarized?: boolean;
}

/** A logger that passes lines to `logger`, collapsing repeats beyond `burst` per window into one summary line. */
export function rateLimitedLogger(logger: Logger, options: RateLimitOptions = {}): Logger {
  const burst = options.burst ?? 10;
  const windowMs = options.windowMs ?? 60_000;
  const now = options.now ?? Date.now;
  const schedule =
    options.schedule ??
    ((fn: () => void, ms: number) => {
      setTimeout(fn, ms).unref();
    });
  const windows = new Map<string, Window>();

  // Called by the window's timer, or earlier by the first line after the window ended: whichever comes first.
  const summarize = (level: LogLevel, msg: string, key: string, window: Window) => {
    if (window.summarized) return;
    window.summarized = true;
    if (windows.get(key) === window) windows.delete(key);
    if (window.suppressed > 0) {
      const times = window.suppressed === 1 ? 'time' : 'times';
      logger[level](
        `${msg} (repeated ${window.suppressed} more ${times} in ${windowMs / 1000} s; those lines were left out)`,
        {
          suppressed: window.suppressed,
        },
      );
    }
  };

  const levels = new Set(options.levels ?? ['warn', 'error']);
  const limited = (level: LogLevel) => (msg: string, fields?: LogFields) => {
    if (!levels.has(level)) {
      logger[level](msg, fields);
      return;
    }
    const key = `${level}\u0000${msg}`;
    const t = now();
    let window = windows.get(key);
    if (window && t - window.start >= windowMs) {
      summarize(level, msg, key, window);
      window = undefined;
    }
    if (!window) {
      window = { start: t, written: 0, suppressed: 0 };
      windows.set(key, window);
      const current = window;
      schedule(() => summarize(level, msg, key, current), windowMs);
    }
    if (window.written < burst) {
      window.written++;
      logger[level](msg, fields);
    } else {
      window.suppressed++;
    }
  };

  return {
    debug: limited('debug'),
    info: limited('info'),
    warn: limited('warn'),
    error: limited('error'),
    child: (fields) => rateLimitedLogger(logger.child(fields), options),
  };
}
