/**
 * ConfigError: a config that is not valid, with every problem found (key path, YAML line, message). Kept free of
 * zod and yaml so the CLI's error rendering can recognise it without loading either on the start-up path.
 */
import { UserError } from '../errors.js';

export interface ConfigIssue {
  /** Dotted key path, e.g. `nodeGroups.worker_default.initialCount`; empty for the whole document. */
  path: string;
  /** 1-based line in the YAML file, where one can be pointed at. */
  line?: number;
  message: string;
}

/** Its message holds the summary and one `<file>:<line>: <path>: <message>` line per issue. */
export class ConfigError extends UserError {
  constructor(
    readonly file: string,
    readonly issues: ConfigIssue[],
    options: { hint?: string } = {},
  ) {
    const summary = `${file} is not valid (${issues.length} ${issues.length === 1 ? 'problem' : 'problems'}):`;
    super([summary, ...issues.map((i) => `  ${formatIssueLine(file, i)}`)].join('\n'), {
      hint: options.hint ?? 'Fix what the lines above name; `constellation config validate` checks the file again.',
    });
  }
}

export function isConfigError(err: unknown): err is ConfigError {
  return err instanceof ConfigError;
}

/** `<path>: <message>`, or just the message for document-level problems. */
export function formatIssue(issue: ConfigIssue): string {
  return issue.path ? `${issue.path}: ${issue.message}` : issue.message;
}

/** `<file>:<line>: <path>: <message>`: the form editors and terminals turn into links. */
export function formatIssueLine(file: string, issue: ConfigIssue): string {
  return `${file}${issue.line === undefined ? '' : `:${issue.line}`}: ${formatIssue(issue)}`;
}
