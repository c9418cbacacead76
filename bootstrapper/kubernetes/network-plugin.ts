/**
 * The network plugin the kubeadm backend installs after `kubeadm init`: Cilium, as upstream Constellation runs it
 * (kube-proxy replaced, so kubeadm's kube-proxy add-on is skipped; WireGuard transparent encryption of
 * node-to-node and pod traffic with strict mode). The manifest is rendered from upstream's Cilium chart, pinned
 * (image digests) and shipped with the package (manifests/cilium/, scripts/render-cilium.sh); placeholders for the
 * cluster's values are replaced here: the API server's host (Cilium talks to it without kube-proxy), the pod and
 * node networks. A kernel without WireGuard gets Cilium without encryption, and the init message says so.
 */
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../lib/config/package-info.js';
import { KubernetesBackendError } from './types.js';

export const CILIUM_VERSION = '1.15.19-edg.0';
/** The placeholders manifests/cilium/values.yaml renders with (documentation ranges and a reserved name). */
export const PLACEHOLDERS = {
  apiServerHost: 'constellation-api-server.invalid',
  podCIDR: '192.0.2.0/24',
  nodeCIDR: '198.51.100.0/24',
} as const;
const WIREGUARD_SETTINGS = ['enable-wireguard', 'encrypt-node', 'enable-encryption-strict-mode'];

export function ciliumManifestPath(): string {
  return path.join(packageRoot(), 'manifests', 'cilium', 'cilium.yaml');
}

export interface CiliumValues {
  apiServerHost: string;
  podCIDR: string;
  /** Unknown: strict mode covers the pods only, and the nodes' traffic is masqueraded everywhere. */
  nodeCIDR?: string;
  wireGuard: boolean;
}

/** The shipped manifest with the cluster's values. */
export function renderCilium(template: string, v: CiliumValues): string {
  for (const placeholder of Object.values(PLACEHOLDERS)) {
    if (!template.includes(placeholder))
      throw new KubernetesBackendError(
        `The Cilium manifest has no placeholder ${placeholder}: it was not rendered from manifests/cilium/values.yaml.`,
      );
  }
  let out = template
    .replaceAll(PLACEHOLDERS.apiServerHost, v.apiServerHost)
    .replaceAll(PLACEHOLDERS.podCIDR, v.podCIDR)
    .replaceAll(`["${PLACEHOLDERS.nodeCIDR}"]`, v.nodeCIDR ? `["${v.nodeCIDR}"]` : '[]')
    .replaceAll(PLACEHOLDERS.nodeCIDR, v.nodeCIDR ?? '');
  if (!v.wireGuard) {
    for (const key of WIREGUARD_SETTINGS) {
      const on = `\n  ${key}: "true"\n`;
      if (!out.includes(on)) throw new KubernetesBackendError(`The Cilium manifest does not set ${key}.`);
      out = out.replace(on, `\n  ${key}: "false"\n`);
    }
  }
  return out;
}

/** Whether the kernel has WireGuard: loaded, built in, or a module it can load (Cilium creates the device). */
export async function kernelHasWireGuard(root = '/'): Promise<boolean> {
  if (existsSync(path.join(root, 'sys/module/wireguard'))) return true;
  const modules = path.join(root, 'lib/modules', os.release());
  for (const list of ['modules.builtin', 'modules.dep']) {
    const text = await fs.readFile(path.join(modules, list), 'utf8').catch(() => '');
    if (/(^|\/)wireguard\.ko/m.test(text)) return true;
  }
  return false;
}
