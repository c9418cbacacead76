/**
 * The yes/no question before `iam create` and `iam destroy` change a cloud: -y answers it; without a terminal to
 * ask on (scripts, CI) and without -y the command refuses rather than guessing. @inquirer/prompts is loaded only
 * when a question is actually asked.
 */
import { UserError } from '../errors.js';

export interface ConfirmOptions {
  /** -y / --yes was given. */
  yes: boolean;
  /** Whether a person can answer (stdin and stdout are terminals); a parameter for tests. */
  interactive?: boolean;
}

/** Resolves true when the action may go ahead, false when the user said no. */
export async function confirmAction(question: string, options: ConfirmOptions): Promise<boolean> {
  if (options.yes) return true;
  const interactive = options.interactive ?? (process.stdin.isTTY === true && process.stdout.isTTY === true);
  if (!interactive) {
    throw new UserError(`${question} There is no terminal to ask on.`, { hint: 'Pass -y (--yes) to confirm without a question.' });
  }
  const { confirm } = await import('@inquirer/prompts');
  return confirm({ message: question, default: false });
}
