/**
 * The host programs an image build runs, behind one narrow runner (so tests and the library never spawn anything
 * they were not given), and the check that they are installed: a missing one is a UserError naming the Debian
 * package that provides it (docs/workflows/node-images.md lists them; scripts/ensure-system-deps.sh installs them).
 */
import { spawn } from 'node:child_process';
import { UserError } from '../../errors.js';

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export type CommandRunner = (
  command: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv },
) => Promise<CommandResult>;

/** Runs a program to its end, collecting its output; a program that cannot be started gives code 127. */
export const runCommand: CommandRunner = (command, args, options) =>
  new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    child.on('error', (e) => resolve({ code: 127, stdout: '', stderr: e.message }));
    child.on('close', (code) =>
      resolve({ code: code ?? 1, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }),
    );
  });

/** Program -> the Debian package that installs it. */
export const BUILD_TOOLS: Record<string, string> = {
  'dpkg-deb': 'dpkg',
  'mkfs.vfat': 'dosfstools',
  mcopy: 'mtools',
  sgdisk: 'gdisk',
  zstd: 'zstd',
};
/** Needed only to download packages missing from the cache. */
export const FETCH_TOOLS: Record<string, string> = { 'apt-get': 'apt' };

/** Throws a UserError naming every missing program and the packages to install. */
export async function requireTools(tools: Record<string, string>, run: CommandRunner): Promise<void> {
  const missing: string[] = [];
  for (const tool of Object.keys(tools)) {
    const result = await run('sh', ['-c', `command -v ${tool}`], {});
    if (result.code !== 0) missing.push(tool);
  }
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((t) => tools[t]))];
  throw new UserError(`Building a node image needs ${missing.join(', ')}, which this machine lacks.`, {
    hint: `Install them: apt-get install ${packages.join(' ')} (or run \`npm run system-deps\`).`,
  });
}

/** Runs a program and throws (naming it and its last error lines) when it fails. */
export async function runChecked(
  run: CommandRunner,
  command: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<CommandResult> {
  const result = await run(command, args, options);
  if (result.code !== 0) {
    const tail = (result.stderr || result.stdout).trim().split('\n').slice(-3).join(' ');
    throw new UserError(`${command} ${args.slice(0, 3).join(' ')}… failed (exit ${result.code}): ${tail}`);
  }
  return result;
}
