/**
 * Image versions: the names images are published (or made by `mini image create`) under, and their order, so
 * `upgrade check` can tell newer from older. `local` is not a version: it names the current build of the local
 * provider, which is measured at `create` and has no signed measurements.
 *
 * Order: versions of the form [v]N(.N)*[-pre] compare by their numbers (missing parts are 0, so v2 = v2.0.0), and
 * a pre-release sorts before its release (v2.0.0-rc1 < v2.0.0), as in semantic versioning; pre-release labels
 * compare piecewise, numbers as numbers. Other names sort after every numbered version, alphabetically.
 */

/** The config's `image` for the local provider's current build (dist/ of this CLI). */
export const LOCAL_BUILD_IMAGE = 'local';

/** A version is 1–64 letters, digits, '.', '_' and '-', starting with a letter or digit; it names a folder too. */
const VERSION_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function isImageVersion(name: string): boolean {
  return VERSION_NAME.test(name) && name !== LOCAL_BUILD_IMAGE;
}

const NUMBERED = /^v?(\d+(?:\.\d+)*)(?:-([0-9A-Za-z.-]+))?$/;

/** Whether `name` is a numbered version ([v]N(.N)*[-pre]), the only kind that is newer or older than another. */
export function isNumberedVersion(name: string): boolean {
  return NUMBERED.test(name);
}

/** Pieces of a pre-release label: digit runs as numbers, the rest as text. */
function pieces(label: string): (number | string)[] {
  return (label.match(/\d+|[^\d.-]+/g) ?? []).map((p) => (/^\d+$/.test(p) ? Number(p) : p));
}

function comparePieces(a: (number | string)[], b: (number | string)[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (x === y) continue;
    if (typeof x === 'number' && typeof y === 'number') return x - y;
    if (typeof x === 'number') return -1;
    if (typeof y === 'number') return 1;
    return x < y ? -1 : 1;
  }
  return 0;
}

/** Negative when a is older than b, positive when newer, 0 when they name the same version. */
export function compareImageVersions(a: string, b: string): number {
  const ma = NUMBERED.exec(a);
  const mb = NUMBERED.exec(b);
  if (!ma || !mb) {
    if (ma) return -1;
    if (mb) return 1;
    return a === b ? 0 : a < b ? -1 : 1;
  }
  const na = ma[1].split('.').map(Number);
  const nb = mb[1].split('.').map(Number);
  for (let i = 0; i < Math.max(na.length, nb.length); i++) {
    const d = (na[i] ?? 0) - (nb[i] ?? 0);
    if (d !== 0) return d;
  }
  const [pa, pb] = [ma[2], mb[2]];
  if (pa === undefined || pb === undefined) return pa === pb ? 0 : pa === undefined ? 1 : -1;
  return comparePieces(pieces(pa), pieces(pb));
}
