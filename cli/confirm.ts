/**
 * The yes/no question before a command destroys or changes something (terminate, mini down, iam create/destroy,
 * upgrade apply): an inquirer confirmation on a terminal, answered in advance with -y. Without a terminal and
 * without -y the command refuses rather than guessing. @inquirer/prompts loads only when a question is asked.
 * A "no" ends every command the same way (confirmOrStop): a DeclinedError, which the CLI prints as its message alone
 * (no "Error:", no hint) and exits with code 1 (EXIT_DECLINED): nothing was changed, and a script can tell.
 */
import { UserError } from '../lib/errors.js';

export interface ConfirmOptions {
  /** -y / --yes was given. */
  yes: boolean;
  /** Whether a person can answer (stdin and stdout are terminals); a parameter for tests. */
  interactive?: boolean;
  /** Asks the question; default: an inquirer confirmation that defaults to "no". */
  ask?: (message: string) => Promise<boolean>;
}

/** The exit code of a command whose question was answered no. */
export const EXIT_DECLINED = 1;

/** The user answered no; the message says what was not done. Rendered by cli/base-command.ts. */
export class DeclinedError extends UserError {
  constructor(message: string) {
    super(message, { exitCode: EXIT_DECLINED });
  }
}

export function isDeclined(err: unknown): err is DeclinedError {
  return err instanceof DeclinedError;
}

const isInteractive = (options: ConfirmOptions) =>
  options.interactive ?? Boolean(process.stdin.isTTY && process.stdout.isTTY);

/** Resolves true when the action may go ahead, false when the user said no; refuses without a terminal and -y. */
export async function confirm(question: string, options: ConfirmOptions): Promise<boolean> {
  if (options.yes) return true;
  if (!isInteractive(options)) {
    throw new UserError(`${question} There is no terminal to ask on.`, {
      hint: 'Pass -y (--yes) to confirm in advance.',
    });
  }
  const ask =
    options.ask ??
    (async (message: string) => (await import('@inquirer/prompts')).confirm({ message, default: false }));
  return ask(question);
}

/** A question that only a person at a terminal gets; scripts (no terminal) and -y go ahead. */
export async function confirmIfInteractive(question: string, options: ConfirmOptions): Promise<boolean> {
  if (options.yes || !isInteractive(options)) return true;
  return confirm(question, { ...options, interactive: true });
}

/** confirm(), and on "no" a DeclinedError with `nothingDone` ("Nothing was terminated."). */
export async function confirmOrStop(question: string, options: ConfirmOptions, nothingDone: string): Promise<void> {
  if (!(await confirm(question, options))) throw new DeclinedError(nothingDone);
}

/** confirmIfInteractive(), and on "no" a DeclinedError with `nothingDone`. */
export async function confirmIfInteractiveOrStop(
  question: string,
  options: ConfirmOptions,
  nothingDone: string,
): Promise<void> {
  if (!(await confirmIfInteractive(question, options))) throw new DeclinedError(nothingDone);
}
