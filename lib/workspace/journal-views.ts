/**
 * The two views of the workspace's resource journal (./resource-journal.ts), the IAM part and the cluster part:
 * every cluster command (create, apply, init, status, verify, recover, upgrade, terminate, mini) and the IAM
 * commands hand a provider one of them, never the whole journal.
 * `iamJournalView`: `iam create` and `create` record into the same journal (constellation-resources.json), and not
 * every provider's IAM kinds say "iam" (Azure's resource group, identity and role assignments are plain Azure kinds).
 * So every record made through this view is marked, and the view lists only marked records and records of the `<provider>:iam-*` kinds: `iam destroy` never sees, and so never deletes, a
 * cluster's resources, and `iam create` never adopts one (e.g. the cluster's resource group) as its own.
 * `clusterJournalView` is the other half: what `create`, `status` and `terminate` hand a provider, so a cluster's
 * terminate never deletes an identity `iam create` made (even one it reused, such as a resource group).
 */
import type { RecordedResource, ResourceJournal } from './resource-journal.js';

/** Key in a record's data that marks it as made by `iam create`. */
export const IAM_MARK = 'madeByIamCreate';

export function isIamRecord(r: RecordedResource): boolean {
  return r.data?.[IAM_MARK] === true || /^[^:]+:iam-/.test(r.kind);
}

/** The provider a record belongs to: the part of its kind before the colon ("aws:iam-role" → "aws"). */
export function providerOfRecord(r: RecordedResource): string {
  return r.kind.split(':')[0];
}

export function iamJournalView(journal: ResourceJournal): ResourceJournal {
  return {
    list: async () => (await journal.list()).filter(isIamRecord),
    record: (r) => journal.record({ ...r, data: { ...r.data, [IAM_MARK]: true } }),
    remove: (id) => journal.remove(id),
  };
}

export function clusterJournalView(journal: ResourceJournal): ResourceJournal {
  return {
    list: async () => (await journal.list()).filter((r) => !isIamRecord(r)),
    // A resource iam create made and the cluster reuses stays iam's: recording it again must not take it over.
    record: async (r) => {
      const existing = (await journal.list()).find((x) => x.id === r.id);
      if (existing && isIamRecord(existing)) return;
      await journal.record(r);
    },
    remove: async (id) => {
      const existing = (await journal.list()).find((x) => x.id === id);
      if (existing && isIamRecord(existing)) return;
      await journal.remove(id);
    },
  };
}
