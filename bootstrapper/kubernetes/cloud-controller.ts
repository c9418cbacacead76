/**
 * The cloud controller manager the kubeadm backend installs on a cloud cluster after Cilium (docs/kubernetes-backends.md).
 * Cloud nodes' kubelets run with cloud-provider=external (./kubeadm-config.ts), so every node registers with the
 * taint node.cloudprovider.kubernetes.io/uninitialized and no workload Pod is scheduled until a cloud controller
 * initializes it (sets its provider id, addresses and zone labels, then removes the taint). Upstream Constellation
 * installs one per cloud from its charts `ccm` and `cnm` (internal/constellation/helm); the manifests here are
 * rendered from those charts at edgelesssys/constellation@7cb5b83 and shipped with the package
 * (manifests/cloud-controller-manager/<cloud>.yaml, scripts/render-cloud-controllers.mjs names every change).
 *
 *   aws    the AWS cloud controller manager, credentials from the control plane's instance profile
 *   gcp    the GCE cloud controller manager, gce.conf (project, the nodes' network tag); it authenticates as the VM's
 *          service account through the metadata server, so no key goes into the cluster
 *   azure  the Azure cloud controller manager with azure.json (a Secret: subscription, resource group, location,
 *          network security group; the VM's managed identity) and the cloud-node-manager DaemonSet, which
 *          initializes the nodes (the CCM runs without its cloud-node controller, as upstream)
 *
 * The images are pinned by digest per Kubernetes minor version (upstream's internal/versions/versions.go). Pure
 * rendering: ./kubeadm.ts applies the result with kubectl.
 */
import path from 'node:path';
import { packageRoot } from '../../lib/config/package-info.js';
import type { CloudControllerValues } from '../../providers/contract.js';
import { KubernetesBackendError } from './types.js';

export type CloudName = CloudControllerValues['cloud'];

/** The placeholders scripts/render-cloud-controllers.mjs renders the charts with. */
export const CCM_PLACEHOLDERS = {
  image: 'constellation-ccm-image.invalid',
  cnmImage: 'constellation-cnm-image.invalid',
  azureConfig: 'constellation-azure-config.invalid',
  gcpProject: 'constellation-gcp-project.invalid',
  gcpNodeTag: 'constellation-gcp-node-tag.invalid',
} as const;

interface CloudImages {
  ccm: string;
  /** Azure's cloud-node-manager. */
  cnm?: string;
}

/**
 * Upstream's pins for Kubernetes 1.31 and 1.32. Kubernetes 1.33 runs 1.32's: the version-skew policy lets the
 * cloud-controller-manager be one minor version older than the API server, and upstream pins none for 1.33.
 * The CCM projects have released 1.33 images (provider-aws v1.33.x on registry.k8s.io, the Azure cloud-controller-
 * manager and cloud-node-manager v1.33.x on mcr.microsoft.com; GCP's is upstream's own build, v30.1.4 for every
 * minor), but their digests were not established: this build was made without access to the registries, and an
 * image is pinned here only by a digest read from the registry or from upstream's versions file, never a guessed one.
 * Pinning them is left to a run with the registries at hand (`crane digest <image>:<tag>`).
 */
const V1_31: Record<CloudName, CloudImages> = {
  aws: {
    ccm: 'registry.k8s.io/provider-aws/cloud-controller-manager:v1.31.8@sha256:f846203ea9e0f510176b08c1c0406ffec03498c610d66442953b7823ca99622f',
  },
  azure: {
    ccm: 'mcr.microsoft.com/oss/kubernetes/azure-cloud-controller-manager:v1.31.9@sha256:5842bc4bb651e5931717953ee3e4851083c4db1185d1cbf61eb538da21bfbf15',
    cnm: 'mcr.microsoft.com/oss/kubernetes/azure-cloud-node-manager:v1.31.9@sha256:77641062e704a709f73d484ad50dde2cbf408491e1d3ec0f5b750eb7dd1e5df7',
  },
  gcp: {
    ccm: 'ghcr.io/edgelesssys/cloud-provider-gcp:v30.1.4@sha256:0c3695a18d3825492196facb092e5fe56e466fa8517cde5a206fe21630c1da13',
  },
};
const V1_32: Record<CloudName, CloudImages> = {
  aws: {
    ccm: 'registry.k8s.io/provider-aws/cloud-controller-manager:v1.32.5@sha256:542aa2b272f931fc5b0bf260866eea1135aee33ba6b84bfa4564adda35bf1732',
  },
  azure: {
    ccm: 'mcr.microsoft.com/oss/kubernetes/azure-cloud-controller-manager:v1.32.8@sha256:d44a8e0e7e347343d2bd8d04acbf874f22f47483ac988646129d70bc1e82a107',
    cnm: 'mcr.microsoft.com/oss/kubernetes/azure-cloud-node-manager:v1.32.8@sha256:87cbaa3239ce627b3e3adea1d4faaf41eadaef770831eff1ea49fc8efdf3e5c8',
  },
  gcp: {
    ccm: 'ghcr.io/edgelesssys/cloud-provider-gcp:v30.1.4@sha256:0c3695a18d3825492196facb092e5fe56e466fa8517cde5a206fe21630c1da13',
  },
};
export const CCM_IMAGES: Record<string, Record<CloudName, CloudImages>> = {
  '1.31': V1_31,
  '1.32': V1_32,
  '1.33': V1_32,
};

