import { Args } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';

interface MeasureJson {
  pcrs: Record<string, string>;
  events: { pcr: number; type: string; digest: string; description: string }[];
  sections: { name: string; size: number; digest: string; measured: boolean }[];
}

export default class ImageMeasure extends BaseCommand<typeof ImageMeasure> {
  static override summary = 'Predict the PCRs a node image measures when it boots (PCR 4, 9, 11; 8, 12, 13 zero).';
  static override description = `Reads a node image (a raw GPT disk, whose EFI system partition holds the unified kernel image at \\EFI\\BOOT\\BOOTX64.EFI, or a bare UKI) and predicts, from the file alone, every event that UEFI firmware, systemd-stub and the Linux EFI stub measure when it boots: PCR 4 (the boot-option events, the UKI's and the kernel's Authenticode digests), PCR 11 (each UKI section), PCR 9 (the kernel command line and the initrd). PCRs 8, 12 and 13 stay zero. It also lists the UKI's sections with their SHA-256. The prediction assumes that no boot option fails before the image's, as VM nodes boot it; docs/measured-boot.md says what every PCR holds and what is known of each cloud's firmware.`;

  static override examples = [
    '<%= config.bin %> <%= command.id %> out/image.raw',
    '<%= config.bin %> <%= command.id %> uki.efi --json',
  ];
  static override enableJsonFlag = true;
  static override args = {
    file: Args.string({ description: 'A node image: raw GPT disk or unified kernel image (.efi).', required: true }),
  };

  public async run(): Promise<MeasureJson> {
    const { args } = await this.parse(ImageMeasure);
    const { inspectImageFile } = await import('../../../lib/node-image/measure.js');
    const { source, sections, prediction } = inspectImageFile(args.file);
    if (!this.jsonEnabled()) {
      this.log(
        source.kind === 'disk'
          ? `Unified kernel image ${source.path} on partition ${source.partition}`
          : 'Unified kernel image',
      );
      this.log('UKI sections (SHA-256 of the data up to the virtual size):');
      const width = Math.max(...sections.map((s) => s.name.length));
      for (const s of sections) {
        this.log(
          `  ${s.name.padEnd(width)} ${String(s.size).padStart(10)} bytes  ${s.digest}  ${s.measured ? 'measured (PCR 11)' : 'not measured'}`,
        );
      }
    }
    if ('error' in prediction) throw prediction.error;
    if (!this.jsonEnabled()) {
      this.log('Predicted events (boot order):');
      for (const e of prediction.events)
        this.log(`  PCR ${String(e.pcr).padStart(2)}  ${e.type.padEnd(32)}  ${e.digest}  ${e.description}`);
      this.log('Predicted PCRs (SHA-256):');
      for (const [pcr, value] of Object.entries(prediction.pcrs)) this.log(`  PCR ${pcr.padStart(2)}: ${value}`);
    }
    return { pcrs: prediction.pcrs, events: prediction.events, sections };
  }
}
