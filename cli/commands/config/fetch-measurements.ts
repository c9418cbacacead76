import { Flags } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';

export default class ConfigFetchMeasurements extends BaseCommand<typeof ConfigFetchMeasurements> {
  static override summary =
    "Fetch an image's signed measurements, verify their signature, and write them into the config.";
  static override description = `Reads a measurements file ({"version", "variant", "measurements"}) and its detached signature (cosign sign-blob format: base64 of an ECDSA P-256 signature over the file), verifies the signature with the pinned key, and replaces the measurements of the config's attestation variant with the file's, keeping the config's comments. The pinned key is the config's measurementsSigningKey when set; else, for clouds, the release key built into this CLI, and for the local provider your local image key (see \`mini image create\`).

Without -u, it looks up the config's image: for the local provider your local image of that version; for clouds its entry in the version index given with --index. -u and -s take https or file URLs, or paths; the signature defaults to the measurements URL with ".sig" appended.

A signature that does not verify (a file changed after signing, or signed with another key) changes nothing, and the error says so. So does a file for another attestation variant.`;

  static override examples = [
    {
      description: "The measurements of the config's image (local provider: your local image of that version):",
      command: '<%= config.bin %> <%= command.id %>',
    },
    {
      description: 'From given URLs:',
      command:
        '<%= config.bin %> <%= command.id %> -u https://example.com/v2.1.0/measurements.json -s https://example.com/v2.1.0/measurements.json.sig',
    },
    {
      description: "The config's image, looked up in a version index:",
      command: '<%= config.bin %> <%= command.id %> --index https://example.com/images/index.json',
    },
  ];

  static override flags = {
    url: Flags.string({
      char: 'u',
      description: 'The measurements file: an https or file URL, or a path.',
      helpValue: '<url>',
    }),
    'signature-url': Flags.string({
      char: 's',
      description: 'Its signature (default: the measurements URL + ".sig").',
      helpValue: '<url>',
      dependsOn: ['url'],
    }),
    index: Flags.string({
      description: "A version index (https or file URL, or path) to look up the config's image in (clouds).",
      helpValue: '<url>',
      exclusive: ['url'],
    }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<{
    version: string;
    variant: string;
    source: string;
    key: { name: string; fingerprint: string };
    changed: boolean;
    measurements: Record<string, { expected: string; warnOnly: boolean }>;
  }> {
    const [{ withWorkspaceSession }, { fetchMeasurements }] = await Promise.all([
      import('../../cluster/session.js'),
      import('../../images/fetch-measurements.js'),
    ]);
    const result = await withWorkspaceSession(this.workspaceDir, 'config fetch-measurements', ({ workspaceDir, log }) =>
      fetchMeasurements({
        workspaceDir,
        log,
        url: this.flags.url,
        signatureUrl: this.flags['signature-url'],
        index: this.flags.index,
      }),
    );
    if (!this.jsonEnabled()) {
      this.log(`Verified the measurements of image ${result.version} (${result.variant}) from ${result.source}`);
      this.log(`  signed by ${result.key.name}, key SHA-256 ${result.key.fingerprint}`);
      for (const [index, m] of Object.entries(result.measurements))
        this.log(`  PCR ${index.padStart(2)}: ${m.expected}${m.warnOnly ? ' (warn only)' : ''}`);
      this.log(
        result.changed
          ? 'Wrote them into the config.'
          : 'The config has these measurements already; nothing was changed.',
      );
    }
    return result;
  }
}
