import { Flags } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';
import type { UpgradeCheckResult } from '../../images/upgrade-check.js';

export default class UpgradeCheck extends BaseCommand<typeof UpgradeCheck> {
  static override summary =
    'Show the images and Kubernetes versions the cluster could be upgraded to, with the measurements each image brings.';
  static override description = `Compares the config's image with the available ones: for the local provider your local images (\`mini image list\`), for qemu the versions of your qemu image store and the config's image folder, for clouds the images of a version index (--index: a JSON file {"images": [{"version", "measurementsUrl", "signatureUrl", "image"?, "variant"?}]}, URLs relative to it). Every image's signed measurements are verified with the pinned key (the config's measurementsSigningKey, else the release key or, for the local provider, your image key); an image whose signature does not verify is listed as refused and never offered. For each image it shows how its measurements differ from the config's. It also lists the Kubernetes versions this CLI supports that are newer than the config's.

--update-config writes the smallest upgrade (the oldest verified image newer than the config's) into the config: \`image\` and its measurements, keeping the config's comments. The local provider's current build (\`image: local\`) has no version, so no image counts as newer than it.`;

  static override examples = [
    {
      description: 'A local cluster: which of your local images are newer?',
      command: '<%= config.bin %> <%= command.id %>',
    },
    {
      description: 'Write the next image and its measurements into the config:',
      command: '<%= config.bin %> <%= command.id %> --update-config',
    },
    {
      description: 'A cloud cluster, with a version index:',
      command: '<%= config.bin %> <%= command.id %> --index https://example.com/images/index.json',
    },
  ];

  static override flags = {
    index: Flags.string({
      description: 'The version index of the cloud images (https or file URL, or path).',
      helpValue: '<url>',
    }),
    'update-config': Flags.boolean({
      description: 'Write the smallest upgrade (image and measurements) into the config.',
    }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<UpgradeCheckResult> {
    const [{ withWorkspaceSession, withDebugLog }, { upgradeCheck }] = await Promise.all([
      import('../../cluster/session.js'),
      import('../../images/upgrade-check.js'),
    ]);
    const check = (workspaceDir: string, log: import('../../../lib/logging/index.js').Logger) =>
      upgradeCheck({ workspaceDir, log, index: this.flags.index, updateConfig: this.flags['update-config'] });
    // Only --update-config writes; a plain check takes no lock, like status.
    const result = this.flags['update-config']
      ? await withWorkspaceSession(this.workspaceDir, 'upgrade check', ({ workspaceDir, log }) =>
          check(workspaceDir, log),
        )
      : await withDebugLog(this.workspaceDir, 'upgrade check', (log) => check(this.workspaceDir, log));
    if (!this.jsonEnabled()) this.render(result);
    return result;
  }

  private render(r: UpgradeCheckResult): void {
    const short = (hex?: string) => (hex ? `${hex.slice(0, 16)}…` : '(not measured)');
    this.log(
      `Config: image ${r.current.image}${r.current.version && r.current.version !== r.current.image ? ` (version ${r.current.version})` : ''}, measurements ${r.current.measurementsDigest || 'unknown'}, Kubernetes ${r.current.kubernetesVersion}`,
    );
    this.log(`Measurements must be signed by ${r.key.name} (key SHA-256 ${r.key.fingerprint.slice(0, 16)}…).`);
    this.log('');
    if (r.images.length === 0) this.log('Images: none available.');
    else this.log('Images:');
    for (const img of r.images) {
      const label = { current: 'current', newer: 'newer', older: 'older', unordered: 'available' }[img.relation];
      if (img.refused) {
        this.log(`  ${img.version}  ${label}  REFUSED: ${img.refused}`);
        continue;
      }
      const changes = img.changes ?? [];
      this.log(
        `  ${img.version}  ${label}  measurements ${img.measurementsDigest}, signature verified${changes.length === 0 ? ', same measurements as the config' : ''}`,
      );
      for (const c of changes)
        this.log(
          `      PCR ${String(c.index).padStart(2)}: ${short(c.from)} → ${short(c.to)}${c.warnOnly ? ' (warn only)' : ''}`,
        );
    }
    this.log('');
    this.log(
      r.kubernetes.newer.length > 0
        ? `Kubernetes: ${r.kubernetes.current}; this CLI also supports ${r.kubernetes.newer.join(', ')}.`
        : `Kubernetes: ${r.kubernetes.current}, the newest this CLI supports.`,
    );
    this.log('');
    if (!r.upgrade) {
      this.log(
        r.current.version === undefined && r.current.image === 'local'
          ? 'The config runs the current build (image: local), which has no version: set `image` to a version to upgrade by version.'
          : 'No newer image with verified measurements: the config is up to date.',
      );
    } else if (r.configUpdated) {
      this.log(
        `Wrote image ${r.upgrade.image} and its measurements into the config. \`constellation upgrade apply\` rolls it out.`,
      );
    } else {
      this.log(
        `Smallest upgrade: ${r.upgrade.version}. \`constellation upgrade check --update-config\` writes it into the config.`,
      );
    }
  }
}
