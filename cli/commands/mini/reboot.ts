import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';

export default class MiniReboot extends BaseCommand<typeof MiniReboot> {
  static override summary = 'Reboot local nodes the way a VM reboots.';
  static override description = `Each node's processes stop (its state disk is unmounted), its TPM restarts with cleared PCRs (the TPM keeps its state, so the node keeps its attestation key), the launcher measures the node image again, and the bootstrapper starts. A node whose state disk is formatted asks the join service for a rejoin ticket to get its disk key back; if no join service answers (every control-plane node rebooted), control-plane nodes wait for \`constellation recover\`.

--control-planes reboots every control-plane node at once. The command returns once the nodes are booting; \`constellation status\` shows when they are back.`;

  static override examples = [
    { description: 'Reboot one worker:', command: '<%= config.bin %> <%= command.id %> worker-0' },
    {
      description: 'Reboot every control-plane node at once (then `constellation recover`):',
      command: '<%= config.bin %> <%= command.id %> --control-planes',
    },
  ];

  static override strict = false;
  static override args = { node: Args.string({ description: 'Node name(s), as `constellation status` lists them.' }) };
  static override flags = {
    'control-planes': Flags.boolean({ description: 'Reboot every control-plane node at once.' }),
  };
  static override enableJsonFlag = true;

  public async run(): Promise<{ nodes: string[] }> {
    const { runPowerCommand } = await import('../../cluster/power-command.js');
    return runPowerCommand(
      this.workspaceDir,
      'reboot',
      { nodes: this.positional, controlPlanes: this.flags['control-planes'] },
      (l) => {
        if (!this.jsonEnabled()) this.log(l);
      },
    );
  }
}
