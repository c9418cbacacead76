import { Args, Flags } from '@oclif/core';
import path from 'node:path';
import { BaseCommand } from '../../base-command.js';
import { CONFIG_FILE } from '../../../lib/workspace/files.js';
import type { AttestationReport } from '../../../lib/attestation/report.js';

/** Exit code of a rejected document (1 stays "could not check": bad input, missing file). */
const EXIT_REJECTED = 3;

export default class AttestationVerify extends BaseCommand<typeof AttestationVerify> {
  static override summary = 'Verify an attestation document against the measurements of a config, and show why it passes or fails.';
  static override description = `Runs the attestation variant's validator over a saved attestation document (JSON: variant, attestation, instanceInfo, userData) and prints the verdict and a table of PCRs: index, expected value, actual value, whether the PCR is enforced or only warns, and whether it matches.

The measurements come from the workspace's ${CONFIG_FILE} unless --config names another file. --nonce is the nonce the document was made for (hex; empty by default).

local-vtpm: the AK registry of a local cluster is not reachable offline, so pass the node's registered attestation key with --ak (its TPMT_PUBLIC, binary or base64); without it the document is rejected as signed by an unregistered key.

Exit codes: 0 accepted, ${EXIT_REJECTED} rejected, 1 the document or config could not be read.`;

  static override examples = [
    '<%= config.bin %> attestation verify node-0.json',
    '<%= config.bin %> attestation verify node-0.json --nonce 6e6f6e6365... --json',
    '<%= config.bin %> attestation verify node-0.json --config ./other/constellation-conf.yaml --ak node-0.ak',
  ];

  static override enableJsonFlag = true;

  static override args = {
    document: Args.string({ description: 'The attestation document (JSON file).', required: true }),
  };

  static override flags = {
    nonce: Flags.string({ description: 'The nonce the document was made for, hex (default: empty).', default: '' }),
    config: Flags.string({ description: `Config file with the measurements (default: <workspace>/${CONFIG_FILE}).` }),
    ak: Flags.string({ description: "local-vtpm only: the node's registered attestation key (TPMT_PUBLIC, binary or base64 file)." }),
  };

  public async run(): Promise<AttestationReport> {
    const [{ verifyDocumentFile }, { renderAttestationReport }] = await Promise.all([
      import('../../attestation/verify-document.js'),
      import('../../../lib/attestation/report.js'),
    ]);
    const report = await verifyDocumentFile({
      documentFile: this.args.document,
      nonceHex: this.flags.nonce,
      configFile: this.flags.config ?? path.join(this.workspaceDir, CONFIG_FILE),
      akFile: this.flags.ak,
    });
    if (!this.jsonEnabled()) process.stdout.write(renderAttestationReport(report));
    if (report.verdict === 'rejected') {
      if (this.jsonEnabled()) this.logJson(report);
      this.exit(EXIT_REJECTED);
    }
    return report;
  }
}
