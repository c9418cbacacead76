/**
 * The recovery server (port 9999; nodes that booted with a formatted state disk): when no join service of the
 * cluster runs any more (say, every control-plane node rebooted), the CLI verifies this node's attestation and
 * seals it the master secret (RecoverSecrets). The node takes the node lock as `recover` (provisionally), derives
 * its disk key and unlocks the disk with it, which commits the lock (a wrong master secret is refused by the disk,
 * the lock is given back and nothing changed), recomputes the clusterID from the measurement salt on its disk,
 * extends PCR 15 and, on a control-plane node, restarts its join service; then it answers RecoverDone with its disk
 * UUID. It runs in parallel with the rejoin client: whichever takes the lock first unlocks the disk, and the other
 * stands down (a `recover` that lost is told so; a rejoin ticket that lost is not used).
 */
import type { ServerDuplexStream } from '@grpc/grpc-js';
import { decodeMessage, recoverServerAdapter } from '../lib/atls/index.js';
import { UserError } from '../lib/errors.js';
import {
  deriveMeasurementSecret,
  deriveStateDiskKey,
  MIN_MASTER_KEY_LENGTH,
  MIN_MASTER_SALT_LENGTH,
} from '../lib/kms/index.js';
import { RecoverSecrets, type RecoverRequest, type RecoverResponse } from '../proto/gen/constellation/recover.js';
import { serveCliCall } from './cli-call.js';
import type { Logger } from '../lib/logging/index.js';
import type { NodeRoleOptions } from './node-role.js';
import { describeError } from './errors.js';

export type RecoveryServerOptions = NodeRoleOptions;

export class RecoveryServer {
  private readonly logger: Logger;

  constructor(private readonly options: RecoveryServerOptions) {
    this.logger = options.logger.child({ component: 'recovery' });
  }

  /** The gRPC handler of Recovery.Recover. Never throws. */
  handle(call: ServerDuplexStream<RecoverRequest, RecoverResponse>): Promise<void> {
    const { issuer, stepTimeoutMs, stateDisk } = this.options;
    const options = {
      purpose: 'recover' as const,
      issuer,
      logger: this.logger,
      stepTimeoutMs,
      failureMessage: 'recovery failed',
    };
    return serveCliCall(call, recoverServerAdapter, options, async (session) => {
      await this.recover(decodeMessage(RecoverSecrets, session.secrets, 'The recovery secrets'));
      session.channel.sendOther({
        kind: { $case: 'done', value: { diskUuid: stateDisk.uuid, nodeName: this.options.node.name } },
      });
      session.channel.end();
    });
  }

  async recover(secrets: RecoverSecrets): Promise<void> {
    const { lock, setup, status, stateDisk, node } = this.options;
    if (secrets.masterKey.length < MIN_MASTER_KEY_LENGTH || secrets.masterSalt.length < MIN_MASTER_SALT_LENGTH) {
      throw new UserError('The recover request is malformed: the master key or salt is too short.');
    }
    const token = lock.tryLock('recover');
    if (!token) {
      throw new UserError(
        lock.owner === 'join'
          ? 'This node is rejoining (or has rejoined) its cluster through a join service; there is nothing to recover.'
          : 'This node is already being recovered (or is back in its cluster); there is nothing to recover.',
      );
    }
    const master = { key: new Uint8Array(secrets.masterKey), salt: new Uint8Array(secrets.masterSalt) };
    const diskKey = deriveStateDiskKey(master, stateDisk.uuid);
    try {
      // A wrong master secret is refused by the disk: the lock goes back and the node is as it was.
      await setup.openStateDisk(token, diskKey);
    } catch (err) {
      lock.release(token);
      throw err;
    }
    status.attested('accepted', 'the CLI (recover)');
    status.set('joining', {}, token);
    try {
      const { clusterId, record } = await setup.resume(token, diskKey, deriveMeasurementSecret(master), {
        hostJoinService: node.role === 'control-plane',
        how: 'recover',
      });
      status.setKubernetesVersion(record.kubernetesVersion ?? '');
      status.set('joined', { clusterId }, token);
      this.logger.info('recovered: state disk unlocked with the master secret from the CLI', {
        clusterId: Buffer.from(clusterId).toString('hex'),
      });
    } catch (err) {
      status.set('failed', { reason: describeError(err) }, token);
      throw err;
    }
  }
}
