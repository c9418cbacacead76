/**
 * Tests that need a system tool (swtpm, cryptsetup, openssl) or root skip where it is missing, so a developer without
 * it still runs the rest; but under CI=true the setup (scripts/ensure-system-deps.sh, run by `npm test`'s pretest)
 * installs every tool, so a missing one is a broken install and fails the test instead of hiding it as a skip.
 */
import { spawnSync } from 'node:child_process';

/** Whether `command args` runs and exits 0 (a tool's `--version`). */
export function toolRuns(command: string, args: string[] = ['--version']): boolean {
  return spawnSync(command, args, { stdio: 'ignore' }).status === 0;
}

/** Skips the running test (or hook's tests) when `available` is false; under CI=true throws, naming what is missing. */
export function requireTool(context: Mocha.Context, available: boolean, what: string): void {
  if (available) return;
  if (process.env.CI === 'true')
    throw new Error(
      `${what} is missing on this CI machine: its setup (npm run system-deps) installs it, so this is a broken install.`,
    );
  context.skip();
}
