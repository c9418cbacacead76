// Types of scripts/bundle-cli.mjs for the tests that import it.
export const META_FILE: string;
export const ENTRY_NAME: string;
export function commandId(rel: string): string;
export function bundleCli(outDir?: string): Promise<void>;
