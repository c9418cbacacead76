/**
 * Where the current build's node program is: the image `local` names (the build this CLI runs from). The node
 * program is the bundle `npm run build` makes (scripts/bundle-node-program.mjs): dist/node-program/main.cjs, in a
 * folder that holds everything it loads, and that folder is the image directory the launcher measures (PCR 9).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NODE_PROGRAM_ENTRY } from '../../lib/node-image/build/node-program.js';

/** The node program's folder inside a build (relative to the build's root) and its entry inside that folder. */
export const NODE_PROGRAM_DIR = path.join('dist', 'node-program');
export { NODE_PROGRAM_ENTRY };

/** The build this module belongs to: the parent of its dist/ (the repository after `npm run build`). */
export function buildFolder(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const parts = here.split(path.sep);
  const distAt = parts.lastIndexOf('dist');
  return distAt >= 0 ? parts.slice(0, distAt).join(path.sep) || path.sep : path.resolve(here, '../..');
}

/** The bundled node program of a build folder (default: this CLI's build): its entry and the folder measured. */
export function defaultNodeProgram(build: string = buildFolder()): { entry: string; imageDir: string } {
  const imageDir = path.join(build, NODE_PROGRAM_DIR);
  return { entry: path.join(imageDir, NODE_PROGRAM_ENTRY), imageDir };
}
