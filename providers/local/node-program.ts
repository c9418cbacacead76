/** Where the current build's node program is: the image `local` names (the build this CLI runs from). */
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The built bootstrapper: dist/bootstrapper/main.js in the image dist/, found from where this module runs. */
export function defaultNodeProgram(): { entry: string; imageDir: string } {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const parts = here.split(path.sep);
  const distAt = parts.lastIndexOf('dist');
  const imageDir = distAt >= 0 ? parts.slice(0, distAt + 1).join(path.sep) : path.resolve(here, '../../dist');
  return { entry: path.join(imageDir, 'bootstrapper', 'main.js'), imageDir };
}
