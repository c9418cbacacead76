/**
 * `upgrade check`: what the config runs against what it could run.
 *   images        the available images (./image-measurements.ts: the user's local images, for qemu the user's
 *                 qemu image store and the config's image folder, or a cloud's version index), each with its signed measurements verified, or the reason they were refused, and how its
 *                 measurements differ from the config's
 *   kubernetes    the Kubernetes versions this CLI supports that are newer than the config's (lib/config/versions.ts)
 *   upgrade       the smallest upgrade: the oldest verified image newer than the config's
 * With `updateConfig`, the smallest upgrade is written into the config (image and its whole measurement set,
 * comments kept); `upgrade apply` then rolls it out. The current build of the local provider (`local`) has no
 * version, so no image counts as newer than it: set `image` to a version to start upgrading by version.
 */
import { imageMeasurementsDigest, measurementChanges, type PcrChange } from '../../lib/attestation/measurements.js';
import type { Measurements } from '../../lib/attestation/types.js';
import { loadConfig, measurementsOf, providerOf, SUPPORTED_KUBERNETES_VERSIONS } from '../../lib/config/index.js';
import { compareImageVersions, isNumberedVersion, LOCAL_BUILD_IMAGE } from '../../lib/config/image-version.js';
import type { Logger } from '../../lib/logging/index.js';
import { editConfig } from '../../lib/config/edit.js';
import { qemuImageVersion } from '../../providers/qemu/image.js';
import { availableImages, type ImageSourceOptions } from './image-measurements.js';

export interface UpgradeCheckOptions extends ImageSourceOptions {
  workspaceDir: string;
  log: Logger;
  /** Write the smallest upgrade into the config. */
  updateConfig?: boolean;
}

export interface ImageReport {
  version: string;
  /** What the config's `image` becomes for it. */
  image: string;
  source: string;
  /** Relative to the config's image; `unordered` when the config's image has no version (`local`, or not indexed). */
  relation: 'current' | 'newer' | 'older' | 'unordered';
  measurements?: Measurements;
  measurementsDigest?: string;
  /** How its measurements differ from the config's. */
  changes?: PcrChange[];
  refused?: string;
}

export interface UpgradeCheckResult {
  current: { image: string; version?: string; kubernetesVersion: string; measurementsDigest: string };
  key: { name: string; fingerprint: string };
  images: ImageReport[];
  kubernetes: { current: string; supported: string[]; newer: string[] };
  upgrade?: { version: string; image: string; measurements: Measurements };
  configUpdated: boolean;
}

export async function upgradeCheck(options: UpgradeCheckOptions): Promise<UpgradeCheckResult> {
  const { workspaceDir, log } = options;
  const config = await loadConfig(workspaceDir);
  const configured = measurementsOf(config);
  const { images, key, index } = await availableImages(config, { baseDir: workspaceDir, ...options });

  let currentVersion: string | undefined;
  if (providerOf(config) === 'local') currentVersion = config.image === LOCAL_BUILD_IMAGE ? undefined : config.image;
  else if (providerOf(config) === 'qemu') currentVersion = await qemuImageVersion(config.image, workspaceDir);
  else currentVersion = index?.find((e) => e.image === config.image || e.version === config.image)?.version;

  const reports: ImageReport[] = images.map((img) => {
    // Only numbered versions are newer or older: a name like "test-build" is shown apart, never recommended.
    const ordered = currentVersion !== undefined && isNumberedVersion(img.version) && isNumberedVersion(currentVersion);
    const relation = !ordered
      ? img.version === currentVersion
        ? 'current'
        : 'unordered'
      : relationOf(compareImageVersions(img.version, currentVersion!));
    if (!img.measurements)
      return { version: img.version, image: img.image, source: img.source, relation, refused: img.refused };
    return {
      version: img.version,
      image: img.image,
      source: img.source,
      relation,
      measurements: img.measurements,
      measurementsDigest: imageMeasurementsDigest(img.measurements),
      changes: measurementChanges(configured, img.measurements),
    };
  });
  const next = reports.find((r) => r.relation === 'newer' && r.measurements);
  const upgrade = next ? { version: next.version, image: next.image, measurements: next.measurements! } : undefined;

  let configUpdated = false;
  if (options.updateConfig && upgrade) {
    await editConfig(workspaceDir, {
      image: upgrade.image,
      measurements: upgrade.measurements,
      replaceMeasurements: true,
    });
    configUpdated = true;
    log.info('config updated to the smallest upgrade', { image: upgrade.image, version: upgrade.version });
  }
  return {
    current: {
      image: config.image,
      ...(currentVersion ? { version: currentVersion } : {}),
      kubernetesVersion: config.kubernetesVersion,
      measurementsDigest: imageMeasurementsDigest(configured),
    },
    key: { name: key.name, fingerprint: key.fingerprint },
    images: reports,
    kubernetes: {
      current: config.kubernetesVersion,
      supported: [...SUPPORTED_KUBERNETES_VERSIONS],
      newer: SUPPORTED_KUBERNETES_VERSIONS.filter((v) => compareImageVersions(v, config.kubernetesVersion) > 0),
    },
    ...(upgrade ? { upgrade } : {}),
    configUpdated,
  };
}

function relationOf(order: number): ImageReport['relation'] {
  return order > 0 ? 'newer' : order < 0 ? 'older' : 'current';
}
