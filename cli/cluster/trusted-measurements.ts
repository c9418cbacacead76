/**
 * The only measurements the cluster store is given: the config's, once they proved to be what the config's image is
 * (docs/workflows/upgrade.md). Every path that writes measurements to the store (`upgrade apply`, `apply`, a rollback,
 * reconciling the store with the config) goes through here, so none can write a set that did not verify:
 *
 *   versioned or cloud image   its signed measurements file, verified with the config's key (../images/image-measurements.ts)
 *   the local build (`local`)  exactly what the CLI measures of the build, as `create` does
 *
 * VerifiedMeasurements can be made only by this module (the brand is a module-private symbol), and the store helpers
 * (./store.ts) take nothing else. What the store already holds (its current and previous sets) is trusted as it was
 * written; a journal in the workspace never supplies measurements.
 */
import {
  imageMeasurementsDigest,
  incompleteMeasurements,
  measurementChanges,
} from '../../lib/attestation/measurements.js';
import type { Measurements } from '../../lib/attestation/types.js';
import { measurementsOf, providerOf, type Config } from '../../lib/config/index.js';
import { LOCAL_BUILD_IMAGE } from '../../lib/config/image-version.js';
import { UserError } from '../../lib/errors.js';
import type { InfrastructureProvider } from '../../providers/contract.js';
import { verifyConfiguredMeasurements, type ImageSourceOptions } from '../images/image-measurements.js';

const VERIFIED: unique symbol = Symbol('verified measurements');

export interface VerifiedMeasurements {
  readonly measurements: Measurements;
  /** What they verified against: "signed measurements of image v2 (…)" or "the local build as measured now". */
  readonly source: string;
  /** imageMeasurementsDigest of the set. */
  readonly digest: string;
  readonly [VERIFIED]: true;
}

export interface VerifyOptions {
  provider: InfrastructureProvider;
  workspaceDir: string;
  imageSource?: ImageSourceOptions;
}

/** The config's measurements, verified (see the module header); a UserError that says what differs when they do not. */
export async function verifiedConfigMeasurements(
  config: Config,
  options: VerifyOptions,
): Promise<VerifiedMeasurements> {
  const configured = measurementsOf(config);
  const incomplete = incompleteMeasurements(configured);
  if (incomplete) {
    throw new UserError(`The config's measurements are incomplete: ${incomplete}.`, {
      hint: "`constellation config fetch-measurements` writes the signed measurements of the config's image. Nothing was changed.",
    });
  }
  if (providerOf(config) === 'local' && config.image === LOCAL_BUILD_IMAGE) {
    if (!options.provider.expectedMeasurements)
      throw new UserError(`The ${options.provider.name} provider cannot measure the local build.`);
    const measured = await options.provider.expectedMeasurements(options.workspaceDir);
    const differences = measurementChanges(
      Object.fromEntries(
        Object.keys(measured)
          .map((index) => [index, configured[index]])
          .filter(([, m]) => m !== undefined),
      ),
      measured,
    ).map(({ index, from, to }) =>
      from === undefined
        ? `PCR ${index} is missing`
        : from !== to
          ? `PCR ${index} is ${from}, the build measures ${to}`
          : `PCR ${index} only warns`,
    );
    if (differences.length > 0) {
      throw new UserError(
        `The config's measurements are not those of the local build this CLI runs: ${differences.join('; ')}.`,
        {
          hint: 'Use a versioned image (`constellation mini image create <version>`, then set `image` and run `constellation config fetch-measurements`). Nothing was changed.',
        },
      );
    }
    return brand(configured, 'the local build as measured now');
  }
  const signed = await verifyConfiguredMeasurements(config, { baseDir: options.workspaceDir, ...options.imageSource });
  return brand(
    configured,
    `the signed measurements of image ${config.image} (key ${signed!.key.fingerprint.slice(0, 16)})`,
  );
}

function brand(measurements: Measurements, source: string): VerifiedMeasurements {
  return { measurements, source, digest: imageMeasurementsDigest(measurements), [VERIFIED]: true };
}
