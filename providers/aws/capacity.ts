/**
 * Waiting for an auto scaling group to run its desired capacity after `create` (upstream's Terraform waits the
 * same way: wait_for_capacity_timeout, 20 minutes for SEV-SNP). It polls DescribeAutoScalingGroups until as many
 * instances as desired are InService, reporting progress when the count changes, and reads the group's scaling
 * activities on each poll. A Failed launch that passes (EC2 has no SEV-SNP capacity in the zone right now:
 * InsufficientInstanceCapacity; a new instance profile that IAM has not propagated yet: "Invalid IAM Instance
 * Profile") is reported and waited through, as upstream's Terraform waits through it, up to the timeout; any other
 * Failed launch (a refused launch template or volume, a quota, an unsupported type) ends the wait at once with
 * EC2's own status message, instead of surfacing much later as an `init` that times out. Polls start after a second and back off to 15 seconds (lib/poll.ts). Time and waiting are injected (options.clock,
 * options.sleep), so tests do not wait.
 */
import {
  DescribeAutoScalingGroupsCommand,
  DescribeScalingActivitiesCommand,
  type DescribeAutoScalingGroupsCommandOutput,
  type DescribeScalingActivitiesCommandOutput,
} from '@aws-sdk/client-auto-scaling';
import { systemClock } from '../../lib/clock.js';
import { UserError } from '../../lib/errors.js';
import { pollUntil } from '../../lib/poll.js';
import type { ProviderContext } from '../contract.js';
import type { AwsClients } from './clients.js';
import type { AwsProviderOptions } from './options.js';

export const DEFAULT_CAPACITY_TIMEOUT_MS = 20 * 60_000;
/** Polls start after a second and back off to this (options.pollIntervalMs caps them instead). */
const DEFAULT_CAPACITY_POLL_MS = 15_000;
const FIRST_POLL_MS = 1000;

export interface CapacityTarget {
  groupName: string;
  nodeGroup: string;
  desired: number;
  instanceType: string;
  zone: string;
}

/** Launch failures that pass with time (see the header): capacity, and instance profiles IAM has not propagated. */
export function isTransientLaunchFailure(message: string): boolean {
  return /InsufficientInstanceCapacity|do not have sufficient .* capacity|Invalid IAM Instance Profile|iamInstanceProfile\.(name|arn) is invalid/i.test(
    message,
  );
}

export async function waitForCapacity(
  clients: AwsClients,
  region: string,
  target: CapacityTarget,
  ctx: ProviderContext,
  options: AwsProviderOptions,
): Promise<void> {
  const clock = options.clock ?? systemClock;
  const timeoutMs = options.capacityTimeoutMs ?? DEFAULT_CAPACITY_TIMEOUT_MS;
  const maxPollMs = options.pollIntervalMs ?? DEFAULT_CAPACITY_POLL_MS;
  const firstPollMs = Math.min(FIRST_POLL_MS, maxPollMs);
  const autoscaling = clients.autoscaling(region);
  // Activities from before this wait (an earlier, interrupted run) do not count.
  const since = clock().getTime() - 60_000;
  let inService = 0;
  let reported = -1;
  let lastTransient: string | undefined;
  await pollUntil(
    async () => {
      const out = await clients.send<DescribeAutoScalingGroupsCommandOutput>(
        autoscaling,
        new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: [target.groupName] }),
        `Reading the auto scaling group of node group ${target.nodeGroup}`,
      );
      inService = (out.AutoScalingGroups?.[0]?.Instances ?? []).filter((i) => i.LifecycleState === 'InService').length;
      if (inService !== reported) {
        ctx.progress?.(`node group ${target.nodeGroup}: ${inService} of ${target.desired} instances in service`);
        reported = inService;
      }
      if (inService >= target.desired) return true;

      const activities = await clients.send<DescribeScalingActivitiesCommandOutput>(
        autoscaling,
        new DescribeScalingActivitiesCommand({ AutoScalingGroupName: target.groupName, MaxRecords: 20 }),
        `Reading the scaling activities of node group ${target.nodeGroup}`,
      );
      const failed = (activities.Activities ?? []).find(
        (a) => a.StatusCode === 'Failed' && (a.StartTime?.getTime() ?? Infinity) >= since,
      );
      const failure = failed ? (failed.StatusMessage ?? failed.Description ?? 'the launch failed').trim() : undefined;
      if (failure && !isTransientLaunchFailure(failure)) {
        throw new UserError(`Node group ${target.nodeGroup} could not launch its instances: ${failure}`, {
          hint: `The auto scaling group ${target.groupName} keeps trying. Check the instance type ${target.instanceType} in ${target.zone} (capacity, quota, SEV-SNP support); \`constellation terminate\` removes what was made.`,
        });
      }
      if (failure && failure !== lastTransient) {
        ctx.progress?.(`node group ${target.nodeGroup}: a launch failed, AWS keeps trying: ${failure}`);
        lastTransient = failure;
      }
      return undefined;
    },
    {
      timeoutMs,
      intervalMs: (attempt) => Math.min(firstPollMs * 2 ** (attempt - 1), maxPollMs),
      clock,
      sleep: options.sleep,
      signal: ctx.signal,
      onTimeout: () => {
        const why = lastTransient ? ` The last launch failed: ${lastTransient}` : '';
        throw new UserError(
          `Node group ${target.nodeGroup} has ${inService} of ${target.desired} instances in service after ${Math.round(timeoutMs / 60_000)} minutes.${why}`,
          {
            hint: `Look at the scaling activities of the auto scaling group ${target.groupName} in the AWS console; run \`constellation create\` again to keep waiting.`,
          },
        );
      },
    },
  );
}
