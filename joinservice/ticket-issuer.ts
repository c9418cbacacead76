/**
 * What the join service hands a node that passed attestation (docs/design.md#nodes), as pure logic over the current
 * configuration: a JoinTicket (state-disk key for the node's disk, measurement salt and secret, a kubelet
 * certificate for its CSR's key, named with the provider's view of the instance, API endpoint, a fresh 15-minute
 * bootstrap token, discovery hash, Kubernetes version, the cluster's emergency SSH CA public key and a host
 * certificate for the node's SSH host key (named, like the kubelet certificate, with the node's name and the
 * provider's addresses of the instance, never with what the node asks for), and for
 * control-plane nodes the cluster PKI and the cluster store's member endpoints) or a RejoinTicket
 * (disk key and measurement secret, for a rebooted node), each signed with the cluster's join-service identity key
 * (sign). No ticket carries the init secret. The server calls checkHello before attestation
 * (so a malformed request fails fast), checkIdentity after it passed, and the ticket methods only then.
 */
import { deriveMeasurementSecret, deriveStateDiskKey, signTicket } from '../lib/kms/index.js';
import { AttestationError, type AttestedInstance } from '../lib/attestation/types.js';
import { UserError } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';
import { checkNodeName, discoveryTokenCaCertHash, signKubeletCertificate } from '../lib/pki/cluster-pki.js';
import {
  deriveSshCa,
  publicKeyFromBlob,
  signHostCertificate,
  SSH_CLOCK_SLACK_SECONDS,
  sshCaPublicKeyLine,
  type SshCa,
} from '../lib/ssh/certificate.js';
import { SignedTicket, type JoinHello, type JoinTicket, type RejoinTicket } from '../proto/gen/constellation/join.js';
import type { BootstrapTokenIssuer } from './bootstrap-token.js';
import { controlPlaneFiles, type LoadedJoinConfig } from './join-config.js';

export type TicketKind = 'join' | 'rejoin';

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

export interface JoinTicketIssuerOptions {
  tokens: BootstrapTokenIssuer;
  clock: Clock;
  /**
   * The provider's instance listing: the IP addresses of the instance of that name, or undefined when it has
   * none. Asked only when the attestation did not identify the instance with its addresses (the cloud variants
   * today); without either, a kubelet certificate names no IP address.
   */
  instanceAddresses?: (nodeName: string) => Promise<string[] | undefined>;
}

/** The kubeadm discovery hash of the cluster CA, and the emergency SSH CA from the master secret. */
interface ConfigDerivations {
  discoveryHash: string;
  sshCa: SshCa;
  sshCaPublicKeyLine: string;
}

export class JoinTicketIssuer {
  /** What every join ticket of a loaded configuration shares, derived once per configuration (not per join). */
  private readonly derived = new WeakMap<LoadedJoinConfig, ConfigDerivations>();

  constructor(private readonly options: JoinTicketIssuerOptions) {}

  /** A UserError naming what is wrong with the request; nothing about it is trusted before attestation. */
  checkHello(hello: JoinHello, kind: TicketKind): void {
    checkNodeName(hello.nodeName);
    if (!UUID.test(hello.diskUuid)) {
      throw new UserError(`The disk UUID "${hello.diskUuid}" is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx).`);
    }
    if (kind === 'join' && hello.certificateRequest.length === 0) {
      throw new UserError('The join request has no certificate request for the kubelet.');
    }
    if (hello.hostPublicKey.length > 0) publicKeyFromBlob(hello.hostPublicKey, "The join request's SSH host key");
  }

  /**
   * Who may receive what. Every node runs the same image, so the quote alone cannot tell a worker from a control
   * plane: the attested instance can. The node name must be the attested instance's (the kubelet certificate is
   * issued for that name), and control-plane files (the cluster CA keys, the master secret) go only to an instance
   * the provider created as a control-plane node.
   */
  checkIdentity(hello: JoinHello, instance: AttestedInstance | undefined): void {
    if (instance && hello.nodeName !== instance.name) {
      throw new AttestationError(
        `The join request names node "${hello.nodeName}", but the attestation comes from instance "${instance.name}".`,
      );
    }
    if (hello.isControlPlane && instance?.role !== 'control-plane') {
      const who = !instance
        ? 'the attestation does not identify the instance'
        : `the provider created instance "${instance.name}" as ${instance.role ? `a ${instance.role} node` : 'a node of unknown role'}`;
      throw new AttestationError(
        `A control-plane ticket was asked for, but ${who}: the cluster's CA keys go only to control-plane nodes.`,
      );
    }
  }

