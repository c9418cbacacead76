/**
 * The kubeadm backend, for node images that ship kubeadm, kubectl, kubelet and containerd; it runs kubeadm as
 * upstream Constellation does (bootstrapper/internal/kubernetes/k8sapi/k8sutil.go):
 *
 *   init: write our cluster PKI into kubeadm's certificatesDir and sign this node's kubelet serving certificate
 *         with the cluster CA (joining nodes get theirs from the join service) ─ empty the static Pod directory
 *         (a retry after a failed attempt) ─ `kubeadm init phase preflight` ─ `kubeadm init phase certs all`
 *         (kubeadm signs the API server's and etcd's certificates with our CAs) ─ `kubeadm init` skipping those
 *         two phases and the kube-proxy add-on ─ install Cilium (./network-plugin.ts) with `kubectl apply` ─
 *         on cloud nodes the cloud controller manager (./cloud-controller.ts) ─ return the admin.conf kubeadm wrote
 *   join: write the CA files of a control-plane node and the kubelet certificate ─ empty the static Pod
 *         directory ─ `kubeadm join`, then remove the config (it holds the bootstrap token)
 *
 *   upgrade (a control plane, in place; as upstream's upgrade agent, upgrade-agent/internal/server/server.go):
 *         the first control plane runs `kubeadm upgrade apply <version> --yes` (the cluster's ClusterConfiguration,
 *         its own control-plane static Pods and etcd, the add-ons; the certificates kubeadm made in `init phase
 *         certs` are renewed with our CAs, which kubeadm only reads), every other one afterwards `kubeadm upgrade
 *         node` (its static Pods and kubelet configuration to the cluster's new version). Upstream's
 *         --ignore-preflight-errors for CoreDNS and --patches are not passed: kubeadm installs our CoreDNS, and we
 *         keep no patches. kubeadm needs to be of the target version itself (the node image ships it).
 *
 * Its token sink registers each bootstrap token the node's join service issues as the Secret `kubeadm token create`
 * makes (kube-system/bootstrap-token-<id>, type bootstrap.kubernetes.io/token, for kubeadm's default node group,
 * expiring with the token), applied with `kubectl apply --server-side -f <file>` from a 0600 file that is removed
 * afterwards: the token never appears on a command line (which `ps` shows every user). It needs the admin
 * kubeconfig only a control-plane node has.
 * kubeadm's and kubectl's output goes to the log line by line; bootstrap tokens and certificate keys are cut out of
 * it first, and out of arguments and error messages.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import { stringify } from 'yaml';
import type { BootstrapToken, TokenSink } from '../../joinservice/bootstrap-token.js';
import type { Logger } from '../../lib/logging/index.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { systemClock, type Clock } from '../../lib/clock.js';
import { loadClusterPki, pem, signKubeletCertificate } from '../../lib/pki/cluster-pki.js';
import { createKubeletCsr } from '../kubelet-csr.js';
import { spawnExec, type Exec, type ExecResult } from './exec.js';
import {
  checkVersion,
  initConfiguration,
  joinConfiguration,
  KUBELET_CERT_FILE,
  KUBELET_KEY_FILE,
  normalizeVersion,
  parseEndpoint,
} from './kubeadm-config.js';
import { cloudControllerManifestPath, cloudOfProviderId, renderCloudController } from './cloud-controller.js';
import { CILIUM_VERSION, ciliumManifestPath, kernelHasWireGuard, renderCilium } from './network-plugin.js';
import { checkKubernetesUpgrade } from '../../lib/config/versions.js';
import {
  KubernetesBackendError,
  type BackendOptions,
  type ControlPlaneUpgradeParams,
  type InitParams,
  type JoinParams,
  type KubernetesBackend,
  DEFAULT_ADMIN_CONF,
  DEFAULT_PKI_DIR,
} from './types.js';

export { DEFAULT_ADMIN_CONF, DEFAULT_PKI_DIR };

export const DEFAULT_MANIFESTS_DIR = '/etc/kubernetes/manifests';
/** Phases `kubeadm init` skips: run before it (preflight, certs), and kube-proxy, which Cilium replaces. */
export const INIT_SKIP_PHASES = 'preflight,certs,addon/kube-proxy';
const KUBEADM = 'kubeadm';
const KUBECTL = 'kubectl';
const ERROR_TAIL_LINES = 20;
const REDACTED = '[redacted]';
export const KUBEADM_TOKEN_DESCRIPTION = 'constellation join ticket';
/** The group kubeadm's default node bootstrap tokens authenticate as (its RBAC lets them join). */
export const KUBEADM_TOKEN_GROUP = 'system:bootstrappers:kubeadm:default-node-token';

