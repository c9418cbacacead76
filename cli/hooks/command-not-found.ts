/**
 * oclif's command_not_found hook: a mistyped command is refused with the closest command named, "Did you mean
 * `constellation status`?", and exit code 2 (a usage error). Written here instead of @oclif/plugin-not-found, which
 * names the suggestion only on a terminal and then offers to run it: a guessed command is never run (it might be
 * `terminate`), and scripts see the suggestion too.
 */
import type { Hook } from '@oclif/core';
import levenshtein from 'fast-levenshtein';

/** The command id closest to `typed` (ids use ':' inside oclif), or undefined when none is near. */
export function closestCommand(typed: string, ids: readonly string[]): string | undefined {
  let best: { id: string; distance: number } | undefined;
  for (const id of ids) {
    const distance = levenshtein.get(typed, id);
    if (!best || distance < best.distance) best = { id, distance };
  }
  // Near enough to be a typo: at most a third of the typed name differs.
  return best && best.distance <= Math.max(2, Math.ceil(typed.length / 3)) ? best.id : undefined;
}

const hook: Hook<'command_not_found'> = async function (options) {
  const ids = options.config.commands.filter((c) => !c.hidden).flatMap((c) => [c.id, ...c.aliases]);
  const display = (id: string) => id.replaceAll(':', ' ');
  const suggestion = closestCommand(options.id, ids);
  const hint = suggestion
    ? `Did you mean \`${options.config.bin} ${display(suggestion)}\`?`
    : `\`${options.config.bin} --help\` lists the commands.`;
  // The same shape as every other refusal of the CLI (cli/base-command.ts): an error line, then a hint.
  process.stderr.write(`Error: "${display(options.id)}" is not a ${options.config.bin} command.\nHint: ${hint}\n`);
  this.exit(2);
};

export default hook;
