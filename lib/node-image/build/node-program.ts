/**
 * Which files of the bundled node program a provider's node image holds: those its node can load, as listed in the
 * bundle's providers.json (written by scripts/bundle-node-program.mjs from esbuild's import graph). Under emulation
 * the firmware hashes the initrd three times before the kernel starts, so a qemu image leaves out the clouds' SDKs and
 * each cloud's image the other clouds' (docs/workflows/node-images.md, "Boot time"). Local process nodes run the
 * whole folder (providers/local/image-pcrs.ts measures it) and do not read this list.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { UserError } from '../../errors.js';

/** The list's name in the bundle's folder (PROVIDER_FILES of scripts/bundle-node-program.mjs). */
export const PROVIDER_FILES = 'providers.json';
/**
 * The bundle's entry, which Node.js runs (LOADER_ENTRY of scripts/bundle-node-program.mjs): it loads the node
 * program's files with their code caches (bootstrapper/program-loader.ts).
 */
export const NODE_PROGRAM_ENTRY = 'main.cjs';

const listSchema = z.object({
  /** The chunk holding the provider registry, whose dynamic imports of the providers' entries a node takes one of. */
  loader: z.string(),
  providers: z.record(
    z.string(),
    z.object({
      entry: z.string(),
      files: z.array(z.string().regex(/^(?!\/)(?!.*(?:^|\/)\.\.(?:\/|$)).+$/, 'a path inside the folder')),
      packages: z.array(z.string()),
    }),
  ),
});

export type ProviderFileLists = z.infer<typeof listSchema>;

/** The bundle's per-provider lists; a folder without one (a bundle made before the lists existed) is an error. */
export async function readProviderFileLists(dir: string): Promise<ProviderFileLists> {
  const file = path.join(dir, PROVIDER_FILES);
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (cause) {
    throw new UserError(`The bundled node program in ${dir} has no ${PROVIDER_FILES}.`, {
      hint: '`npm run build` makes it (dist/node-program/), with the list of files each provider loads.',
      cause,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (cause) {
    throw new UserError(`${file} is not JSON.`, { hint: '`npm run build` writes it again.', cause });
  }
  const parsed = listSchema.safeParse(json);
  if (!parsed.success)
    throw new UserError(`${file} is not a list of files per provider.`, { hint: '`npm run build` writes it again.' });
  return parsed.data;
}

/** The sorted files (relative paths) of the bundle that a node of this provider can load; each must exist. */
export async function nodeProgramFiles(dir: string, provider: string): Promise<string[]> {
  const lists = await readProviderFileLists(dir);
  const entry = lists.providers[provider];
  if (!entry) {
    throw new UserError(`The bundled node program in ${dir} lists no files for provider "${provider}".`, {
      hint: `It lists ${Object.keys(lists.providers).join(', ')}; \`npm run build\` makes the lists again.`,
    });
  }
  const files = [...new Set(entry.files)].sort();
  for (const rel of files) {
    const st = await fs.lstat(path.join(dir, rel)).catch(() => undefined);
    if (!st?.isFile()) {
      throw new UserError(`The bundled node program in ${dir} lacks ${rel}, which ${PROVIDER_FILES} lists.`, {
        hint: '`npm run build` makes the bundle and its lists together.',
      });
    }
  }
  return files;
}
