import { Flags } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';

export default class MiniDown extends BaseCommand<typeof MiniDown> {
  static override summary =
    'Remove the local cluster and the workspace files mini up made, the master secret included.';
  static override description = `Terminates the local cluster (every node process, swtpm, state disk and node folder, the metadata server and load balancer), then deletes constellation-conf.yaml, constellation-state.yaml, constellation-mastersecret.json, constellation-admin.conf, constellation-resources.json and constellation-cluster.log. The debug log (constellation-debug.log) stays.

Refuses workspaces of cloud clusters (use \`constellation terminate\`), and, as terminate does, a folder with no cluster and none of these files. Asks for confirmation unless -y is given; without a terminal, -y is required; declined, it exits with code 1 and changes nothing.`;

  static override examples = [
    {
      description: 'Remove the local cluster in the current directory (asks first):',
      command: '<%= config.bin %> <%= command.id %>',
    },
    { description: 'Without asking:', command: '<%= config.bin %> <%= command.id %> -y -C ./mini' },
  ];

  static override flags = {
    yes: Flags.boolean({ char: 'y', description: 'Do not ask for confirmation (needed when there is no terminal).' }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<{ removedFiles: string[] } | undefined> {
    const [
      { confirmOrStop },
      { withWorkspaceSession },
      { checkSomethingToRemove, miniDown },
      { runWithSteps, rendererFor },
    ] = await Promise.all([
      import('../../confirm.js'),
      import('../../cluster/session.js'),
      import('../../cluster/mini.js'),
      import('../../cluster/reporter.js'),
    ]);
    await checkSomethingToRemove(this.workspaceDir);
    const question = `Remove the local cluster in ${this.workspaceDir} and its files, including the master secret?`;
    await confirmOrStop(question, { yes: this.flags.yes }, 'Nothing was removed.');
    const result = await withWorkspaceSession(this.workspaceDir, 'mini down', ({ workspaceDir, journal, log }) =>
      runWithSteps(
        [{ id: 'down', title: 'Removing the local cluster' }],
        rendererFor(process.stdout, this.jsonEnabled()),
        (report) => miniDown({ workspaceDir, journal, log, progress: (m) => report('down', m) }),
      ),
    );
    if (!this.jsonEnabled()) this.log(`Removed the local cluster and ${result.removedFiles.length} workspace files.`);
    return result;
  }
}
