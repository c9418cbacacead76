import { BaseCommand } from '../../base-command.js';
import { UserError } from '../../../lib/errors.js';

export default class MiniUp extends BaseCommand<typeof MiniUp> {
  static override description = 'Create and initialize a whole cluster on this machine with the local provider.';
  static override examples = ['<%= config.bin %> mini up'];

  public async run(): Promise<void> {
    throw new UserError('`mini up` is not yet available in this build: the local provider has not landed yet.', {
      hint: 'Track the local-cluster work in the project issues; `constellation config generate local` already works.',
    });
  }
}
