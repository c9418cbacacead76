/**
 * The local provider's node platform: a process node whose launcher put its identity, swtpm socket, state-disk file
 * and metadata server into the environment (./node-env.ts). It attests as local-vtpm, with the AK the provider
 * registered when it created the node; its join service asks the metadata server's AK registry. Its state disk is a
 * gocryptfs directory.
 */
import { localInstanceInfo, VARIANT } from '../../lib/attestation/variants/local-vtpm.js';
import { VtpmIssuer } from '../../lib/attestation/vtpm-issuer.js';
import type { NodePlatform, NodePlatformOptions } from '../contract.js';
import { LocalNodeMetadata, localAkRegistry } from './node-metadata.js';
import { readNodeEnv } from './node-env.js';

export function localNodePlatform(options: NodePlatformOptions): NodePlatform {
  const env = readNodeEnv(options.env ?? process.env);
  return {
    provider: 'local',
    variant: VARIANT,
    metadata: new LocalNodeMetadata({ metadataUrl: env.metadataUrl, nodeIp: env.ip }),
    identity: async () => ({ name: env.name, ip: env.ip, role: env.role }),
    tpmPath: env.tpmSocket,
    issuer: async (tpm) => new VtpmIssuer({ variant: VARIANT, tpm, instanceInfo: localInstanceInfo(env.name) }),
    stateDisk: { kind: 'gocryptfs', diskDir: env.stateDisk, mountPoint: env.stateDir },
    nodeDir: env.nodeDir,
    kubernetesBackend: env.backend,
    imageVersion: env.imageVersion,
    validatorDeps: async () => ({ akRegistry: localAkRegistry(env.metadataUrl, { localAddress: env.ip }) }),
  };
}
