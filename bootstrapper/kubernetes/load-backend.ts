/**
 * The node program's way to its Kubernetes backend (docs/kubernetes-backends.md): it loads only the code of the
 * backend the node runs. Every local node runs `none`, so it never loads kubeadm's, whose `yaml` package (for the
 * configs it writes) would be a sixth of what the node program parses at start-up, and far more under emulation in
 * a VM. ./backend.ts (createBackend) has both backends at hand, for tests and tools.
 */
import { NoneBackend } from './none.js';
import { BACKEND_NAMES, KubernetesBackendError, type BackendOptions, type KubernetesBackend } from './types.js';

/** The backend called `name` ("none" or "kubeadm"; a name from configuration is checked here). */
export async function loadBackend(name: string, options: BackendOptions): Promise<KubernetesBackend> {
  switch (name) {
    case 'none':
      return new NoneBackend(options);
    case 'kubeadm':
      return new (await import('./kubeadm.js')).KubeadmBackend(options);
    default:
      throw new KubernetesBackendError(`There is no Kubernetes backend "${name}".`, {
        hint: `Use one of: ${BACKEND_NAMES.join(', ')}.`,
      });
  }
}
