/**
 * The recovery server (port 9999; nodes that booted with a formatted state disk): when no join service of the
 * cluster runs any more (say, every control-plane node rebooted), the CLI verifies this node's attestation and
 * seals it the master secret (RecoverSecrets). The node derives its disk key from it, unlocks the disk (a wrong
 * master secret is refused and changes nothing), takes the node lock, recomputes the clusterID from the
 * measurement salt on its disk, extends PCR 15 and, on a control-plane node, restarts its join service; then
 * it answers RecoverDone with its disk UUID. It runs in parallel with the rejoin client; whichever wins takes the lock.
 */
import type { ServerDuplexStream } from '@grpc/grpc-js';
import { decodeMessage, recoverServerAdapter } from '../lib/atls/index.js';
import { UserError } from '../lib/errors.js';
import { deriveMeasurementSecret, deriveStateDiskKey, MIN_MASTER_KEY_LENGTH, MIN_MASTER_SALT_LENGTH } from '../lib/kms/index.js';
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
    const options = { purpose: 'recover' as const, issuer, logger: this.logger, stepTimeoutMs, failureMessage: 'recovery failed' };
    return serveCliCall(call, recoverServerAdapter, options, async (session) => {
      await this.recover(decodeMessage(RecoverSecrets, session.secrets, 'The recovery secrets'));
      session.channel.sendOther({ kind: { $case: 'done', value: { diskUuid: stateDisk.uuid, nodeName: this.options.node.name } } });
      session.channel.end();
    });
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
    status.attested('accepted', 'the CLI (recover)');
    status.set('joining');
    try {
      const { clusterId, record } = await setup.resume(deriveStateDiskKey(master, stateDisk.uuid), deriveMeasurementSecret(master), {
        hostJoinService: node.role === 'control-plane',
        how: 'recover',
      });
      status.setKubernetesVersion(record.kubernetesVersion ?? '');
      status.set('joined', { clusterId });
      this.logger.info('recovered: state disk unlocked with the master secret from the CLI', { clusterId: Buffer.from(clusterId).toString('hex') });
    } catch (err) {
      status.set('failed', { reason: describeError(err) });
      throw err;
    }
  }
}
