/**
 * The sshd configuration of a node's emergency SSH server (docs/workflows/emergency-ssh.md), as upstream's
 * image/sysroot-tree/etc/ssh/sshd_config: the node's own host key and its host certificate, `TrustedUserCAKeys` = the cluster's emergency
 * SSH CA (./certificate.ts; the file the node writes at init or join), and nothing else lets anyone in: no
 * passwords, no keyboard-interactive, no authorized_keys files, no host-based login. Only a certificate signed by
 * that CA, for a listed principal, within its validity, opens a session.
 *
 * A node gets the CA's public key when it enters the cluster: the first control plane derives it from the master
 * secret at init, every other node receives it in its join ticket; both write it to NODE_SSH_CA_FILE on the state
 * disk, where a rebooted node finds it again.
 */

/** Where a node keeps the CA's public key, below its state disk's mount (upstream: /var/run/state/ssh/ssh_ca.pub). */
export const NODE_SSH_CA_FILE = 'ssh/ssh_ca.pub';
/** The file a node image carries when it ships sshd (its content: the sshd binary's path; lib/node-image/build/). */
export const EMERGENCY_SSH_MARKER = '/etc/constellation/emergency-ssh';
/** The node's host key (./host-key.ts) and its host certificate from the CA, below the state disk's mount. */
export const NODE_SSH_HOST_KEY_FILE = 'ssh/ssh_host_ed25519_key';
export const NODE_SSH_HOST_CERT_FILE = 'ssh/ssh_host_ed25519_key-cert.pub';

export interface SshdConfigOptions {
  /** The node's SSH host private key. */
  hostKeyFile: string;
  /** The host key's certificate from the CA (HostCertificate), so clients that trust the CA need no prompt. */
  hostCertificateFile?: string;
  /** The CA public key line the node received (TrustedUserCAKeys). */
  trustedUserCaKeysFile: string;
  listenAddress?: string;
  port?: number;
  /** sshd's PID file ('none': no file). */
  pidFile?: string;
}

export function sshdConfig(options: SshdConfigOptions): string {
  const lines = [
    "# Emergency SSH access: only certificates signed by the cluster's SSH CA (constellation ssh).",
    ...(options.listenAddress ? [`ListenAddress ${options.listenAddress}`] : []),
    ...(options.port ? [`Port ${options.port}`] : []),
    `HostKey ${options.hostKeyFile}`,
    ...(options.hostCertificateFile ? [`HostCertificate ${options.hostCertificateFile}`] : []),
    `TrustedUserCAKeys ${options.trustedUserCaKeysFile}`,
    'PubkeyAuthentication yes',
    'AuthorizedKeysFile none',
    'AuthorizedPrincipalsFile none',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'HostbasedAuthentication no',
    'PermitEmptyPasswords no',
    'PermitRootLogin prohibit-password',
    'UsePAM no',
    `PidFile ${options.pidFile ?? 'none'}`,
  ];
  return `${lines.join('\n')}\n`;
}
