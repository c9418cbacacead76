/**
 * The attestation cryptography of one join (docs/design.md#attested-channels, docs/design.md#nodes), done one step after another with no service,
 * connection or message around it, for the join storm's cryptographic limit. Node side: ephemeral ECDH key,
 * quote signature (the software AK), opening the JWE. Service side: the validator's checks (quote signature,
 * qualifying data, PCR digest and compare), CSR check + kubelet certificate signature, HKDF of the disk key
 * and measurement secret, ECDH + JWE seal. Every round is another node (its own AK), as in a storm of new
 * nodes: nothing the validator remembers about an AK it has seen helps.
 */
import {
  attestedUserData,
  generateEphemeralKeyPair,
  joinHelloBoundFields,
  seal,
  unseal,
} from '../../lib/atls/index.js';
import { createValidator } from '../../lib/attestation/registry.js';
import type { AkRegistry } from '../../lib/attestation/types.js';
import { deriveMeasurementSecret, deriveStateDiskKey } from '../../lib/kms/index.js';
import { signKubeletCertificate } from '../../lib/pki/cluster-pki.js';
import type { LoadedJoinConfig } from '../../joinservice/join-config.js';
import type { JoinHello } from '../../proto/gen/constellation/join.js';
import type { SoftwareVtpm } from '../../test/joinservice/support/software-vtpm.js';
import { median, WARM_UP_ROUNDS } from './stats.js';

export interface JoinCrypto {
  /** ECDH key, quote signature, JWE open. */
  node: number;
  /** The validator's checks of the document. */
  validate: number;
  /** ECDH + JWE seal. */
  seal: number;
  /** CSR check + kubelet certificate. */
  cert: number;
  /** Disk key and measurement secret. */
  hkdf: number;
  /** The median round of the service's steps. */
  service: number;
  /** The median round of all steps (a spike from another process moves neither this nor the parts). */
  total: number;
}

const TICKET_BYTES = 1500; // about a worker's JoinTicket

export interface CryptoNode {
  /** Registered in the validator's AK registry. */
  vtpm: SoftwareVtpm;
  hello: JoinHello;
}

/**
 * Milliseconds of each step: medians over the rounds after WARM_UP_ROUNDS, one round per node of `nodes`
 * (so `nodes.length - WARM_UP_ROUNDS` rounds are measured).
 */
export async function measureJoinCrypto(
  nodes: CryptoNode[],
  config: LoadedJoinConfig,
  akRegistry: AkRegistry,
): Promise<JoinCrypto> {
  const validator = await createValidator('local-vtpm', config.attestation.config, { akRegistry });
  const nonce = new Uint8Array(32).fill(7);
  const binding = { purpose: 'join' as const, nonce };
  const plaintext = new Uint8Array(TICKET_BYTES);
  const steps = {
    node: [] as number[],
    validate: [] as number[],
    seal: [] as number[],
    cert: [] as number[],
    hkdf: [] as number[],
    service: [] as number[],
    total: [] as number[],
  };
  const lap = (start: number) => performance.now() - start;
  for (const [round, node] of nodes.entries()) {
    let t = performance.now();
    const keys = generateEphemeralKeyPair();
    const userData = attestedUserData({
      purpose: 'join',
      publicKey: keys.publicKey,
      bound: joinHelloBoundFields(node.hello),
    });
    const document = await node.vtpm.issue(userData, nonce);
    const nodeFirst = lap(t);

    t = performance.now();
    await validator.validate(document, nonce);
    const validate = lap(t);

    t = performance.now();
    signKubeletCertificate(config.loadedPki, node.hello.certificateRequest, {
      ips: ['10.0.0.7'],
      nodeName: node.hello.nodeName,
      clock: () => new Date(),
    });
    const cert = lap(t);

    t = performance.now();
    deriveStateDiskKey(config.masterSecret, node.hello.diskUuid);
    deriveMeasurementSecret(config.masterSecret);
    const hkdf = lap(t);

    t = performance.now();
    const jwe = seal(plaintext, keys.publicKey, binding);
    const sealTime = lap(t);

    t = performance.now();
    unseal(jwe, keys.privateKey, binding);
    const nodeSecond = lap(t);

    if (round >= WARM_UP_ROUNDS) {
      const service = validate + sealTime + cert + hkdf;
      steps.node.push(nodeFirst + nodeSecond);
      steps.validate.push(validate);
      steps.seal.push(sealTime);
      steps.cert.push(cert);
      steps.hkdf.push(hkdf);
      steps.service.push(service);
      steps.total.push(nodeFirst + nodeSecond + service);
    }
  }
  return {
    node: median(steps.node),
    validate: median(steps.validate),
    seal: median(steps.seal),
    cert: median(steps.cert),
    hkdf: median(steps.hkdf),
    service: median(steps.service),
    total: median(steps.total),
  };
}
