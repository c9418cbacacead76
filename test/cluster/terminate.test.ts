import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { createCluster } from '../../cli/cluster/create.js';
import { checkTerminateByTag, terminateCluster } from '../../cli/cluster/terminate.js';
import { generateConfigFiles } from '../../lib/config/index.js';
import { nullLogger } from '../../lib/logging/index.js';
import { generateMasterSecret } from '../../lib/kms/index.js';
import { ADMIN_CONF_FILE, CONFIG_FILE, MASTER_SECRET_FILE } from '../../lib/workspace/files.js';
import { writeMasterSecret } from '../../lib/workspace/master-secret.js';
import { MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';
import { emptyState, readState } from '../../lib/workspace/state.js';
import type { ProviderContext, TerminateOptions } from '../../providers/contract.js';
import { MemoryProvider } from './support/stand-in.js';
import { localWorkspace, tempDir } from './support/workspace.js';

/** Records the options each terminate got. */
class RecordingProvider extends MemoryProvider {
  readonly terminateOptions: (TerminateOptions | undefined)[] = [];

  override async terminate(_ctx?: ProviderContext, options?: TerminateOptions): Promise<void> {
    this.terminateOptions.push(options);
    await super.terminate();
  }
}

describe('terminateCluster', () => {
  let ws: string;
  beforeEach(async () => {
    ws = await localWorkspace();
  });
  afterEach(async () => {
    await fs.rm(ws, { recursive: true, force: true });
  });

  it('has the provider delete its resources, empties the state, removes the kubeconfig, keeps the master secret', async () => {
    const provider = new MemoryProvider();
    const journal = new MemoryResourceJournal();
    await createCluster({ workspaceDir: ws, provider, journal, log: nullLogger });
    await writeMasterSecret(ws, generateMasterSecret());
    const secret = await fs.readFile(path.join(ws, MASTER_SECRET_FILE));
    await fs.writeFile(path.join(ws, ADMIN_CONF_FILE), 'kubeconfig');

    const result = await terminateCluster({ workspaceDir: ws, journal, log: nullLogger, provider });
    assert.equal(provider.terminated, 1);
    assert.equal(result.provider, 'local');
    assert.deepEqual(await readState(ws), emptyState());
    assert.equal(
      await fs.access(path.join(ws, ADMIN_CONF_FILE)).then(
        () => true,
        () => false,
      ),
      false,
    );
    assert.deepEqual(await fs.readFile(path.join(ws, MASTER_SECRET_FILE)), secret);
    assert.ok(await fs.access(path.join(ws, CONFIG_FILE)).then(() => true));
  });

  it('cleans up a workspace without a config: the provider is found from the journal', async () => {
    await fs.rm(path.join(ws, CONFIG_FILE));
    const journal = new MemoryResourceJournal([{ kind: 'local:cluster', id: 'local-cluster' }]);
    const result = await terminateCluster({ workspaceDir: ws, journal, log: nullLogger });
    assert.equal(result.provider, 'local');
    assert.deepEqual(await journal.list(), []);
  });

  it('does nothing where nothing was made', async () => {
    await fs.rm(path.join(ws, CONFIG_FILE));
    const result = await terminateCluster({ workspaceDir: ws, journal: new MemoryResourceJournal(), log: nullLogger });
    assert.equal(result.provider, undefined);
  });

  it('byTag has a cloud provider also delete what carries the cluster tag; without it the provider is not asked to', async () => {
    const provider = new RecordingProvider('aws');
    await terminateCluster({
      workspaceDir: ws,
      journal: new MemoryResourceJournal(),
      log: nullLogger,
      provider,
      byTag: true,
    });
    await terminateCluster({ workspaceDir: ws, journal: new MemoryResourceJournal(), log: nullLogger, provider });
    assert.deepEqual(provider.terminateOptions, [{ byTag: true }, undefined]);
  });

  it('refuses byTag for the local provider before anything is deleted', async () => {
    const provider = new RecordingProvider('local');
    const refused = (err: Error & { hint?: string }) =>
      /--by-tag/.test(err.message) && /local provider/.test(err.message) && /without --by-tag/.test(err.hint ?? '');
    await assert.rejects(
      terminateCluster({
        workspaceDir: ws,
        journal: new MemoryResourceJournal(),
        log: nullLogger,
        provider,
        byTag: true,
      }),
      refused,
    );
    assert.equal(provider.terminated, 0);
    await assert.rejects(checkTerminateByTag(ws), refused, 'the command checks before it asks');
  });

  it('the early --by-tag check finds the provider like terminate does, and lets clouds pass', async () => {
    const aws = await tempDir();
    try {
      await generateConfigFiles(aws, 'aws');
      await checkTerminateByTag(aws);
      await fs.rm(path.join(ws, CONFIG_FILE));
      await fs.writeFile(
        path.join(ws, 'constellation-resources.json'),
        JSON.stringify({ version: 1, resources: [{ kind: 'local:cluster', id: 'local-cluster' }] }),
      );
      await assert.rejects(
        checkTerminateByTag(ws),
        /local provider/,
        'without a config, the journal names the provider',
      );
    } finally {
      await fs.rm(aws, { recursive: true, force: true });
    }
  });
});
