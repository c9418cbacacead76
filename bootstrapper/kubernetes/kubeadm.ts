/**
 * The kubeadm backend, for node images that ship kubeadm, kubelet and containerd. init writes our cluster PKI into
 * kubeadm's certificatesDir (kubeadm then signs the API server's and etcd's own certificates with those CAs), runs
 * `kubeadm init --config <file> --skip-phases=preflight` and returns the admin.conf kubeadm wrote. join writes the
 * CA files of a control-plane node and the kubelet certificate, runs `kubeadm join --config <file>` and removes the
 * config afterwards (it holds the bootstrap token). Its token sink registers each bootstrap token the node's join
 * service issues with `kubeadm token create <token> --ttl 15m0s --kubeconfig <admin.conf>`, which needs the admin
 * kubeconfig only a control-plane node has. kubeadm's output goes to the log line by line; bootstrap tokens and
 * certificate keys are cut out of it first, and out of arguments and error messages.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { TOKEN_TTL_MS, type BootstrapToken, type TokenSink } from '../../joinservice/bootstrap-token.js';
import type { Logger } from '../../lib/logging/index.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { spawnExec, type Exec, type ExecResult } from './exec.js';
import { initConfiguration, joinConfiguration, normalizeVersion } from './kubeadm-config.js';
import { KubernetesBackendError, type BackendOptions, type InitParams, type JoinParams, type KubernetesBackend } from './types.js';

export const DEFAULT_PKI_DIR = '/etc/kubernetes/pki';
export const DEFAULT_ADMIN_CONF = '/etc/kubernetes/admin.conf';
const KUBEADM = 'kubeadm';
const ERROR_TAIL_LINES = 20;
const REDACTED = '[redacted]';
/** kubeadm's --ttl as a Go duration ("15m0s"): the lifetime the join service gives every token. */
export const KUBEADM_TOKEN_TTL = `${Math.floor(TOKEN_TTL_MS / 60_000)}m${(TOKEN_TTL_MS % 60_000) / 1000}s`;
export const KUBEADM_TOKEN_DESCRIPTION = 'constellation join ticket';
/** Any bootstrap token kubeadm prints (init prints the one it made), and --certificate-key values. */
const TOKEN_PATTERN = /\b[a-z0-9]{6}\.[a-z0-9]{16}\b/g;
const CERTIFICATE_KEY_PATTERN = /(--certificate-key[= ]+)[0-9a-fA-F]+/g;

export class KubeadmBackend implements KubernetesBackend {
  readonly name = 'kubeadm' as const;
  private readonly exec: Exec;
  private readonly pkiDir: string;
  private readonly adminConfPath: string;
  private readonly env: NodeJS.ProcessEnv;

  constructor(private readonly options: BackendOptions) {
    this.exec = options.exec ?? spawnExec;
    this.pkiDir = options.pkiDir ?? DEFAULT_PKI_DIR;
    this.adminConfPath = options.adminConfPath ?? DEFAULT_ADMIN_CONF;
    this.env = options.env ?? process.env;
  }

  async init(p: InitParams): Promise<{ kubeconfig: Uint8Array; message: string }> {
    const config = initConfiguration(p, this.pkiDir);
    await this.writePki(p.pkiFiles);
    const configFile = path.join(this.options.workDir, 'kubeadm-init.yaml');
    await writeFileAtomic(configFile, config);
    await this.run('init', ['init', '--config', configFile, '--skip-phases=preflight'], p.log, []);
    const kubeconfig = await fs.readFile(this.adminConfPath).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
      throw new KubernetesBackendError(`kubeadm init finished but wrote no admin kubeconfig at ${this.adminConfPath}.`, {
        hint: 'Check the node log for kubeadm\'s output.',
      });
    });
    return {
      kubeconfig: new Uint8Array(kubeconfig),
      message: `Kubernetes ${normalizeVersion(p.kubernetesVersion)} initialized with kubeadm on ${p.nodeName}; API server at https://${p.apiServerEndpoint}.`,
    };
  }

  async join(p: JoinParams): Promise<{ message: string }> {
    const kubelet = p.kubeletCert && p.kubeletKey
      ? { certFile: path.join(this.pkiDir, 'kubelet.crt'), keyFile: path.join(this.pkiDir, 'kubelet.key') }
      : undefined;
    const config = joinConfiguration(p, kubelet);
    if (p.isControlPlane) await this.writePki(p.controlPlaneFiles);
    if (kubelet) await this.writePki({ 'kubelet.crt': p.kubeletCert!, 'kubelet.key': p.kubeletKey! });
    const configFile = path.join(this.options.workDir, 'kubeadm-join.yaml');
    await writeFileAtomic(configFile, config);
    try {
      await this.run('join', ['join', '--config', configFile], p.log, [p.token]);
    } finally {
      await fs.rm(configFile, { force: true });
    }
    const role = p.isControlPlane ? 'control-plane node' : 'worker';
    return { message: `${p.nodeName} joined the Kubernetes cluster at https://${p.apiServerEndpoint} as a ${role} (kubeadm).` };
  }

  tokenSink(log: Logger): TokenSink {
    return { register: (token) => this.registerToken(token, log) };
  }

  private async registerToken(token: BootstrapToken, log: Logger): Promise<void> {
    await fs.access(this.adminConfPath).catch((err: NodeJS.ErrnoException) => {
      const what = err.code === 'ENOENT' ? 'has no admin kubeconfig' : `cannot read its admin kubeconfig (${err.code ?? err.message})`;
      throw new KubernetesBackendError(
        `This node ${what} at ${this.adminConfPath}, so it cannot register the bootstrap token with the API server.`,
        { hint: 'Only a control-plane node that initialized the cluster or joined it as a control-plane node has one (kubeadm writes it); a joining node retries.' },
      );
    });
    const args = ['token', 'create', token.token, '--ttl', KUBEADM_TOKEN_TTL, '--description', KUBEADM_TOKEN_DESCRIPTION, '--kubeconfig', this.adminConfPath];
    await this.run('token create', args, log, [token.token]);
    // The token id is public (kubeadm names the token's Secret after it); the log's redaction would hide a "tokenId" field.
    log.info(`bootstrap token ${token.id} registered with the API server`, { expiresAt: token.expiresAt.toISOString() });
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

  private async run(step: 'init' | 'join' | 'token create', args: string[], log: Logger, secrets: string[]): Promise<void> {
    const clean = (text: string) => redactOutput(text, secrets);
    log.info(`running kubeadm ${step}`, { args: args.map(clean) });
    let result: ExecResult;
    try {
      result = await this.exec(KUBEADM, args, {
        env: this.env,
        onLine: (stream, line) => log.info('kubeadm', { stream, line: clean(line) }),
      });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new KubernetesBackendError('kubeadm was not found on PATH.', {
          hint: 'The kubeadm backend runs on node images that ship kubeadm, kubelet and containerd; local process nodes use the backend none.',
        });
      }
      throw err;
    }
    if (result.exitCode !== 0) {
      const how = result.exitCode === null ? `was ended by ${result.signal}` : `failed with exit code ${result.exitCode}`;
      throw new KubernetesBackendError(`kubeadm ${step} ${how}:\n${clean(tail(result.stderr || result.stdout))}`, {
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
