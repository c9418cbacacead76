/**
 * `config fetch-measurements`: reads an image's signed measurements, verifies them with the pinned key
 * (./image-measurements.ts) and writes them into the config as the variant's whole measurement set, keeping the
 * config's comments (lib/config/edit.ts). Which file:
 *   -u URL [-s SIGNATURE_URL]   that file (signature default: URL + ".sig", as cosign names it)
 *   otherwise                   the config's `image`: the user's local image of that version (local provider), or
 *                               its entry in the version index (--index, clouds)
 * A signature that does not verify changes nothing: the config is written only after verification succeeded.
 */
import type { Measurements } from '../../lib/attestation/types.js';
import { loadConfig } from '../../lib/config/index.js';
import { UserError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logging/index.js';
import { editConfig } from '../../lib/config/edit.js';
import { loadImageMeasurements, loadMeasurementsFromUrls, type ImageSourceOptions } from './image-measurements.js';

export interface FetchMeasurementsOptions extends ImageSourceOptions {
  workspaceDir: string;
  log: Logger;
  url?: string;
  signatureUrl?: string;
}

export interface FetchMeasurementsResult {
  version: string;
  variant: string;
  measurements: Measurements;
  source: string;
  key: { name: string; fingerprint: string };
  /** False when the config held these measurements already. */
  changed: boolean;
}

export async function fetchMeasurements(options: FetchMeasurementsOptions): Promise<FetchMeasurementsResult> {
  const { workspaceDir, log } = options;
  const config = await loadConfig(workspaceDir, { allowIncomplete: true });
  if (!options.url && !config.image) {
    throw new UserError('The config names no image, so there are no measurements to look up.', {
      hint: 'Set `image` in the config, or name the measurements with -u <url> (and -s <signature url>).',
    });
  }
  const signed = options.url
    ? await loadMeasurementsFromUrls(config, options.url, options.signatureUrl ?? `${options.url}.sig`, options)
    : await loadImageMeasurements(config, config.image, options);
  log.info('measurements verified', {
    version: signed.version,
    variant: signed.variant,
    source: signed.source,
    key: signed.key.fingerprint,
  });
  const before = JSON.stringify(config);
  const after = await editConfig(workspaceDir, {
    measurements: signed.measurements,
    replaceMeasurements: true,
    allowIncomplete: true,
  });
  const changed = JSON.stringify(after) !== before;
  log.info(changed ? 'measurements written to the config' : 'the config had these measurements already');
  return {
    version: signed.version,
    variant: signed.variant,
    measurements: signed.measurements,
    source: signed.source,
    key: { name: signed.key.name, fingerprint: signed.key.fingerprint },
    changed,
  };
}
