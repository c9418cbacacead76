/**
 * A stand-in `kubeadm` and `kubectl` for tests (neither is installable here): small Node scripts written into a
 * temp directory that goes first on PATH. kubeadm checks its arguments, parses the config file with the `yaml`
 * package, checks the documents' kinds and API version and that the PKI files are in place, and plays kubeadm's
 * phases: `init phase preflight`, `init phase certs all` (writes apiserver.crt, needs the CAs), then `init
 * --skip-phases=preflight,certs,...` (needs the certs phase's output and the kubelet serving certificate, writes an
 * admin.conf). It records each call (arguments, parsed documents, the static Pod directory's files at that moment)
 * in calls.jsonl and prints kubeadm-like output that contains tokens (so tests see them redacted). kubectl
 * answers `apply --server-side --force-conflicts --kubeconfig <file> -f <manifest>`, recording the manifest's
 * parsed documents. `token create <token> --ttl <d> --description <text> --kubeconfig <file>` needs the
 * kubeconfig to exist, is recorded the same way (no documents) and prints the token, as kubeadm does. With
 * STANDIN_FAIL=1 every command fails the way kubeadm does, echoing the token on stderr.
 *
 * The cluster kubeadm keeps in the API server (the kubeadm-config ConfigMap's ClusterConfiguration) is played by
 * cluster.json in a cluster directory, which the stand-ins of several nodes can share (`clusterDir`): `init`
 * writes the version it initialized; `join --control-plane` writes the node's admin.conf, as kubeadm does.
 * `upgrade apply <version> --yes` needs the admin.conf and an initialized cluster, checks the version as kubeadm
 * does (vMAJOR.MINOR.PATCH; not lower than the cluster's, at most one minor version higher; not newer than the
 * stand-in's own version, STANDIN_KUBEADM_VERSION, when set) and records the new version as applied. `upgrade
 * node` needs the admin.conf and is refused while no `upgrade apply` happened in the cluster (a test that runs
 * the two out of order sees it); it records the cluster's version as this node's (node-version in its own dir).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../support/cli.js';

/** The bootstrap token the stand-in's init "makes" and prints, as kubeadm init does. */
export const PRINTED_INIT_TOKEN = 'k8sini.t0kenpr1nt3dby1n';
export const PRINTED_CERTIFICATE_KEY = 'a3f1c9e2b4d6a8f0a3f1c9e2b4d6a8f0a3f1c9e2b4d6a8f0a3f1c9e2b4d6a8f0';
export const ADMIN_CONF_CONTENT = 'apiVersion: v1\nkind: Config\n# written by the stand-in kubeadm\n';

export interface StandinCall {
  program: 'kubeadm' | 'kubectl';
  args: string[];
  docs: Record<string, unknown>[];
  configMode: number;
  /** The static Pod directory's files when the call ran (null: no directory). */
  manifests: string[] | null;
}

const KUBECTL_SCRIPT = String.raw`#!/usr/bin/env node
'use strict';
const fs = require('fs');
const path = require('path');
const YAML = require(process.env.STANDIN_YAML);
const fail = (msg) => { process.stderr.write('stand-in kubectl: ' + msg + '\n'); process.exit(3); };
const args = process.argv.slice(2);
const [cmd, serverSide, force, kubeconfigFlag, kubeconfig, fileFlag, file] = args;
if (args.length !== 7 || cmd !== 'apply' || serverSide !== '--server-side' || force !== '--force-conflicts' || kubeconfigFlag !== '--kubeconfig' || fileFlag !== '-f') fail('unexpected arguments: ' + args.join(' '));
if (!fs.existsSync(kubeconfig)) fail('stat ' + kubeconfig + ': no such file or directory');
const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8')).map((d) => d.toJS()).filter(Boolean);
fs.appendFileSync(path.join(process.env.STANDIN_DIR, 'calls.jsonl'), JSON.stringify({ program: 'kubectl', args, docs, configMode: 0, manifests: null }) + '\n');
if (process.env.STANDIN_FAIL_KUBECTL) { process.stderr.write('error: unable to recognize "' + file + '": no matches\n'); process.exit(1); }
for (const d of docs) process.stdout.write(d.kind.toLowerCase() + '/' + d.metadata.name + ' serverside-applied\n');
`;

