/**
 * Resource provider registration: a fresh Azure subscription is not registered for most namespaces, and ARM
 * refuses a resource of an unregistered one with 409 MissingSubscriptionRegistration. Upstream's Terraform has
 * the azurerm provider register them (resource_provider_registrations = "all"); we register the namespaces our
 * resources live in, before the first PUT: read each one's registrationState, POST .../register for those not
 * Registered, and poll until they are (Azure takes seconds to minutes). Already registered: one GET each.
 */
import type { ResourceManagementClient } from '@azure/arm-resources';
import { realSleep, type Sleep } from '../../lib/clock.js';
import { UserError } from '../../lib/errors.js';
import { pollUntil } from '../../lib/poll.js';
import type { ProviderContext } from '../contract.js';

/** What `create` makes: scale sets and disks, networks and load balancers, and the scale sets' identity. */
export const CLUSTER_NAMESPACES = ['Microsoft.Compute', 'Microsoft.Network', 'Microsoft.ManagedIdentity'] as const;
/** What `iam create` makes: the identity and its role assignments. */
export const IAM_NAMESPACES = ['Microsoft.ManagedIdentity', 'Microsoft.Authorization'] as const;

export interface RegistrationOptions {
  sleep?: Sleep;
  /** Poll interval and how long to wait at most (defaults: 5 s, 10 minutes). */
  pollIntervalMs?: number;
  timeoutMs?: number;
}

export async function ensureRegistered(
  resources: ResourceManagementClient,
  namespaces: readonly string[],
  ctx: Pick<ProviderContext, 'progress' | 'log' | 'signal'>,
  options: RegistrationOptions = {},
): Promise<void> {
  const sleep = options.sleep ?? realSleep;
  const pollMs = options.pollIntervalMs ?? 5000;
  await Promise.all(
    namespaces.map(async (namespace) => {
      let state = (await resources.providers.get(namespace)).registrationState;
      if (state === 'Registered') return;
      ctx.progress?.(`registering the resource provider ${namespace} with the subscription`);
      if (state !== 'Registering') state = (await resources.providers.register(namespace)).registrationState;
      await pollUntil(
        async (attempt) => {
          if (attempt > 1) state = (await resources.providers.get(namespace)).registrationState;
          if (state === 'Registered') return true;
          ctx.log.debug('azure: waiting for resource provider registration', { namespace, state });
          return undefined;
        },
        {
          timeoutMs: options.timeoutMs ?? 10 * 60_000,
          intervalMs: pollMs,
          sleep,
          signal: ctx.signal,
          onTimeout: () => {
            throw new UserError(`The subscription's registration for ${namespace} is still ${state ?? 'unknown'}.`, {
              hint: `Check it with \`az provider show --namespace ${namespace}\` and run the command again once it is Registered.`,
            });
          },
        },
      );
    }),
  );
}