export function cloudControllerManifestPath(cloud: CloudName): string {
  return path.join(packageRoot(), 'manifests', 'cloud-controller-manager', `${cloud}.yaml`);
}

/** The cloud of a kubelet provider id (aws:///zone/i-…, gce://project/zone/name, azure:///subscriptions/…). */
export function cloudOfProviderId(providerId: string): CloudName | undefined {
  const scheme = /^([a-z]+):\/\//.exec(providerId)?.[1];
  return scheme === 'aws' ? 'aws' : scheme === 'gce' ? 'gcp' : scheme === 'azure' ? 'azure' : undefined;
}

/** Azure's azure.json for the CCM (upstream's getCCMConfig), authenticating as the VM's managed identity. */
export function azureCloudConfig(v: Extract<CloudControllerValues, { cloud: 'azure' }>): string {
  return JSON.stringify({
    cloud: 'AzurePublicCloud',
    subscriptionId: v.subscriptionId,
    resourceGroup: v.resourceGroup,
    location: v.location,
    securityGroupName: v.securityGroupName,
    loadBalancerSku: 'standard',
    loadBalancerName: 'kubernetes-lb',
    useInstanceMetadata: true,
    vmType: 'vmss',
    useManagedIdentityExtension: true,
  });
}

/** The shipped manifest of the cloud with the cluster's values and the images pinned for its Kubernetes version. */
export function renderCloudController(
  template: string,
  values: CloudControllerValues,
  kubernetesVersion: string,
): string {
  const minor = /^v?(\d+\.\d+)\./.exec(kubernetesVersion)?.[1];
  const images = minor ? CCM_IMAGES[minor]?.[values.cloud] : undefined;
  if (!images) {
    throw new KubernetesBackendError(
      `No cloud controller manager is pinned for Kubernetes ${kubernetesVersion} on ${values.cloud}.`,
      {
        hint: `Use a Kubernetes version with a pinned cloud controller manager: ${Object.keys(CCM_IMAGES)
          .map((m) => `v${m}`)
          .join(', ')}.`,
      },
    );
  }
  const replace = (text: string, placeholder: string, value: string) => {
    if (!text.includes(placeholder))
      throw new KubernetesBackendError(
        `The ${values.cloud} cloud controller manifest has no placeholder ${placeholder}: it was not rendered by scripts/render-cloud-controllers.mjs.`,
      );
    return text.replaceAll(placeholder, value);
  };
  let out = replace(template, CCM_PLACEHOLDERS.image, images.ccm);
  switch (values.cloud) {
    case 'aws':
      break;
    case 'gcp':
      out = replace(
        replace(out, CCM_PLACEHOLDERS.gcpProject, values.projectId),
        CCM_PLACEHOLDERS.gcpNodeTag,
        values.nodeTag,
      );
      break;
    case 'azure': {
      const b64 = (s: string) => Buffer.from(s).toString('base64');
      out = replace(
        replace(out, CCM_PLACEHOLDERS.cnmImage, images.cnm!),
        b64(CCM_PLACEHOLDERS.azureConfig),
        b64(azureCloudConfig(values)),
      );
      break;
    }
  }
  if (out.split('\n').some((line) => !line.trimStart().startsWith('#') && line.includes('.invalid')))
    throw new KubernetesBackendError(
      `The ${values.cloud} cloud controller manifest keeps a placeholder the bootstrapper does not fill.`,
    );
  return out;
}
