import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';

export default class MiniLogs extends BaseCommand<typeof MiniLogs> {
  static override summary =
    "Print a node's log from its folder: the node program's log, or with --boot the whole boot log.";
  static override description = `Reads <workspace>/constellation-local/nodes/<node>/node.log, where a node of \`mini up\` (a process) or \`mini up --vm\` (a VM) keeps everything it prints. By default only the node program's log lines (JSON) are printed. --boot prints the whole file: for a VM the serial console (firmware, kernel, the boot report of its /init with the PCRs), for a process node the launcher's lines; the base64 dump of the firmware's event log is shortened to one line. -f keeps printing what is appended until Ctrl-C. A VM's QEMU messages are in qemu.log beside it.`;

  static override examples = [
    { description: "The node program's log of a worker:", command: '<%= config.bin %> <%= command.id %> worker-0' },
    {
      description: 'Why did a VM not boot? Its serial console:',
      command: '<%= config.bin %> <%= command.id %> control-plane-0 --boot',
    },
    { description: 'Follow a node while it rejoins:', command: '<%= config.bin %> <%= command.id %> worker-0 -f' },
  ];

  static override args = {
    node: Args.string({ description: 'The node, as `constellation status` lists it.', required: true }),
  };
  static override flags = {
    boot: Flags.boolean({
      description: 'Print the whole boot log (serial console or launcher), not only the node program.',
    }),
    follow: Flags.boolean({ char: 'f', description: 'Keep printing appended lines until Ctrl-C.' }),
  };

  public async run(): Promise<void> {
    const { miniLogs } = await import('../../cluster/mini-logs.js');
    const stop = new AbortController();
    const interrupt = () => stop.abort();
    process.once('SIGINT', interrupt);
    try {
      await miniLogs({
        workspaceDir: this.workspaceDir,
        node: this.args.node,
        boot: this.flags.boot,
        follow: this.flags.follow,
        signal: stop.signal,
        write: (line) => this.log(line),
      });
    } finally {
      process.off('SIGINT', interrupt);
    }
  }
}
