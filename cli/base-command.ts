/**
 * The base of every command: the global flags (-C/--workspace, --debug) and one place that turns
 * errors into messages. A UserError prints its message and hint (a ConfigError one `<file>:<line>: <path>: <message>`
 * line per problem), an operating system's file error (permission, read-only, disk full) names the file and the fix
 * (./system-errors.ts), a declined question its message alone (./confirm.ts); anything else is a bug, printed with
 * its stack only under --debug. Ctrl-C exits with 130 (./interrupt.ts). Commands stay thin: parse,
 * call one library function, render. Nothing here may import a heavy library: every command's start-up pays for it.
 */
import { Command, Flags, Interfaces } from '@oclif/core';
import path from 'node:path';
import { isConfigError } from '../lib/config/errors.js';
import { isUserError, UserError } from '../lib/errors.js';
import { isDeclined } from './confirm.js';
import { closestFlag, normalizeOutputFlags } from './flag-conventions.js';
import { installInterruptHandler } from './interrupt.js';
import { explainSystemError } from './system-errors.js';

export type InferredFlags<T extends typeof Command> = Interfaces.InferredFlags<
  (typeof BaseCommand)['baseFlags'] & T['flags']
>;
export type InferredArgs<T extends typeof Command> = Interfaces.InferredArgs<T['args']>;

export abstract class BaseCommand<T extends typeof Command> extends Command {
  static override baseFlags = {
    workspace: Flags.string({
      char: 'C',
      description: 'Workspace directory: holds the config, state, master secret and kubeconfig of one cluster.',
      default: '.',
      helpGroup: 'GLOBAL',
    }),
    debug: Flags.boolean({ description: 'Print debug output, and stack traces on errors.', helpGroup: 'GLOBAL' }),
    // No --force: upstream's skips its CLI/cluster version-compatibility checks, which this CLI does not have; the
    // checks it has (measurements, attestation, kubeadm's version policy) guard security or correctness, not mistakes.
  };

  protected flags!: InferredFlags<T>;
  protected args!: InferredArgs<T>;
  /** Every positional argument (commands with `strict = false` take a list). */
  protected positional!: string[];

  /** The absolute workspace directory. */
  protected get workspaceDir(): string {
    return path.resolve(this.flags.workspace);
  }

  public override async init(): Promise<void> {
    installInterruptHandler({
      workspaceDir: () => (this.flags ? this.workspaceDir : undefined),
      command: () =>
        [
          'constellation',
          ...process.argv.slice(2).map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)),
        ].join(' '),
    });
    await super.init();
    const ownFlags = this.ctor.flags ?? {};
    this.argv = normalizeOutputFlags(this.argv, {
      jsonFlag: Boolean(this.ctor.enableJsonFlag),
      ownOutput: 'output' in ownFlags,
    });
    let parsed;
    try {
      parsed = await this.parse({
        flags: this.ctor.flags,
        baseFlags: (super.ctor as typeof BaseCommand).baseFlags,
        enableJsonFlag: this.ctor.enableJsonFlag,
        args: this.ctor.args,
        strict: this.ctor.strict,
      });
    } catch (err) {
      throw this.explainUnknownFlag(err) ?? err;
    }
    const { args, argv, flags } = parsed;
    this.flags = flags as InferredFlags<T>;
    this.args = args as InferredArgs<T>;
    this.positional = argv as string[];
  }

  /** A UserError naming the closest flag for oclif's "Nonexistent flag" (exit 2, a usage error), else undefined. */
  private explainUnknownFlag(err: unknown): UserError | undefined {
    const unknown = (err as { flags?: unknown }).flags;
    if (
      !(err instanceof Error) ||
      !(err.constructor.name === 'NonExistentFlagsError' || err.message.startsWith('Nonexistent flag')) ||
      !Array.isArray(unknown) ||
      unknown.length === 0
    )
      return undefined;
    const known = Object.entries({ ...BaseCommand.baseFlags, ...(this.ctor.flags ?? {}) }).flatMap(([name, f]) => [
      name,
      ...((f as { char?: string }).char ? [(f as { char: string }).char] : []),
    ]);
    if (this.ctor.enableJsonFlag) known.push('json');
    const command = [this.config.bin, ...(this.id ?? '').split(':')].join(' ');
    const typed = unknown.map(String);
    const suggestion = typed.length === 1 ? closestFlag(typed[0]!, known) : undefined;
    return new UserError(
      `${typed.join(', ')} ${typed.length === 1 ? 'is not a flag' : 'are not flags'} of \`${command}\`.`,
      {
        hint: suggestion
          ? `Did you mean ${suggestion}? \`${command} --help\` lists its flags.`
          : `\`${command} --help\` lists its flags.`,
        exitCode: 2,
      },
    );
  }

  protected override async catch(thrown: Error & { exitCode?: number; oclif?: { exit?: number } }): Promise<unknown> {
    // oclif's own exit signal (this.exit()) passes through untouched.
    if (thrown.oclif?.exit !== undefined && thrown.message.startsWith('EEXIT')) throw thrown;
    const err: Error & { exitCode?: number; oclif?: { exit?: number } } = explainSystemError(thrown) ?? thrown;
    if (isDeclined(err)) {
      // The user said no: the message alone, the same way in every command (cli/confirm.ts).
      if (this.jsonEnabled())
        process.stdout.write(`${JSON.stringify({ declined: { message: err.message } }, null, 2)}\n`);
      else process.stderr.write(`${err.message}\n`);
      this.exit(err.exitCode);
    }
    const debug = (this.flags as { debug?: boolean } | undefined)?.debug ?? process.argv.includes('--debug');
    const exitCode = isUserError(err) ? err.exitCode : (err.oclif?.exit ?? 1);
    const hint = isUserError(err) ? err.hint : undefined;
    const isBug = !isUserError(err) && err.oclif === undefined;
    if (this.jsonEnabled()) {
      const issues = isConfigError(err) ? { file: err.file, issues: err.issues } : {};
      process.stdout.write(
        `${JSON.stringify({ error: { message: err.message, ...(hint ? { hint } : {}), ...issues } }, null, 2)}\n`,
      );
    } else {
      // A ConfigError's message is its summary line followed by one indented line per issue.
      let out = `Error: ${err.message}\n`;
      if (hint) out += `Hint: ${hint}\n`;
      if (debug && err.stack) out += `\n${err.stack}\n`;
      else if (isBug) out += 'This is a bug in constellation. Run again with --debug for details.\n';
      process.stderr.write(out);
    }
    this.exit(exitCode);
  }
}
