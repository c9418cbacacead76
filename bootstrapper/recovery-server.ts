/**
 * The recovery server (port 9999; nodes that booted with a formatted state disk): when no join service of the
 * cluster runs any more (say, every control-plane node rebooted), the CLI verifies this node's attestation and
 * seals it the master secret (RecoverSecrets). The node derives its disk key from it, unlocks the disk (a wrong
 * master secret is refused and changes nothing), takes the node lock, recomputes the clusterID from the
 * measurement salt on its disk, extends PCR 15 and, on a control-plane node, restarts its join service; then
 * it answers RecoverDone with its disk UUID. It runs in parallel with the rejoin client; whichever wins takes the lock.
 */
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { Issuer } from '../lib/attestation/types.js';
import { attestedServer, recoverServerAdapter } from '../lib/atls/index.js';
import { UserError } from '../lib/errors.js';
import { deriveMeasurementSecret, deriveStateDiskKey, MIN_MASTER_KEY_LENGTH, MIN_MASTER_SALT_LENGTH } from '../lib/kms/index.js';
import { RecoverSecrets, type RecoverRequest, type RecoverResponse } from '../proto/gen/constellation/recover.js';
import type { Logger, NodeIdentity, StateDisk } from './collaborators.js';
import { describeError } from './errors.js';
import type { NodeLock } from './node-lock.js';
import type { NodeSetup } from './node-setup.js';
import type { NodeStatusTracker } from './node-status.js';

export interface RecoveryServerOptions {
  node: NodeIdentity;
  issuer: Issuer;
  lock: NodeLock;
  status: NodeStatusTracker;
  setup: NodeSetup;
  stateDisk: StateDisk;
  logger: Logger;
  stepTimeoutMs?: number;
}

export class RecoveryServer {
  private readonly logger: Logger;

  constructor(private readonly options: RecoveryServerOptions) {
    this.logger = options.logger.child({ component: 'recovery' });
  }

  /** The gRPC handler of Recovery.Recover. Never throws. */
  async handle(call: ServerDuplexStream<RecoverRequest, RecoverResponse>): Promise<void> {
    const peer = `the CLI at ${call.getPeer()}`;
    let session;
    try {
      session = await attestedServer(call, recoverServerAdapter, { purpose: 'recover', issuer: this.options.issuer, peer, timeoutMs: this.options.stepTimeoutMs });
    } catch (err) {
      this.logger.warn('recover request ended before any secret arrived', { peer, reason: describeError(err) });
      return;
    }
    try {
      await this.recover(RecoverSecrets.decode(session.secrets));
      session.channel.sendOther({ kind: { $case: 'done', value: { diskUuid: this.options.stateDisk.uuid } } });
      session.channel.end();
    } catch (err) {
      const reason = describeError(err);
      this.logger.error('recovery failed', { peer, reason });
      session.channel.fail(reason);
    }
  }

  async recover(secrets: RecoverSecrets): Promise<void> {
    const { lock, setup, status, stateDisk, node } = this.options;
    if (secrets.masterKey.length < MIN_MASTER_KEY_LENGTH || secrets.masterSalt.length < MIN_MASTER_SALT_LENGTH) {
      throw new UserError('The recover request is malformed: the master key or salt is too short.');
    }
    if (lock.locked) throw new UserError('This node is already back in its cluster; there is nothing to recover.');
    const master = { key: new Uint8Array(secrets.masterKey), salt: new Uint8Array(secrets.masterSalt) };
    // Unlocking first: a wrong master secret is refused by the disk and leaves the node as it was.
    await setup.openStateDisk(deriveStateDiskKey(master, stateDisk.uuid));
    if (!lock.tryLock('join')) throw new UserError('This node rejoined its cluster meanwhile; there is nothing to recover.');
    status.set('joining');
    try {
      const clusterId = await setup.resume(deriveStateDiskKey(master, stateDisk.uuid), deriveMeasurementSecret(master), {
        hostJoinService: node.role === 'control-plane',
      });
      status.set('joined', { clusterId });
      this.logger.info('recovered: state disk unlocked with the master secret from the CLI', { clusterId: Buffer.from(clusterId).toString('hex') });
    } catch (err) {
      status.set('failed', { reason: describeError(err) });
      throw err;
    }
  }
}