  /**
   * The ticket for a node that passed attestation as `instance`. The kubelet certificate names the node and the
   * addresses the provider gave the instance; a CSR asking for any other name or address is refused (a
   * UserError), because the certificate carries serverAuth under the CA the admin kubeconfig trusts.
   * `storeEndpoints`: where a control-plane node joins the cluster store (see JoinTicket.store_endpoints).
   */
  async joinTicket(
    hello: JoinHello,
    config: LoadedJoinConfig,
    storeEndpoints: string[] = [],
    instance?: AttestedInstance,
  ): Promise<JoinTicket> {
    const ips = instance?.addresses ?? (await this.options.instanceAddresses?.(hello.nodeName)) ?? [];
    const kubeletCert = signKubeletCertificate(config.loadedPki, hello.certificateRequest, {
      nodeName: hello.nodeName,
      ips,
      clock: this.options.clock,
    });
    const token = await this.options.tokens.issue();
    const derived = this.derivedFrom(config);
    const hostCertificate =
      hello.hostPublicKey.length > 0
        ? signHostCertificate(
            derived.sshCa,
            publicKeyFromBlob(hello.hostPublicKey, "The join request's SSH host key"),
            [...ips, hello.nodeName],
            // A little in the past, as the cluster PKI does: a client whose clock lags still accepts it.
            Math.floor(this.options.clock().getTime() / 1000) - SSH_CLOCK_SLACK_SECONDS,
          )
        : '';
    return {
      stateDiskKey: Buffer.from(deriveStateDiskKey(config.masterSecret, hello.diskUuid)),
      measurementSalt: Buffer.from(config.measurementSalt),
      measurementSecret: Buffer.from(deriveMeasurementSecret(config.masterSecret)),
      kubeletCert: Buffer.from(kubeletCert),
      apiServerEndpoint: config.cluster.apiServerEndpoint,
      token: token.token,
      tokenExpiresAt: Math.floor(token.expiresAt.getTime() / 1000),
      discoveryTokenCaCertHash: derived.discoveryHash,
      controlPlaneFiles: hello.isControlPlane ? controlPlaneFiles(config) : [],
      kubernetesVersion: config.cluster.kubernetesVersion,
      storeEndpoints: hello.isControlPlane ? storeEndpoints : [],
      sshCaPublicKey: Buffer.from(derived.sshCaPublicKeyLine),
      hostCertificate: Buffer.from(hostCertificate),
    };
  }

  rejoinTicket(hello: JoinHello, config: LoadedJoinConfig): RejoinTicket {
    return {
      stateDiskKey: Buffer.from(deriveStateDiskKey(config.masterSecret, hello.diskUuid)),
      measurementSecret: Buffer.from(deriveMeasurementSecret(config.masterSecret)),
    };
  }

  /**
   * What is sealed to the node: the encoded ticket and the join service's signature over it, bound to the node's
   * ephemeral key of this exchange (lib/kms/join-service-key.ts), so that the node can tell it comes from a join
   * service of its cluster.
   */
  sign(ticket: Uint8Array, kind: TicketKind, nodePublicKey: Uint8Array, config: LoadedJoinConfig): Uint8Array {
    const signature = signTicket(config.joinServiceKey, kind, nodePublicKey, ticket);
    return SignedTicket.encode({ ticket: Buffer.from(ticket), signature: Buffer.from(signature) }).finish();
  }

  private derivedFrom(config: LoadedJoinConfig): ConfigDerivations {
    let derived = this.derived.get(config);
    if (derived === undefined) {
      const sshCa = deriveSshCa(config.masterSecret);
      derived = {
        discoveryHash: discoveryTokenCaCertHash(config.pki['ca.crt']),
        sshCa,
        sshCaPublicKeyLine: sshCaPublicKeyLine(sshCa.publicKey),
      };
      this.derived.set(config, derived);
    }
    return derived;
  }
}
