import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { runCli } from '../support/cli.js';

/** An admin kubeconfig as init writes it where the cluster runs Kubernetes. */
const ADMIN_CONF = `apiVersion: v1
kind: Config
clusters:
- name: constell
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: AAAA
users:
- name: admin
  user:
    client-certificate-data: AAAA
    client-key-data: AAAA
contexts:
- name: admin@constell
  context:
    cluster: constell
    user: admin
current-context: admin@constell
`;

describe('apply --merge-kubeconfig (as upstream)', function () {
  this.timeout(60_000);
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'apply-merge-'));
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  it("merges the workspace's admin kubeconfig into the user's and makes its context current", async () => {
    assert.equal((await runCli(['config', 'generate', 'local', '-C', dir])).code, 0);
    await fs.writeFile(path.join(dir, 'constellation-admin.conf'), ADMIN_CONF, { mode: 0o600 });
    const kubeconfig = path.join(dir, 'kube', 'config');
    // Every phase skipped: apply changes nothing and only merges (the cluster was initialized before).
    const res = await runCli(
      ['apply', '--merge-kubeconfig', '--skip-phases', 'infrastructure,init,attestationconfig,image,k8s', '-C', dir],
      { env: { KUBECONFIG: kubeconfig } },
    );
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /Merged the cluster's kubeconfig into .*kube\/config; current context: admin@constell\./);
    const merged = parse(await fs.readFile(kubeconfig, 'utf8')) as {
      'current-context': string;
      clusters: { name: string }[];
    };
    assert.equal(merged['current-context'], 'admin@constell');
    assert.deepEqual(
      merged.clusters.map((c) => c.name),
      ['constell'],
    );
  });
});
