/**
 * Builds the official Azure SDK clients from the provider options. The SDKs are imported here, lazily, so
 * nothing reachable from `constellation --help` loads them. Every client gets the same endpoint, TLS trust,
 * retry policy (which retries 429/503 with Retry-After and transient 5xx) and credential scope.
 */
import type { TokenCredential } from '@azure/core-auth';
import type { ComputeManagementClient } from '@azure/arm-compute';
import type { NetworkManagementClient } from '@azure/arm-network';
import type { ResourceManagementClient } from '@azure/arm-resources';
import type { ManagedServiceIdentityClient } from '@azure/arm-msi';
import type { AuthorizationManagementClient } from '@azure/arm-authorization';
import { ARM_ENDPOINT, ARM_SCOPE, type AzureProviderOptions } from './options.js';

export interface AzureClients {
  compute: ComputeManagementClient;
  network: NetworkManagementClient;
  resources: ResourceManagementClient;
}

export interface AzureIamClients {
  resources: ResourceManagementClient;
  msi: ManagedServiceIdentityClient;
  authorization: AuthorizationManagementClient;
}

/** options.credential, or DefaultAzureCredential (environment, workload identity, managed identity, az CLI, ...). */
export async function resolveCredential(options: AzureProviderOptions): Promise<TokenCredential> {
  if (options.credential) return options.credential;
  const { DefaultAzureCredential } = await import('@azure/identity');
  return new DefaultAzureCredential();
}

function commonOptions(options: AzureProviderOptions) {
  const endpoint = options.endpoint ?? ARM_ENDPOINT;
  return {
    endpoint,
    $host: endpoint,
    credentialScopes: [ARM_SCOPE],
    credentials: { scopes: [ARM_SCOPE] },
    ...(options.tlsOptions ? { tlsOptions: options.tlsOptions } : {}),
    ...(options.retryOptions ? { retryOptions: options.retryOptions } : {}),
    userAgentOptions: { userAgentPrefix: 'constellation-ts' },
  };
}

export async function createAzureClients(subscription: string, options: AzureProviderOptions): Promise<AzureClients> {
  const credential = await resolveCredential(options);
  const [{ ComputeManagementClient }, { NetworkManagementClient }, { ResourceManagementClient }] = await Promise.all([
    import('@azure/arm-compute'),
    import('@azure/arm-network'),
    import('@azure/arm-resources'),
  ]);
  const common = commonOptions(options);
  return {
    compute: new ComputeManagementClient(credential, subscription, common),
    network: new NetworkManagementClient(credential, subscription, common),
    resources: new ResourceManagementClient(credential, subscription, common),
  };
}

export async function createIamClients(subscription: string, options: AzureProviderOptions): Promise<AzureIamClients> {
  const credential = await resolveCredential(options);
  const [{ ResourceManagementClient }, { ManagedServiceIdentityClient }, { AuthorizationManagementClient }] =
    await Promise.all([import('@azure/arm-resources'), import('@azure/arm-msi'), import('@azure/arm-authorization')]);
  const common = commonOptions(options);
  return {
    resources: new ResourceManagementClient(credential, subscription, common),
    msi: new ManagedServiceIdentityClient(credential, subscription, common),
    authorization: new AuthorizationManagementClient(credential, subscription, common),
  };
}

/** How the SDK's long-running operations poll: the options' interval, ended by the call's abort signal. */
export function lroOptions(options: Pick<AzureProviderOptions, 'pollIntervalMs'>, signal?: AbortSignal) {
  return { updateIntervalInMs: options.pollIntervalMs, abortSignal: signal };
}
