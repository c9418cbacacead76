import { Args } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';

export default class MiniStart extends BaseCommand<typeof MiniStart> {
  static override summary = 'Power local nodes on: their TPM starts and they boot, measured.';
  static override description = `Starts each node's TPM and boots it: the launcher measures the node image and starts the bootstrapper, which rejoins the cluster (its state disk is formatted) or waits for \`constellation recover\` when no join service answers. A node that runs already is left alone.`;

  static override examples = [
    { description: 'Power one worker on:', command: '<%= config.bin %> <%= command.id %> worker-0' },
  ];

  static override strict = false;
  static override args = {
    node: Args.string({ description: 'Node name(s), as `constellation status` lists them.', required: true }),
  };
  static override enableJsonFlag = true;

  public async run(): Promise<{ nodes: string[] }> {
    const { runPowerCommand } = await import('../../cluster/power-command.js');
    return runPowerCommand(this.workspaceDir, 'start', { nodes: this.positional }, (l) => {
      if (!this.jsonEnabled()) this.log(l);
    });
  }
}
