/**
 * Fills the Debian package cache that `constellation image build` reads (lib/node-image/build/packages.ts), so that
 * tests build node images without reaching the network: run by `npm run pretest` (and by hand before an offline
 * build). Downloads only what the cache lacks, with `apt-get download <name>=<version>` (apt-get update first when
 * the package lists do not know a pinned version). The cache is $CONSTELLATION_PACKAGE_CACHE, else
 * /var/cache/constellation/debs as root, else ~/.cache/constellation/debs (docs/workflows/node-images.md).
 */
import { ALL_PACKAGES, defaultPackageCache, fetchPackages } from '../lib/node-image/build/packages.js';
import { runCommand } from '../lib/node-image/build/tools.js';
import { isUserError } from '../lib/errors.js';

const cacheDir = defaultPackageCache();
try {
  const fetched = await fetchPackages(ALL_PACKAGES, {
    cacheDir,
    run: runCommand,
    download: true,
    progress: (m) => console.log(`fetch-image-inputs: ${m}`),
  });
  console.log(`fetch-image-inputs: ${fetched.length} Debian packages in ${cacheDir}`);
} catch (err) {
  console.error(
    `fetch-image-inputs: ${(err as Error).message}${isUserError(err) && err.hint ? `\n  ${err.hint}` : ''}`,
  );
  process.exit(1);
}
