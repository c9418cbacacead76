/**
 * The backend "none", for local process nodes: Kubernetes is not run. The cluster still does everything else in
 * the design (attestation, the join service, state disks, PCR 15); this backend says so plainly instead of
 * pretending, returns the admin kubeconfig lib/pki made (its server is never answered), records in its work
 * directory what init, join and an in-place upgrade received, without secrets, so operators and tests can see it, and keeps the
 * bootstrap tokens the join service issues in memory (there is no API server to register them with).
 */
import path from 'node:path';
import { MemoryTokenSink } from '../../joinservice/bootstrap-token.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { checkKubernetesUpgrade } from '../../lib/config/versions.js';
import type { BackendOptions, ControlPlaneUpgradeParams, InitParams, JoinParams, KubernetesBackend } from './types.js';

export const NOT_RUN_NOTICE =
  'Kubernetes does not run on this cluster (backend none): the cluster runs attestation, the join service and the state disks, but no API server';

export class NoneBackend implements KubernetesBackend {
  readonly name = 'none' as const;
  /** The tokens issued by this node's join service (one sink for the life of the backend). */
  private readonly tokens = new MemoryTokenSink();

  constructor(private readonly options: Pick<BackendOptions, 'workDir'>) {}

  tokenSink(): MemoryTokenSink {
    return this.tokens;
  }

  async init(p: InitParams): Promise<{ kubeconfig: Uint8Array; message: string }> {
    await this.record('init', {
      nodeName: p.nodeName,
      nodeIp: p.nodeIp,
      clusterName: p.clusterName,
      kubernetesVersion: p.kubernetesVersion,
      apiServerEndpoint: p.apiServerEndpoint,
      certSANs: p.certSANs,
      serviceCIDR: p.serviceCIDR,
      podCIDR: p.podCIDR,
      pkiFiles: Object.keys(p.pkiFiles).sort(),
    });
    const message = `${NOT_RUN_NOTICE}.`;
    p.log.info(message, { backend: this.name });
    return { kubeconfig: p.adminKubeconfig, message };
  }

  async join(p: JoinParams): Promise<{ message: string }> {
    const role = p.isControlPlane ? 'control-plane node' : 'worker';
    await this.record('join', {
      nodeName: p.nodeName,
      nodeIp: p.nodeIp,
      role,
      kubernetesVersion: p.kubernetesVersion,
      apiServerEndpoint: p.apiServerEndpoint,
      discoveryTokenCaCertHash: p.discoveryTokenCaCertHash,
      kubeletCertificate: p.kubeletCert !== undefined,
      controlPlaneFiles: Object.keys(p.controlPlaneFiles).sort(),
    });
    const message = `${NOT_RUN_NOTICE}: ${p.nodeName} joined the cluster as a ${role}, but no kubelet runs on it.`;
    p.log.info(message, { backend: this.name });
    return { message };
  }

  /** Checks the step as kubeadm would and records the version: there is nothing to run. */
  async upgradeControlPlane(p: ControlPlaneUpgradeParams): Promise<{ message: string }> {
    checkKubernetesUpgrade(p.from, p.version);
    await this.record('upgrade', { nodeName: p.nodeName, from: p.from, version: p.version, first: p.first });
    const message = `${NOT_RUN_NOTICE}: ${p.nodeName} now counts as running Kubernetes ${p.version} (was ${p.from}); there is no kubeadm upgrade to run.`;
    p.log.info(message, { backend: this.name });
    return { message };
  }

  /** <workDir>/kubernetes-none-<step>.json: names and public values only (no token, keys or file contents). */
  private record(step: 'init' | 'join' | 'upgrade', received: Record<string, unknown>): Promise<void> {
    const file = path.join(this.options.workDir, `kubernetes-none-${step}.json`);
    return writeFileAtomic(file, `${JSON.stringify({ backend: this.name, step, received }, null, 2)}\n`);
  }
}
