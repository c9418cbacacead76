/**
 * Strict schemas (zod) of the kubeadm v1beta4 and kubelet v1beta1 configuration types, as far as the kubeadm
 * backend's generated files use them, written from the official API references
 * (https://kubernetes.io/docs/reference/config-api/kubeadm-config.v1beta4/ and
 * https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/): every field these types have is
 * listed with its type, so a misspelled or invented field name fails the parse, as kubeadm's strict decoding does.
 */
import { z } from 'zod';

const arg = z.strictObject({ name: z.string().min(1), value: z.string() });
const args = z.array(arg);
const apiEndpoint = z.strictObject({ advertiseAddress: z.string().optional(), bindPort: z.number().int().optional() });
const taint = z.strictObject({
  key: z.string(),
  value: z.string().optional(),
  effect: z.string(),
  timeAdded: z.string().optional(),
});
const nodeRegistration = z.strictObject({
  name: z.string().optional(),
  criSocket: z.string().optional(),
  taints: z.array(taint).optional(),
  kubeletExtraArgs: args.optional(),
  ignorePreflightErrors: z.array(z.string()).optional(),
  imagePullPolicy: z.enum(['Always', 'IfNotPresent', 'Never']).optional(),
  imagePullSerial: z.boolean().optional(),
});
const patches = z.strictObject({ directory: z.string().optional() });
const timeouts = z.strictObject({
  controlPlaneComponentHealthCheck: z.string().optional(),
  kubeletHealthCheck: z.string().optional(),
  kubernetesAPICall: z.string().optional(),
  etcdAPICall: z.string().optional(),
  tlsBootstrap: z.string().optional(),
  discovery: z.string().optional(),
  upgradeManifests: z.string().optional(),
});
const hostPathMount = z.strictObject({
  name: z.string(),
  hostPath: z.string(),
  mountPath: z.string(),
  readOnly: z.boolean().optional(),
  pathType: z.string().optional(),
});
const envVar = z.strictObject({ name: z.string(), value: z.string().optional(), valueFrom: z.unknown().optional() });
const controlPlaneComponent = z.strictObject({
  extraArgs: args.optional(),
  extraVolumes: z.array(hostPathMount).optional(),
  extraEnvs: z.array(envVar).optional(),
});
const apiServer = z.strictObject({
  extraArgs: args.optional(),
  extraVolumes: z.array(hostPathMount).optional(),
  extraEnvs: z.array(envVar).optional(),
  certSANs: z.array(z.string().min(1)).optional(),
});
const typeMeta = <K extends string>(apiVersion: string, kind: K) => ({
  apiVersion: z.literal(apiVersion),
  kind: z.literal(kind),
});

export const initConfigurationSchema = z.strictObject({
  ...typeMeta('kubeadm.k8s.io/v1beta4', 'InitConfiguration'),
  bootstrapTokens: z.array(z.unknown()).optional(),
  dryRun: z.boolean().optional(),
  nodeRegistration: nodeRegistration.optional(),
  localAPIEndpoint: apiEndpoint.optional(),
  certificateKey: z.string().optional(),
  skipPhases: z.array(z.string()).optional(),
  patches: patches.optional(),
  timeouts: timeouts.optional(),
});

export const clusterConfigurationSchema = z.strictObject({
  ...typeMeta('kubeadm.k8s.io/v1beta4', 'ClusterConfiguration'),
  etcd: z.unknown().optional(),
  networking: z
    .strictObject({
      serviceSubnet: z.string().optional(),
      podSubnet: z.string().optional(),
      dnsDomain: z.string().optional(),
    })
    .optional(),
  kubernetesVersion: z
    .string()
    .regex(/^v\d+\.\d+\.\d+/)
    .optional(),
  controlPlaneEndpoint: z.string().optional(),
  apiServer: apiServer.optional(),
  controllerManager: controlPlaneComponent.optional(),
  scheduler: controlPlaneComponent.optional(),
  dns: z
    .strictObject({
      disabled: z.boolean().optional(),
      imageRepository: z.string().optional(),
      imageTag: z.string().optional(),
    })
    .optional(),
  proxy: z.strictObject({ disabled: z.boolean().optional() }).optional(),
  certificatesDir: z.string().optional(),
  imageRepository: z.string().optional(),
  featureGates: z.record(z.string(), z.boolean()).optional(),
  clusterName: z.string().optional(),
  encryptionAlgorithm: z.enum(['ECDSA-P256', 'ECDSA-P384', 'RSA-2048', 'RSA-3072', 'RSA-4096']).optional(),
  certificateValidityPeriod: z.string().optional(),
  caCertificateValidityPeriod: z.string().optional(),
});

export const joinConfigurationSchema = z.strictObject({
  ...typeMeta('kubeadm.k8s.io/v1beta4', 'JoinConfiguration'),
  dryRun: z.boolean().optional(),
  nodeRegistration: nodeRegistration.optional(),
  caCertPath: z.string().optional(),
  discovery: z.strictObject({
    bootstrapToken: z
      .strictObject({
        token: z.string(),
        apiServerEndpoint: z.string().optional(),
        caCertHashes: z.array(z.string()).optional(),
        unsafeSkipCAVerification: z.boolean().optional(),
      })
      .optional(),
    file: z.strictObject({ kubeConfigPath: z.string() }).optional(),
    tlsBootstrapToken: z.string().optional(),
  }),
  controlPlane: z
    .strictObject({ localAPIEndpoint: apiEndpoint.optional(), certificateKey: z.string().optional() })
    .optional(),
  skipPhases: z.array(z.string()).optional(),
  patches: patches.optional(),
  timeouts: timeouts.optional(),
});

/** The KubeletConfiguration fields the backend sets (the type has many more; a field outside this list fails too). */
export const kubeletConfigurationSchema = z.strictObject({
  ...typeMeta('kubelet.config.k8s.io/v1beta1', 'KubeletConfiguration'),
  tlsCertFile: z.string(),
  tlsPrivateKeyFile: z.string(),
  staticPodPath: z.string().optional(),
});
