import { Args, Flags } from '@oclif/core';
import path from 'node:path';
import { BaseCommand } from '../../base-command.js';
import { CONFIG_FILE } from '../../../lib/workspace/files.js';
import type { AttestationReport } from '../../../lib/attestation/report.js';

/** Exit code of a rejected document (1 stays "could not check": bad input, missing file). */
const EXIT_REJECTED = 3;

export default class AttestationVerify extends BaseCommand<typeof AttestationVerify> {
  static override summary =
    'Verify an attestation document against the measurements of a config, and show why it passes or fails.';
  static override description = `Runs the attestation variant's validator over a saved attestation document (JSON: variant, attestation, instanceInfo, userData) and prints the verdict and a table of PCRs: index, expected value, actual value, whether the PCR is enforced or only warns, and whether it matches.

The measurements come from the workspace's ${CONFIG_FILE} unless --config names another file. --nonce is the nonce the document was made for (hex); without it, the document file's own "nonce" field (as \`verify -o raw\` writes it), else empty.

Cloud variants use the config's provider with its default credential chain where the variant needs the cloud (gcp-*: the instance's shielded VM identity; aws-nitro-tpm: the EC2 image), and fetch a VCEK missing from SEV-SNP evidence from AMD's key distribution service (cached in ~/.cache/constellation/kds).

local-vtpm: pass the node's registered attestation key with --ak (its TPMT_PUBLIC, binary or base64) unless the workspace's local cluster is running; without it the document is rejected as signed by an unregistered key.

--qualifying-data checks a quote made outside Constellation's protocol (e.g. without a nonce: --qualifying-data ""); --evidence-only checks only the evidence that vouches for the attestation key (SEV-SNP or TDX report and what binds the AK, cloud identity, certificate chain) of a document without a quote.

Exit codes: 0 accepted, ${EXIT_REJECTED} rejected, 1 the document or config could not be read.`;

  static override examples = [
    '<%= config.bin %> attestation verify node-0.json',
    '<%= config.bin %> attestation verify node-0.json --nonce 6e6f6e6365... --json',
    '<%= config.bin %> attestation verify node-0.json --config ./other/constellation-conf.yaml --ak node-0.ak',
    '<%= config.bin %> attestation verify gce-quote.json --qualifying-data ""',
    '<%= config.bin %> attestation verify azure-report.json --evidence-only',
  ];

  static override enableJsonFlag = true;

  static override args = {
    document: Args.string({ description: 'The attestation document (JSON file).', required: true }),
  };

  static override flags = {
    nonce: Flags.string({
      description:
        'The nonce the document was made for, hex (default: the document file\'s "nonce" field, as `verify -o raw` writes it, else empty).',
    }),
    config: Flags.string({ description: `Config file with the measurements (default: <workspace>/${CONFIG_FILE}).` }),
    ak: Flags.string({
      description: "local-vtpm only: the node's registered attestation key (TPMT_PUBLIC, binary or base64 file).",
    }),
    'qualifying-data': Flags.string({
      description:
        "The quote's qualifying data exactly, hex, for quotes made outside Constellation's protocol (instead of --nonce).",
    }),
    'evidence-only': Flags.boolean({
      description:
        'Check only the evidence that vouches for the attestation key (TEE report, cloud identity, certificates); no quote.',
      default: false,
    }),
  };

  public async run(): Promise<AttestationReport> {
    const [{ verifyDocumentFile }, { renderAttestationReport }, { verifierDepsFor }] = await Promise.all([
      import('../../attestation/verify-document.js'),
      import('../../../lib/attestation/report.js'),
      import('../../cluster/provider.js'),
    ]);
    const report = await verifyDocumentFile({
      documentFile: this.args.document,
      nonceHex: this.flags.nonce,
      qualifyingDataHex: this.flags['qualifying-data'],
      evidenceOnly: this.flags['evidence-only'],
      configFile: this.flags.config ?? path.join(this.workspaceDir, CONFIG_FILE),
      akFile: this.flags.ak,
      providerDeps: this.flags.ak
        ? undefined
        : (provider, section) => verifierDepsFor(provider, section, this.workspaceDir),
    });
    if (!this.jsonEnabled()) process.stdout.write(renderAttestationReport(report));
    if (report.verdict === 'rejected') {
      if (this.jsonEnabled()) this.logJson(report);
      this.exit(EXIT_REJECTED);
    }
    return report;
  }
}
