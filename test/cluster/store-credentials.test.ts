/**
 * Reading the workspace's cluster store credentials (constellation-store.json): whatever the file holds, a broken one
 * ends in a UserError that names the file (issue 20, item 6: `null` ended in "This is a bug").
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readStoreCredentials } from '../../cli/cluster/store.js';
import { UserError } from '../../lib/errors.js';

describe('cluster store credentials (constellation-store.json)', () => {
  let ws: string;
  beforeEach(async () => {
    ws = await fs.mkdtemp(path.join(os.tmpdir(), 'store-credentials-'));
  });
  afterEach(async () => {
    await fs.rm(ws, { recursive: true, force: true });
  });

  const write = (text: string) => fs.writeFile(path.join(ws, 'constellation-store.json'), text, { mode: 0o600 });

  const broken: [string, string, RegExp][] = [
    ['null', 'null', /holds null, not an object/],
    ['a list', '[]', /holds a list, not an object/],
    ['a number', '42', /holds a number, not an object/],
    ['a string', '"etcd"', /holds a string, not an object/],
    [
      'etcd endpoints that are not strings',
      JSON.stringify({ backend: 'etcd', endpoints: [1], caCert: 'c', clientCert: 'c', clientKey: 'k' }),
      /does not hold cluster store credentials\.$/,
    ],
    ['not JSON', '{', /is not valid JSON/],
  ];
  for (const [name, text, expected] of broken) {
    it(`refuses ${name} with a UserError naming the file`, async () => {
      await write(text);
      await assert.rejects(
        readStoreCredentials(ws),
        (err: Error) =>
          err instanceof UserError &&
          err.message.startsWith(path.join(ws, 'constellation-store.json')) &&
          expected.test(err.message),
      );
    });
  }

  it('reads the Kubernetes backend and etcd credentials', async () => {
    await write(JSON.stringify({ backend: 'kubernetes' }));
    assert.deepEqual(await readStoreCredentials(ws), { backend: 'kubernetes' });
    const etcd = {
      backend: 'etcd',
      endpoints: ['https://10.0.0.1:2379'],
      caCert: 'ca',
      clientCert: 'cert',
      clientKey: 'key',
    };
    await write(JSON.stringify(etcd));
    assert.deepEqual(await readStoreCredentials(ws), etcd);
  });
});
