import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../base-command.js';

export default class MiniImageDelete extends BaseCommand<typeof MiniImageDelete> {
  static override summary = 'Delete a versioned local node image.';
  static override description = `Removes image <version> from your config folder ($XDG_CONFIG_HOME/constellation/images, else ~/.config/constellation/images): its node program and its signed measurements. Nodes already running it keep running, but no workspace can boot new nodes of it (scaling, rebooting a node whose image is gone, upgrades to it): point such a config at another image first. Asks first; -y skips the question.`;

  static override examples = ['<%= config.bin %> <%= command.id %> v1', '<%= config.bin %> <%= command.id %> v1 -y'];

  static override args = {
    version: Args.string({
      description: 'The version to delete (`constellation mini image list` shows them).',
      required: true,
    }),
  };

  static override flags = {
    yes: Flags.boolean({ char: 'y', description: 'Do not ask first (needed when there is no terminal).' }),
  };

  public async run(): Promise<void> {
    const [{ LocalImageStore }, { confirmOrStop }] = await Promise.all([
      import('../../../../providers/local/image-store.js'),
      import('../../../confirm.js'),
    ]);
    const store = new LocalImageStore();
    // An unknown version is refused before the question.
    if (!(await store.has(this.args.version))) await store.delete(this.args.version);
    await confirmOrStop(
      `Delete local image ${this.args.version} (${store.imageDir(this.args.version)})?`,
      { yes: this.flags.yes },
      'Nothing was deleted.',
    );
    await store.delete(this.args.version);
    this.log(`Deleted local image ${this.args.version}.`);
  }
}
