import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RecordedResource, ResourceJournal } from '../../providers/contract.js';
import { UserError } from '../../lib/errors.js';
import { RESOURCES_FILE } from '../../lib/workspace/files.js';
import { FileResourceJournal, MemoryResourceJournal } from '../../lib/workspace/resource-journal.js';

const vpc: RecordedResource = { kind: 'aws:vpc', id: 'vpc-1', name: 'net' };
const subnet: RecordedResource = { kind: 'aws:subnet', id: 'subnet-1', dependsOn: ['vpc-1'], data: { zone: 'a' } };

/** The contract every journal keeps. */
function behavesLikeAJournal(make: () => Promise<ResourceJournal>) {
  it('starts empty, records in order, updates by id in place, removes', async () => {
    const journal = await make();
    assert.deepEqual(await journal.list(), []);
    await journal.record(vpc);
    await journal.record(subnet);
    await journal.record({ ...vpc, name: 'renamed' });
    assert.deepEqual(
      (await journal.list()).map((r) => [r.id, r.name]),
      [
        ['vpc-1', 'renamed'],
        ['subnet-1', undefined],
      ],
    );
    await journal.remove('vpc-1');
    await journal.remove('not-there');
    assert.deepEqual(await journal.list(), [subnet]);
  });

  it('loses no entry when many records run concurrently', async () => {
    const journal = await make();
    await Promise.all(Array.from({ length: 40 }, (_, i) => journal.record({ kind: 'local:node', id: `node-${i}` })));
    const ids = (await journal.list()).map((r) => r.id).sort();
    assert.equal(ids.length, 40);
    assert.equal(new Set(ids).size, 40);
  });

  it('returns copies: changing a listed resource does not change the journal', async () => {
    const journal = await make();
    const resource = { ...subnet, data: { zone: 'a' } };
    await journal.record(resource);
    resource.data.zone = 'changed';
    (await journal.list())[0].data!.zone = 'changed too';
    assert.equal((await journal.list())[0].data?.zone, 'a');
  });

  it('rejects a resource without id', async () => {
    const journal = await make();
    await assert.rejects(journal.record({ kind: 'x', id: '' }), TypeError);
    assert.deepEqual(await journal.list(), []);
  });
}

describe('workspace/resource-journal', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'journal-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  describe('MemoryResourceJournal', () => {
    behavesLikeAJournal(async () => new MemoryResourceJournal());
  });

  describe('FileResourceJournal', () => {
    behavesLikeAJournal(async () => new FileResourceJournal(dir));

    it('is durable across instances, in a 0600 JSON file, without temp files', async () => {
      await new FileResourceJournal(dir).record(vpc);
      const file = path.join(dir, RESOURCES_FILE);
      assert.equal((await fs.stat(file)).mode & 0o777, 0o600);
      assert.deepEqual(JSON.parse(await fs.readFile(file, 'utf8')), { version: 1, resources: [vpc] });
      assert.deepEqual(await new FileResourceJournal(dir).list(), [vpc]);
      assert.deepEqual(await fs.readdir(dir), [RESOURCES_FILE]);
    });

    it('never replaces a corrupt journal and names the file', async () => {
      const file = path.join(dir, RESOURCES_FILE);
      await fs.writeFile(file, '{"version":1,"resources":[{"kind":"aws:vpc"}]}');
      const journal = new FileResourceJournal(dir);
      for (const op of [() => journal.list(), () => journal.record(vpc), () => journal.remove('x')]) {
        await assert.rejects(op(), (err: Error) => {
          assert.ok(err instanceof UserError);
          assert.match(err.message, /constellation-resources\.json is invalid at resources\.0\.id/);
          return true;
        });
      }
      await fs.writeFile(file, 'not json');
      await assert.rejects(journal.list(), /is not valid JSON/);
      assert.equal(await fs.readFile(file, 'utf8'), 'not json');
    });

    it('answers operations that waited together in the order they were called; a bad one fails alone', async () => {
      const journal = new FileResourceJournal(dir);
      // The first runs at once; the rest wait for it together and share one read and one write.
      const [, listedBefore, , listedAfter, bad] = await Promise.allSettled([
        journal.record(vpc),
        journal.list(),
        journal.record(subnet),
        journal.list(),
        journal.record({ kind: 'x', id: '' }),
        journal.remove('vpc-1'),
      ]);
      assert.deepEqual(listedBefore, { status: 'fulfilled', value: [vpc] });
      assert.deepEqual(listedAfter, { status: 'fulfilled', value: [vpc, subnet] });
      assert.equal(bad.status, 'rejected');
      assert.deepEqual(await new FileResourceJournal(dir).list(), [subnet]);
    });

    it('keeps working after a failed operation', async () => {
      const journal = new FileResourceJournal(dir);
      await assert.rejects(journal.record({ kind: '', id: 'x' }));
      await journal.record(vpc);
      assert.deepEqual(await journal.list(), [vpc]);
    });
  });
});
