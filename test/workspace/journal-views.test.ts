import assert from 'node:assert/strict';
import { clusterJournalView, iamJournalView } from '../../lib/workspace/journal-views.js';
import { MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';

// create/terminate and iam create/destroy share one journal; each side must see and change only its own records.
describe('workspace/journal-views', () => {
  it('the cluster view hides what iam create made, so terminate cannot delete it', async () => {
    const journal = new MemoryResourceJournal();
    await iamJournalView(journal).record({ kind: 'azure:identity', id: 'id-1' });
    await journal.record({ kind: 'aws:iam-role', id: 'role-1' });
    await clusterJournalView(journal).record({ kind: 'azure:vmss', id: 'vmss-1' });

    const cluster = clusterJournalView(journal);
    assert.deepEqual(
      (await cluster.list()).map((r) => r.id),
      ['vmss-1'],
    );
    await cluster.remove('id-1');
    await cluster.remove('role-1');
    assert.deepEqual((await journal.list()).map((r) => r.id).sort(), ['id-1', 'role-1', 'vmss-1']);
    assert.deepEqual((await iamJournalView(journal).list()).map((r) => r.id).sort(), ['id-1', 'role-1']);
  });

  it('a resource iam create made and the cluster reuses stays iam’s', async () => {
    const journal = new MemoryResourceJournal();
    await iamJournalView(journal).record({ kind: 'azure:resource-group', id: 'rg-1' });
    await clusterJournalView(journal).record({ kind: 'azure:resource-group', id: 'rg-1', data: { ready: true } });
    const [rg] = await journal.list();
    assert.equal(rg.data?.madeByIamCreate, true);
    assert.deepEqual(await clusterJournalView(journal).list(), []);
  });
});
