/**
 * Kubernetes backends of the bootstrapper behind one interface (docs/design.md#kubernetes-backends): `none` for local process nodes,
 * `kubeadm` for node images that ship kubeadm. What each does: docs/kubernetes-backends.md.
 */
import { KubeadmBackend } from './kubeadm.js';
import { NoneBackend } from './none.js';
import { BACKEND_NAMES, KubernetesBackendError, type BackendOptions, type KubernetesBackend } from './types.js';

export * from './types.js';
export type { Exec, ExecOptions, ExecResult, OutputStream } from './exec.js';
export { spawnExec } from './exec.js';
export { NOT_RUN_NOTICE } from './none.js';

/** The backend called `name` ("none" or "kubeadm"; a name from configuration is checked here). */
export function createBackend(name: string, options: BackendOptions): KubernetesBackend {
  switch (name) {
    case 'none':
      return new NoneBackend(options);
    case 'kubeadm':
      return new KubeadmBackend(options);
    default:
      throw new KubernetesBackendError(`There is no Kubernetes backend "${name}".`, {
        hint: `Use one of: ${BACKEND_NAMES.join(', ')}.`,
      });
  }
}
