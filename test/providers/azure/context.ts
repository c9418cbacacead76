/** A ProviderContext for the Azure provider tests: an in-memory journal and captured progress messages. */
import type { ProviderContext } from '../../../providers/contract.js';
import { MemoryResourceJournal } from '../../../lib/workspace/resource-journal.js';

export type TestContext = ProviderContext & { journal: MemoryResourceJournal; messages: string[] };

export function testContext(
  journal = new MemoryResourceJournal(),
  extra: Partial<Omit<ProviderContext, 'journal'>> = {},
): TestContext {
  const messages: string[] = [];
  const log = { debug: () => undefined, info: () => undefined, warn: (msg: string) => void messages.push(msg) };
  return {
    journal,
    log,
    progress: (m: string) => void messages.push(m),
    workspaceDir: '/nonexistent',
    messages,
    ...extra,
  };
}