/**
 * The Secret `kubeadm token create` makes for a token (Kubernetes "Authenticating with Bootstrap Tokens"):
 * kube-system/bootstrap-token-<id>, usable for authentication and signing, in kubeadm's default node group,
 * expiring when the join service says the token does.
 */
export function bootstrapTokenSecret(token: BootstrapToken): Record<string, unknown> {
  const [id, secret] = token.token.split('.');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `bootstrap-token-${id}`, namespace: 'kube-system' },
    type: 'bootstrap.kubernetes.io/token',
    stringData: {
      description: KUBEADM_TOKEN_DESCRIPTION,
      'token-id': id,
      'token-secret': secret,
      expiration: token.expiresAt.toISOString().replace(/\.\d{3}Z$/, 'Z'),
      'usage-bootstrap-authentication': 'true',
      'usage-bootstrap-signing': 'true',
      'auth-extra-groups': KUBEADM_TOKEN_GROUP,
    },
  };
}
/** Any bootstrap token kubeadm prints (init prints the one it made), and --certificate-key values. */
const TOKEN_PATTERN = /\b[a-z0-9]{6}\.[a-z0-9]{16}\b/g;
const CERTIFICATE_KEY_PATTERN = /(--certificate-key[= ]+)[0-9a-fA-F]+/g;

export class KubeadmBackend implements KubernetesBackend {
  readonly name = 'kubeadm' as const;
  private readonly exec: Exec;
  private readonly pkiDir: string;
  private readonly adminConfPath: string;
  private readonly env: NodeJS.ProcessEnv;
  private readonly manifestsDir: string;
  private readonly clock: Clock;

  constructor(private readonly options: BackendOptions) {
    this.exec = options.exec ?? spawnExec;
    this.pkiDir = options.pkiDir ?? DEFAULT_PKI_DIR;
    this.adminConfPath = options.adminConfPath ?? DEFAULT_ADMIN_CONF;
    this.env = options.env ?? process.env;
    this.manifestsDir = options.manifestsDir ?? DEFAULT_MANIFESTS_DIR;
    this.clock = options.clock ?? systemClock;
  }

