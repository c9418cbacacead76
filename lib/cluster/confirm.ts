/**
 * Asking before something is destroyed (terminate, mini down): an inquirer confirmation on a terminal, skipped
 * with -y. Without a terminal and without -y nothing is destroyed: the command refuses and says to pass -y.
 */
import { UserError } from '../errors.js';

export interface ConfirmOptions {
  yes: boolean;
  /** Whether a person can answer (stdin and stdout are terminals). */
  interactive?: boolean;
  ask?: (message: string) => Promise<boolean>;
}

export async function confirmDestruction(question: string, options: ConfirmOptions): Promise<boolean> {
  if (options.yes) return true;
  const interactive = options.interactive ?? Boolean(process.stdin.isTTY && process.stdout.isTTY);
  if (!interactive) {
    throw new UserError('This command deletes things and needs a confirmation, but there is no terminal to ask on.', {
      hint: 'Pass -y (--yes) to confirm in advance.',
    });
  }
  const ask = options.ask ?? (async (message: string) => (await import('@inquirer/prompts')).confirm({ message, default: false }));
  return ask(question);
}

/** A question that only a person at a terminal gets; scripts (no terminal) and -y go ahead. */
export async function confirmIfInteractive(question: string, options: ConfirmOptions): Promise<boolean> {
  const interactive = options.interactive ?? Boolean(process.stdin.isTTY && process.stdout.isTTY);
  if (options.yes || !interactive) return true;
  return confirmDestruction(question, { ...options, interactive });
}