const SCRIPT = String.raw`#!/usr/bin/env node
'use strict';
const fs = require('fs');
const path = require('path');
const YAML = require(process.env.STANDIN_YAML);
const fail = (msg) => { process.stderr.write('stand-in kubeadm: ' + msg + '\n'); process.exit(3); };
const args = process.argv.slice(2);
const cmd = args[0];
const manifests = () => (fs.existsSync(process.env.STANDIN_MANIFESTS_DIR) ? fs.readdirSync(process.env.STANDIN_MANIFESTS_DIR) : null);
const record = (docs, configMode) => fs.appendFileSync(path.join(process.env.STANDIN_DIR, 'calls.jsonl'), JSON.stringify({ program: 'kubeadm', args, docs, configMode, manifests: manifests() }) + '\n');
if (cmd === 'token') {
  const [, sub, token, ttlFlag, , descriptionFlag, , kubeconfigFlag, kubeconfig] = args;
  if (args.length !== 9 || sub !== 'create' || ttlFlag !== '--ttl' || descriptionFlag !== '--description' || kubeconfigFlag !== '--kubeconfig') {
    fail('unexpected arguments: ' + args.join(' '));
  }
  if (!/^[a-z0-9]{6}\.[a-z0-9]{16}$/.test(token)) fail('token is not of the form [a-z0-9]{6}.[a-z0-9]{16}');
  if (!fs.existsSync(kubeconfig)) fail('failed to load admin kubeconfig: open ' + kubeconfig + ': no such file or directory');
  record([], 0);
  if (process.env.STANDIN_FAIL) {
    process.stderr.write('I0101 token.go:121] creating token ' + token + '\n');
    process.stderr.write('failed to create or update bootstrap token with name bootstrap-token-' + token.split('.')[0] + ': Unauthorized\n');
    process.stderr.write('To see the stack trace of this error execute with --v=5 or higher\n');
    process.exit(1);
  }
  process.stdout.write(token + '\n');
  process.exit(0);
}
const clusterFile = path.join(process.env.STANDIN_CLUSTER_DIR, 'cluster.json');
const readCluster = () => (fs.existsSync(clusterFile) ? JSON.parse(fs.readFileSync(clusterFile, 'utf8')) : undefined);
const parseVersion = (v) => { const m = /^v(\d+)\.(\d+)\.(\d+)$/.exec(v || ''); return m ? m.slice(1).map(Number) : undefined; };
const compare = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
if (cmd === 'upgrade') {
  const sub = args[1];
  if (!(sub === 'apply' && args.length === 4 && args[3] === '--yes') && !(sub === 'node' && args.length === 2)) fail('unexpected arguments: ' + args.join(' '));
  if (!fs.existsSync(process.env.STANDIN_ADMIN_CONF)) fail('couldn\'t create a Kubernetes client from file "' + process.env.STANDIN_ADMIN_CONF + '": no such file or directory');
  const cluster = readCluster();
  if (!cluster) fail('[upgrade/config] FATAL: failed to get config map: configmaps "kubeadm-config" not found');
  record([], 0);
  if (process.env.STANDIN_FAIL) { process.stderr.write('[upgrade/apply] FATAL: couldn\'t upgrade control plane. kubeadm has tried to recover everything into the earlier state.\n'); process.exit(1); }
  if (sub === 'node') {
    if (!cluster.applied) fail('the stand-in cluster was never upgraded with kubeadm upgrade apply: upgrade node has nothing to follow');
    fs.writeFileSync(path.join(process.env.STANDIN_DIR, 'node-version'), cluster.version);
    process.stdout.write('[upgrade] Upgrading your Static Pod-hosted control plane instance to version "' + cluster.version + '"...\n');
    process.stdout.write('[upgrade] The control plane instance for this node was successfully updated!\n');
    process.exit(0);
  }
  const target = args[2];
  const to = parseVersion(target);
  if (!to) fail('[upgrade/version] FATAL: the version argument is invalid due to these errors:\n\n\t- Unable to parse semantic version "' + target + '"');
  const current = parseVersion(cluster.version);
  if (compare(to, current) < 0) fail('[upgrade/version] FATAL: the version argument is invalid due to these fatal errors:\n\n\t- Specified version to upgrade to "' + target + '" is lower than the cluster version "' + cluster.version + '". Downgrades are not supported yet');
  if (to[0] !== current[0] || to[1] > current[1] + 1) fail('[upgrade/version] FATAL: the version argument is invalid due to these fatal errors:\n\n\t- Specified version to upgrade to "' + target + '" is too high; kubeadm can upgrade only 1 minor version at a time');
  const own = parseVersion(process.env.STANDIN_KUBEADM_VERSION);
  if (own && compare(to, own) > 0) fail('[upgrade/version] FATAL: the version argument is invalid due to these fatal errors:\n\n\t- Specified version to upgrade to "' + target + '" is higher than the kubeadm version "' + process.env.STANDIN_KUBEADM_VERSION + '". Upgrade kubeadm first using the tool you used to install kubeadm');
  fs.writeFileSync(clusterFile, JSON.stringify({ version: target, applied: true }));
  fs.writeFileSync(path.join(process.env.STANDIN_DIR, 'node-version'), target);
  process.stdout.write('[upgrade/successful] SUCCESS! Your cluster was upgraded to "' + target + '". Enjoy!\n');
  process.exit(0);
}
const configFile = args[args.indexOf('--config') + 1];
const phase = cmd === 'init' && args[1] === 'phase' ? args[2] : undefined;
const expected = phase === 'preflight' ? ['init', 'phase', 'preflight', '--config', configFile]
  : phase === 'certs' ? ['init', 'phase', 'certs', 'all', '--config', configFile]
  : cmd === 'init' ? ['init', '--config', configFile, '--skip-phases=preflight,certs,addon/kube-proxy']
  : ['join', '--config', configFile];
if (!configFile || JSON.stringify(args) !== JSON.stringify(expected)) fail('unexpected arguments: ' + args.join(' '));
const docs = YAML.parseAllDocuments(fs.readFileSync(configFile, 'utf8')).map((d) => {
  if (d.errors.length) fail('config is not YAML: ' + d.errors[0].message);
  return d.toJS();
});
for (const d of docs) if (d.apiVersion !== (d.kind === 'KubeletConfiguration' ? 'kubelet.config.k8s.io/v1beta1' : 'kubeadm.k8s.io/v1beta4')) fail('apiVersion ' + d.apiVersion);
const kinds = docs.map((d) => d.kind).join(',');
const pkiDir = process.env.STANDIN_PKI_DIR;
const needFiles = (names) => { for (const f of names) if (!fs.existsSync(path.join(pkiDir, f))) fail('missing ' + f + ' in ' + pkiDir); };
const caFiles = ['ca.crt', 'ca.key', 'front-proxy-ca.crt', 'front-proxy-ca.key', 'etcd/ca.crt', 'etcd/ca.key', 'sa.key', 'sa.pub'];
if (cmd === 'init') {
  if (kinds !== 'InitConfiguration,ClusterConfiguration,KubeletConfiguration') fail('kinds ' + kinds);
  if (docs[1].certificatesDir !== pkiDir) fail('certificatesDir ' + docs[1].certificatesDir);
  needFiles(caFiles);
  if (phase === 'certs') fs.writeFileSync(path.join(pkiDir, 'apiserver.crt'), 'signed by the stand-in');
  if (!phase) needFiles(['apiserver.crt', 'kubelet.crt', 'kubelet.key']);
} else {
  if (kinds !== 'JoinConfiguration') fail('kinds ' + kinds);
  if (!docs[0].discovery || !docs[0].discovery.bootstrapToken || !docs[0].discovery.bootstrapToken.token) fail('no bootstrap token');
  if (docs[0].controlPlane) needFiles(caFiles);
}
record(docs, fs.statSync(configFile).mode & 0o777);
if (process.env.STANDIN_FAIL) {
  const token = cmd === 'join' ? docs[0].discovery.bootstrapToken.token : 'none';
  process.stdout.write('[preflight] Running pre-flight checks\n');
  process.stderr.write('I0101 discovery.go:52] using token ' + token + '\n');
  process.stderr.write('error execution phase kubelet-start: could not authenticate with token ' + token + '\n');
  process.stderr.write('To see the stack trace of this error execute with --v=5 or higher\n');
  process.exit(1);
}
if (phase) {
  process.stdout.write('[' + phase + '] done\n');
} else if (cmd === 'init') {
  fs.writeFileSync(process.env.STANDIN_ADMIN_CONF, ${JSON.stringify(ADMIN_CONF_CONTENT)});
  fs.mkdirSync(process.env.STANDIN_CLUSTER_DIR, { recursive: true });
  fs.writeFileSync(clusterFile, JSON.stringify({ version: docs[1].kubernetesVersion, applied: false }));
  process.stdout.write('Your Kubernetes control-plane has initialized successfully!\n');
  process.stdout.write('  kubeadm join ' + docs[1].controlPlaneEndpoint + ' --token ${PRINTED_INIT_TOKEN} \\\n');
  process.stdout.write('    --control-plane --certificate-key ${PRINTED_CERTIFICATE_KEY}\n');
} else {
  if (docs[0].controlPlane) {
    fs.mkdirSync(path.dirname(process.env.STANDIN_ADMIN_CONF), { recursive: true });
    fs.writeFileSync(process.env.STANDIN_ADMIN_CONF, ${JSON.stringify(ADMIN_CONF_CONTENT)});
  }
  process.stderr.write('[discovery] using token ' + docs[0].discovery.bootstrapToken.token + '\n');
  process.stdout.write('This node has joined the cluster');
}
`;

