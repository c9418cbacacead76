import { Args } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';

export default class MiniStop extends BaseCommand<typeof MiniStop> {
  static override summary = 'Power local nodes off, as a hypervisor would.';
  static override description = `Every process of each node stops, its TPM too, and its state disk is unmounted; the node's folder (TPM state, encrypted state disk) stays. \`constellation status\` shows the node as stopped; \`constellation mini start\` powers it on again.`;

  static override examples = [
    { description: 'Power one worker off:', command: '<%= config.bin %> <%= command.id %> worker-0' },
  ];

  static override strict = false;
  static override args = {
    node: Args.string({ description: 'Node name(s), as `constellation status` lists them.', required: true }),
  };
  static override enableJsonFlag = true;

  public async run(): Promise<{ nodes: string[] }> {
    const { runPowerCommand } = await import('../../cluster/power-command.js');
    return runPowerCommand(this.workspaceDir, 'stop', { nodes: this.positional }, (l) => {
      if (!this.jsonEnabled()) this.log(l);
    });
  }
}
