/**
 * Flag conventions users of other CLIs expect (docs/cli-reference.md, "Conventions"):
 * - `--json` and `-o json` (`--output json`) mean the same wherever a command's output is structured: a command
 *   with oclif's --json flag takes `-o json` as --json, and `verify`, whose -o has more formats, takes --json as
 *   `-o json`.
 * - A mistyped flag is refused with the closest flag of that command named ("Did you mean --workers?"), exit 2,
 *   as a mistyped command is (./hooks/command-not-found.ts); nothing is guessed and run.
 * Pure functions; cli/base-command.ts applies them before oclif parses the arguments.
 */
import levenshtein from 'fast-levenshtein';

export interface OutputFlagShape {
  /** The command has oclif's --json flag. */
  jsonFlag: boolean;
  /** The command has its own --output (-o) flag. */
  ownOutput: boolean;
}

/** argv with `-o json` spelled as the command understands it (see the module header); arguments after `--` untouched. */
export function normalizeOutputFlags(argv: readonly string[], shape: OutputFlagShape): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      out.push(...argv.slice(i));
      break;
    }
    if (shape.jsonFlag && !shape.ownOutput) {
      if ((arg === '-o' || arg === '--output') && argv[i + 1] === 'json') {
        out.push('--json');
        i++;
        continue;
      }
      if (arg === '-ojson' || arg === '-o=json' || arg === '--output=json') {
        out.push('--json');
        continue;
      }
    }
    if (!shape.jsonFlag && shape.ownOutput && arg === '--json') {
      out.push('--output=json');
      continue;
    }
    out.push(arg);
  }
  return out;
}

/** The flag of `known` (names without dashes; single letters are short flags) closest to `typed`, or undefined. */
export function closestFlag(typed: string, known: readonly string[]): string | undefined {
  const name = typed.replace(/^-+/, '').split('=')[0]!;
  let best: { flag: string; distance: number } | undefined;
  for (const flag of known.filter((k) => k.length > 1)) {
    const distance = levenshtein.get(name, flag);
    if (!best || distance < best.distance) best = { flag, distance };
  }
  if (best && best.distance <= Math.max(2, Math.ceil(name.length / 3))) return `--${best.flag}`;
  // One flag only that starts with it (--work for --workers), or has a word one letter off it (--workers for
  // --worker-nodes).
  const near = known.filter(
    (k) =>
      k.length > 1 &&
      (k.startsWith(name) || k.split('-').some((word) => word.length >= 3 && levenshtein.get(name, word) <= 1)),
  );
  return name.length >= 2 && near.length === 1 ? `--${near[0]}` : undefined;
}