export interface Standin {
  /** The environment to run kubeadm with: the stand-in first on PATH. */
  env: NodeJS.ProcessEnv;
  pkiDir: string;
  adminConf: string;
  manifestsDir: string;
  calls(): Promise<StandinCall[]>;
  /** The version the cluster runs (init, upgrade apply), and whether an upgrade apply happened. */
  cluster(): Promise<{ version: string; applied: boolean } | undefined>;
  /** The version `upgrade apply` or `upgrade node` left this node at. */
  nodeVersion(): Promise<string | undefined>;
}

/** Installs the stand-in as <dir>/bin/kubeadm; `clusterDir` (default `dir`) holds the cluster it plays. */
export async function installStandinKubeadm(dir: string, options: { clusterDir?: string } = {}): Promise<Standin> {
  const bin = path.join(dir, 'bin');
  await fs.mkdir(bin, { recursive: true });
  await fs.writeFile(path.join(bin, 'kubeadm'), SCRIPT, { mode: 0o755 });
  await fs.writeFile(path.join(bin, 'kubectl'), KUBECTL_SCRIPT, { mode: 0o755 });
  const pkiDir = path.join(dir, 'etc/kubernetes/pki');
  const adminConf = path.join(dir, 'etc/kubernetes/admin.conf');
  const manifestsDir = path.join(dir, 'etc/kubernetes/manifests');
  const env = {
    ...process.env,
    PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}`,
    STANDIN_DIR: dir,
    STANDIN_CLUSTER_DIR: options.clusterDir ?? dir,
    STANDIN_YAML: path.join(REPO_ROOT, 'node_modules/yaml'),
    STANDIN_PKI_DIR: pkiDir,
    STANDIN_ADMIN_CONF: adminConf,
    STANDIN_MANIFESTS_DIR: manifestsDir,
  };
  return {
    env,
    pkiDir,
    adminConf,
    manifestsDir,
    async calls() {
      const text = await fs.readFile(path.join(dir, 'calls.jsonl'), 'utf8').catch(() => '');
      return text
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as StandinCall);
    },
    async cluster() {
      const text = await fs
        .readFile(path.join(options.clusterDir ?? dir, 'cluster.json'), 'utf8')
        .catch(() => undefined);
      return text === undefined ? undefined : (JSON.parse(text) as { version: string; applied: boolean });
    },
    async nodeVersion() {
      return fs.readFile(path.join(dir, 'node-version'), 'utf8').catch(() => undefined);
    },
  };
}