  async init(p: InitParams): Promise<{ kubeconfig: Uint8Array; message: string }> {
    const config = initConfiguration(p, this.pkiDir);
    await this.writePki(p.pkiFiles);
    await this.writeKubeletServingCertificate(p);
    await this.clearStaticPods();
    const configFile = path.join(this.options.workDir, 'kubeadm-init.yaml');
    await writeFileAtomic(configFile, config);
    await this.run('init phase preflight', ['init', 'phase', 'preflight', '--config', configFile], p.log, []);
    await this.run('init phase certs', ['init', 'phase', 'certs', 'all', '--config', configFile], p.log, []);
    await this.run('init', ['init', '--config', configFile, `--skip-phases=${INIT_SKIP_PHASES}`], p.log, []);
    const kubeconfig = await readRegularFile(this.adminConfPath, {
      what: 'the admin kubeconfig',
      maxBytes: SIZE_LIMITS.kubeconfig,
    }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
      throw new KubernetesBackendError(
        `kubeadm init finished but wrote no admin kubeconfig at ${this.adminConfPath}.`,
        {
          hint: "Check the node log for kubeadm's output.",
        },
      );
    });
    const network = await this.installNetworkPlugin(p);
    const cloud = await this.installCloudController(p);
    return {
      kubeconfig: new Uint8Array(kubeconfig),
      message: `Kubernetes ${normalizeVersion(p.kubernetesVersion)} initialized with kubeadm on ${p.nodeName}; API server at https://${p.apiServerEndpoint}; ${network}${cloud}.`,
    };
  }

  async join(p: JoinParams): Promise<{ message: string }> {
    const config = joinConfiguration(p);
    if (p.isControlPlane) await this.writePki(p.controlPlaneFiles);
    // The cluster-wide KubeletConfiguration names these files: the certificate the join service signed.
    if (p.kubeletCert && p.kubeletKey)
      await this.writePki({ [KUBELET_CERT_FILE]: p.kubeletCert, [KUBELET_KEY_FILE]: p.kubeletKey });
    await this.clearStaticPods();
    const configFile = path.join(this.options.workDir, 'kubeadm-join.yaml');
    await writeFileAtomic(configFile, config);
    try {
      await this.run('join', ['join', '--config', configFile], p.log, [p.token]);
    } finally {
      await fs.rm(configFile, { force: true });
    }
    const role = p.isControlPlane ? 'control-plane node' : 'worker';
    return {
      message: `${p.nodeName} joined the Kubernetes cluster at https://${p.apiServerEndpoint} as a ${role} (kubeadm).`,
    };
  }

  async upgradeControlPlane(p: ControlPlaneUpgradeParams): Promise<{ message: string }> {
    const version = checkVersion(p.version);
    checkKubernetesUpgrade(p.from, version);
    if (p.first) await this.run('upgrade apply', ['upgrade', 'apply', version, '--yes'], p.log, []);
    else await this.run('upgrade node', ['upgrade', 'node'], p.log, []);
    const what = p.first
      ? "upgraded the cluster's control plane (kubeadm upgrade apply)"
      : "followed the cluster's upgrade (kubeadm upgrade node)";
    return { message: `${p.nodeName} ${what}: Kubernetes ${normalizeVersion(p.from)} → ${version}.` };
  }

  /**
   * The first control-plane node's kubelet serving certificate, signed with the cluster CA (a joining node gets
   * its own from the join service): the API server verifies kubelets against the CA, so a self-signed one fails.
   */
  private async writeKubeletServingCertificate(p: InitParams): Promise<void> {
    const request = await createKubeletCsr(p.nodeName, p.nodeIp);
    const pki = loadClusterPki(p.pkiFiles);
    const cert = signKubeletCertificate(pki, request.csr, { nodeName: p.nodeName, ips: [p.nodeIp], clock: this.clock });
    await this.writePki({
      [KUBELET_CERT_FILE]: Buffer.from(pem('CERTIFICATE', cert)),
      [KUBELET_KEY_FILE]: Buffer.from(request.privateKeyPem),
    });
  }

  /** kubelet's static Pods of an earlier, failed attempt would make kubeadm refuse (or run stale manifests). */
  private async clearStaticPods(): Promise<void> {
    await fs.rm(this.manifestsDir, { recursive: true, force: true });
    await fs.mkdir(this.manifestsDir, { recursive: true });
  }

  /** Cilium from the shipped manifest, with the cluster's values, applied with the admin kubeconfig. */
  private async installNetworkPlugin(p: InitParams): Promise<string> {
    const wireGuard = await (this.options.hasWireGuard ?? kernelHasWireGuard)();
    const manifest = renderCilium(await fs.readFile(ciliumManifestPath(), 'utf8'), {
      apiServerHost: parseEndpoint(p.apiServerEndpoint).host,
      podCIDR: p.podCIDR ?? '',
      nodeCIDR: p.nodeCIDR,
      wireGuard,
    });
    const file = path.join(this.options.workDir, 'cilium.yaml');
    await writeFileAtomic(file, manifest);
    await this.run(
      'apply',
      ['apply', '--server-side', '--force-conflicts', '--kubeconfig', this.adminConfPath, '-f', file],
      p.log,
      [],
      KUBECTL,
    );
    if (!wireGuard) p.log.warn('this kernel has no WireGuard: Cilium runs without transparent encryption');
    return wireGuard
      ? `network plugin Cilium ${CILIUM_VERSION} with WireGuard encryption`
      : `network plugin Cilium ${CILIUM_VERSION} WITHOUT encryption (this kernel has no WireGuard)`;
  }

  /**
   * On a cloud node (it has a provider id, so its kubelet waits for a cloud controller): the cloud's controller
   * manager from the shipped manifest, applied with the admin kubeconfig. Returns the message's tail.
   */
  private async installCloudController(p: InitParams): Promise<string> {
    if (p.providerId === undefined) return '';
    const cloud = cloudOfProviderId(p.providerId);
    if (!cloud || !this.options.cloudController) {
      throw new KubernetesBackendError(
        `This node has the provider id ${p.providerId}, but no cloud controller manager is known for it: its nodes would keep the taint node.cloudprovider.kubernetes.io/uninitialized.`,
      );
    }
    const values = await this.options.cloudController();
    if (values.cloud !== cloud)
      throw new KubernetesBackendError(
        `The node's platform gives ${values.cloud} cloud controller values, but its provider id ${p.providerId} is of ${cloud}.`,
      );
    const manifest = renderCloudController(
      await fs.readFile(cloudControllerManifestPath(cloud), 'utf8'),
      values,
      p.kubernetesVersion,
    );
    const file = path.join(this.options.workDir, 'cloud-controller-manager.yaml');
    await writeFileAtomic(file, manifest);
    await this.run(
      'apply',
      ['apply', '--server-side', '--force-conflicts', '--kubeconfig', this.adminConfPath, '-f', file],
      p.log,
      [],
      KUBECTL,
    );
    return `; ${cloud} cloud controller manager`;
  }

  tokenSink(log: Logger): TokenSink {
    return { register: (token) => this.registerToken(token, log) };
  }

  private async registerToken(token: BootstrapToken, log: Logger): Promise<void> {
    await fs.access(this.adminConfPath).catch((err: NodeJS.ErrnoException) => {
      const what =
        err.code === 'ENOENT'
          ? 'has no admin kubeconfig'
          : `cannot read its admin kubeconfig (${err.code ?? err.message})`;
      throw new KubernetesBackendError(
        `This node ${what} at ${this.adminConfPath}, so it cannot register the bootstrap token with the API server.`,
        {
          hint: 'Only a control-plane node that initialized the cluster or joined it as a control-plane node has one (kubeadm writes it); a joining node retries.',
        },
      );
    });
    await fs.mkdir(this.options.workDir, { recursive: true, mode: 0o700 });
    const file = path.join(this.options.workDir, `bootstrap-token-${token.id}.yaml`);
    await writeFileAtomic(file, stringify(bootstrapTokenSecret(token)), { mode: 0o600 });
    try {
      await this.run(
        'bootstrap token',
        ['apply', '--server-side', '--force-conflicts', '--kubeconfig', this.adminConfPath, '-f', file],
        log,
        [token.token],
        KUBECTL,
      );
    } finally {
      await fs.rm(file, { force: true });
    }
    // The token id is public (kubeadm names the token's Secret after it); the log's redaction would hide a "tokenId" field.
    log.info(`bootstrap token ${token.id} registered with the API server`, {
      expiresAt: token.expiresAt.toISOString(),
    });
  }

  /** Files by kubeadm's names relative to the PKI directory: private keys 0600, the rest 0644. */
  private async writePki(files: Record<string, Uint8Array>): Promise<void> {
    for (const [name, data] of Object.entries(files)) {
      const normalized = path.posix.normalize(name);
      if (path.isAbsolute(name) || normalized.startsWith('..') || normalized !== name) {
        throw new KubernetesBackendError(`"${name}" is not a file name inside the PKI directory.`);
      }
      await writeFileAtomic(path.join(this.pkiDir, name), data, { mode: name.endsWith('.key') ? 0o600 : 0o644 });
    }
  }

  private async run(step: string, args: string[], log: Logger, secrets: string[], program = KUBEADM): Promise<void> {
    const clean = (text: string) => redactOutput(text, secrets);
    log.info(`running ${program} ${step}`, { args: args.map(clean) });
    let result: ExecResult;
    try {
      result = await this.exec(program, args, {
        env: this.env,
        onLine: (stream, line) => log.info(program, { stream, line: clean(line) }),
      });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new KubernetesBackendError(`${program} was not found on PATH.`, {
          hint: 'The kubeadm backend runs on node images that ship kubeadm, kubectl, kubelet and containerd; local process nodes use the backend none.',
        });
      }
      throw err;
    }
    if (result.exitCode !== 0) {
      const how =
        result.exitCode === null ? `was ended by ${result.signal}` : `failed with exit code ${result.exitCode}`;
      throw new KubernetesBackendError(`${program} ${step} ${how}:\n${clean(tail(result.stderr || result.stdout))}`, {
        hint: 'The full output is in the node log.',
      });
    }
  }
}

/** kubeadm output without bootstrap tokens, certificate keys or the given secrets. */
export function redactOutput(text: string, secrets: string[]): string {
  let out = text;
  for (const secret of secrets) {
    // The token, and its secret half alone (kubeadm prints token ids and secrets separately at times).
    for (const part of [secret, secret.split('.')[1]]) if (part) out = out.split(part).join(REDACTED);
  }
  return out.replace(TOKEN_PATTERN, REDACTED).replace(CERTIFICATE_KEY_PATTERN, `$1${REDACTED}`);
}

function tail(text: string): string {
  return text.trimEnd().split('\n').slice(-ERROR_TAIL_LINES).join('\n');
}
