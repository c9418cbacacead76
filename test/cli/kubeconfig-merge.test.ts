import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import {
  kubeconfigClusterName,
  mergeKubeconfig,
  removeMergedKubeconfig,
  userKubeconfigPath,
} from '../../cli/cluster/kubeconfig-merge.js';

const ADMIN = `apiVersion: v1
kind: Config
clusters:
- name: constell
  cluster:
    server: https://127.0.4.1:6443
    certificate-authority-data: Q0EgY2VydA==
users:
- name: kubernetes-admin
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
contexts:
- name: kubernetes-admin@constell
  context:
    cluster: constell
    user: kubernetes-admin
current-context: kubernetes-admin@constell
`;

const OTHER = `apiVersion: v1
kind: Config
clusters:
- name: constell
  cluster:
    server: https://old-address:6443
- name: prod
  cluster:
    server: https://prod.example:6443
users:
- name: alice
  user:
    token: t
contexts:
- name: prod
  context:
    cluster: prod
    user: alice
    namespace: web
current-context: prod
`;

describe('cli/cluster/kubeconfig-merge', () => {
  let dir: string;
  let admin: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubeconfig-'));
    admin = path.join(dir, 'constellation-admin.conf');
    await fs.writeFile(admin, ADMIN);
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  it('reads KUBECONFIG (its first file), else ~/.kube/config', () => {
    assert.equal(userKubeconfigPath({ KUBECONFIG: `/a/b${path.delimiter}/c/d` }, '/home/u'), '/a/b');
    assert.equal(userKubeconfigPath({}, '/home/u'), '/home/u/.kube/config');
  });

  it("keeps every other entry, replaces the cluster's own by name, sets the current context, writes 0600", async () => {
    const target = path.join(dir, 'config');
    await fs.writeFile(target, OTHER);
    const result = await mergeKubeconfig({ adminKubeconfig: admin, env: { KUBECONFIG: target } });
    assert.deepEqual(result, { file: target, context: 'kubernetes-admin@constell' });
    const merged = parse(await fs.readFile(target, 'utf8'));
    assert.deepEqual(
      merged.clusters.map((c: { name: string }) => c.name),
      ['prod', 'constell'],
    );
    assert.equal(merged.clusters[1].cluster.server, 'https://127.0.4.1:6443');
    assert.deepEqual(
      merged.users.map((u: { name: string }) => u.name),
      ['alice', 'kubernetes-admin'],
    );
    assert.deepEqual(merged.contexts[0], {
      name: 'prod',
      context: { cluster: 'prod', user: 'alice', namespace: 'web' },
    });
    assert.equal(merged['current-context'], 'kubernetes-admin@constell');
    assert.equal((await fs.stat(target)).mode & 0o777, 0o600);
  });

  it("names the entries after the cluster, so a second cluster's merge keeps the first one's", async () => {
    const target = path.join(dir, 'config');
    const first = kubeconfigClusterName({ name: 'constell', uid: '0a1b2c3d' });
    const second = kubeconfigClusterName({ name: 'constell', uid: '4e5f6071' });
    assert.deepEqual(
      await mergeKubeconfig({ adminKubeconfig: admin, env: { KUBECONFIG: target }, clusterName: first }),
      { file: target, context: 'admin@constell-0a1b2c3d' },
    );
    await mergeKubeconfig({ adminKubeconfig: admin, env: { KUBECONFIG: target }, clusterName: second });
    const merged = parse(await fs.readFile(target, 'utf8'));
    assert.deepEqual(
      merged.contexts.map((c: { name: string }) => c.name),
      ['admin@constell-0a1b2c3d', 'admin@constell-4e5f6071'],
    );
    assert.deepEqual(merged.contexts[0].context, { cluster: 'constell-0a1b2c3d', user: 'constell-0a1b2c3d-admin' });
    assert.deepEqual(
      merged.clusters.map((c: { name: string }) => c.name),
      ['constell-0a1b2c3d', 'constell-4e5f6071'],
    );
    assert.equal(merged['current-context'], 'admin@constell-4e5f6071');
  });

  it("removes exactly a cluster's merged entries (terminate, mini down), unsets the current context if it was that cluster's", async () => {
    const target = path.join(dir, 'config');
    await fs.writeFile(target, OTHER);
    const clusterName = kubeconfigClusterName({ name: 'constell', uid: '0a1b2c3d' });
    await mergeKubeconfig({ adminKubeconfig: admin, env: { KUBECONFIG: target }, clusterName });
    assert.equal(await removeMergedKubeconfig({ clusterName, env: { KUBECONFIG: target } }), target);
    const left = parse(await fs.readFile(target, 'utf8'));
    assert.deepEqual(
      left.contexts.map((c: { name: string }) => c.name),
      ['prod'],
    );
    assert.deepEqual(
      left.clusters.map((c: { name: string }) => c.name),
      ['constell', 'prod'],
    );
    assert.deepEqual(
      left.users.map((u: { name: string }) => u.name),
      ['alice'],
    );
    assert.equal(left['current-context'], '');
    assert.equal(
      await removeMergedKubeconfig({ clusterName, env: { KUBECONFIG: target } }),
      undefined,
      'a second removal changes nothing',
    );
  });

  it('creates ~/.kube/config when there is none', async () => {
    const result = await mergeKubeconfig({ adminKubeconfig: admin, env: {}, home: dir });
    assert.equal(result.file, path.join(dir, '.kube', 'config'));
    assert.equal(parse(await fs.readFile(result.file, 'utf8'))['current-context'], 'kubernetes-admin@constell');
  });

  for (const [what, text] of [
    ['broken YAML', 'clusters: [\n'],
    ['a scalar', 'hello\n'],
    ['clusters that are not a list', 'clusters: 5\n'],
    ['another kind of object', 'kind: Pod\napiVersion: v1\n'],
  ]) {
    it(`leaves a kubeconfig with ${what} untouched, with a clear error`, async () => {
      const target = path.join(dir, 'config');
      await fs.writeFile(target, text);
      await assert.rejects(
        mergeKubeconfig({ adminKubeconfig: admin, env: { KUBECONFIG: target } }),
        (err: Error & { hint?: string }) => {
          assert.match(
            err.message,
            new RegExp(`Your kubeconfig ${target} cannot be parsed \\(.+\\); it was left untouched\\.`),
          );
          assert.match(err.hint ?? '', /kubectl config view --flatten/);
          return true;
        },
      );
      assert.equal(await fs.readFile(target, 'utf8'), text);
    });
  }
});
