import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../base-command.js';

export default class MiniImageCreate extends BaseCommand<typeof MiniImageCreate> {
  static override summary =
    'Make a versioned local node image of the current build (or of a given folder), with signed measurements.';
  static override description = `Copies the build's bundled node program (dist/node-program/ of the repository after \`npm run build\`: the bundle and every file it loads) into your config folder ($XDG_CONFIG_HOME/constellation/images/<version>/node-program, else ~/.config/constellation/images/<version>/node-program), by content (never linked; a symbolic link in it is refused), read-only (files 0444, folders 0555) and owned by you, measures it exactly as the local provider's launcher measures a node when it boots (PCRs 4, 9, 11; 8, 12, 13 zero), and signs the measurements (measurements.json, measurements.json.sig: cosign's blob signature format) with your image key, image-signing-key.pem in the same folder (ECDSA P-256, made on first use, mode 0600).

Set \`image: <version>\` in a local config (or \`mini up --image <version>\`) to run nodes of this image: \`create\` verifies the signed measurements with your key before anything starts and writes them into the config. An image never changes; make a new build a new version.`;

  static override examples = [
    { description: 'Make image v1 of the current build:', command: '<%= config.bin %> <%= command.id %> v1' },
    {
      description: 'Make image v2 of another build of the repository:',
      command: '<%= config.bin %> <%= command.id %> v2 --from ../constellation-next',
    },
  ];

  static override args = {
    version: Args.string({
      description: "The image's version: letters, digits, '.', '_' and '-' (e.g. v1.2.0); not `local`.",
      required: true,
    }),
  };

  static override flags = {
    from: Flags.string({
      description:
        'Folder to make the image of, laid out as the repository after `npm run build` (its dist/node-program/; default: the build this CLI runs from).',
      helpValue: '<folder>',
    }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<{
    version: string;
    dir: string;
    source: string;
    created: string;
    measurementsDigest: string;
    measurements: Record<string, { expected: string; warnOnly: boolean }>;
    keyFile: string;
    keyCreated: boolean;
  }> {
    const { LocalImageStore } = await import('../../../../providers/local/image-store.js');
    const store = new LocalImageStore();
    if (!this.jsonEnabled()) this.log(`Making local image ${this.args.version}…`);
    const image = await store.create(this.args.version, this.flags.from);
    const result = {
      version: image.version,
      dir: image.dir,
      source: image.source,
      created: image.created,
      measurementsDigest: image.measurementsDigest,
      measurements: image.measurements,
      keyFile: image.keyFile,
      keyCreated: image.keyCreated,
    };
    if (!this.jsonEnabled()) {
      this.log(`Local image ${image.version} made from ${image.source}: ${image.dir}`);
      this.log(`Measurements ${image.measurementsDigest}:`);
      for (const [index, m] of Object.entries(image.measurements))
        this.log(`  PCR ${index.padStart(2)}: ${m.expected}${m.warnOnly ? ' (warn only)' : ''}`);
      this.log(
        `Signed with your image key ${image.keyFile}${image.keyCreated ? ' (made now; keep it: it signs every local image of yours)' : ''}.`,
      );
      this.log(
        `Use it: \`image: ${image.version}\` in a local config, or \`constellation mini up --image ${image.version}\`.`,
      );
    }
    return result;
  }
}
