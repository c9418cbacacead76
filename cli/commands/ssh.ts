import { Flags } from '@oclif/core';
import { BaseCommand } from '../base-command.js';
import type { EmergencyCertificate } from '../../lib/ssh/emergency-access.js';

export default class Ssh extends BaseCommand<typeof Ssh> {
  static override summary =
    "Make an SSH certificate for emergency access to the nodes, signed by the cluster's SSH CA.";
  static override description = `Reads constellation-mastersecret.json, derives the cluster's emergency SSH certificate authority from it (as upstream Constellation does), and signs a user certificate for your public key: principal root, valid for 24 hours. The certificate is written beside the key as <key>-cert.pub (id_ed25519.pub gives id_ed25519-cert.pub), where \`ssh -i <key>\` finds it. A certificate from an earlier run is replaced.

A node's SSH server trusts this CA and nothing else: no passwords, no authorized keys. Each node's host key carries a host certificate from the same CA: the command also writes constellation-known-hosts into the workspace (the CA's @cert-authority line), with which ssh accepts the nodes with no prompt.`;

  static override examples = [
    {
      description: 'A certificate for your Ed25519 key, then a shell on a node:',
      command:
        '<%= config.bin %> <%= command.id %> --key ~/.ssh/id_ed25519.pub\nssh -i ~/.ssh/id_ed25519 -o UserKnownHostsFile=constellation-known-hosts root@<node address>',
    },
  ];

  static override enableJsonFlag = true;

  static override flags = {
    key: Flags.string({
      description: 'Your SSH public key file (e.g. ~/.ssh/id_ed25519.pub).',
      required: true,
      helpValue: 'FILE',
    }),
  };

  public async run(): Promise<EmergencyCertificate> {
    const { writeEmergencyCertificate } = await import('../../lib/ssh/emergency-access.js');
    const result = await writeEmergencyCertificate({ workspaceDir: this.workspaceDir, keyFile: this.flags.key });
    if (!this.jsonEnabled()) {
      this.log(
        `${result.replaced ? 'Replaced' : 'Wrote'} the SSH certificate ${result.certificateFile} (${result.keyType}, principal ${result.principals.join(', ')}, valid until ${result.validBefore.toISOString()}).`,
      );
      this.log(`Wrote the known_hosts file ${result.knownHostsFile} (the CA's @cert-authority line).`);
      this.log(
        `Connect with: ssh -i ${result.certificateFile.replace(/-cert\.pub$/, '')} -o UserKnownHostsFile=${result.knownHostsFile} root@<node address>`,
      );
    }
    return result;
  }
}
