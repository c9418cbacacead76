import { BaseCommand } from '../../../base-command.js';

export default class MiniImageList extends BaseCommand<typeof MiniImageList> {
  static override summary = 'List your versioned local node images.';
  static override description = `Lists the images \`mini image create\` made in your config folder ($XDG_CONFIG_HOME/constellation/images, else ~/.config/constellation/images), oldest first: version, when it was made, the short digest of its measurements (as \`constellation status\` shows for nodes) and whether its signature verifies with your image key. An image whose measurements were edited after signing shows "bad signature": \`create\` and upgrades refuse it.`;

  static override examples = ['<%= config.bin %> <%= command.id %>', '<%= config.bin %> <%= command.id %> --json'];
  static override enableJsonFlag = true;

  public async run(): Promise<{
    images: {
      version: string;
      created: string;
      measurementsDigest: string;
      signature: string;
      source: string;
      dir: string;
    }[];
  }> {
    const { LocalImageStore } = await import('../../../../providers/local/image-store.js');
    const store = new LocalImageStore();
    const images = (await store.list()).map(({ version, created, measurementsDigest, signature, source, dir }) => ({
      version,
      created,
      measurementsDigest,
      signature,
      source,
      dir,
    }));
    if (!this.jsonEnabled()) {
      if (images.length === 0) {
        this.log(
          `No local images yet (in ${store.imagesDir}). \`constellation mini image create <version>\` makes one of the current build.`,
        );
      } else {
        const signatureText = { verified: 'verified', bad: 'BAD SIGNATURE', 'no key': 'no image key' } as Record<
          string,
          string
        >;
        const rows = [
          ['VERSION', 'CREATED', 'MEASUREMENTS', 'SIGNATURE'],
          ...images.map((i) => [
            i.version,
            i.created,
            i.measurementsDigest || '-',
            signatureText[i.signature] ?? i.signature,
          ]),
        ];
        const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
        for (const row of rows)
          this.log(row.map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c]))).join('  '));
      }
    }
    return { images };
  }
}
