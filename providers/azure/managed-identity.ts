/**
 * How an Azure node authenticates to Azure Resource Manager: as the managed identity of its VM (the user-assigned
 * identity `iam create azure` made, which the scale set carries, providers/azure/plan.ts), with a token from the
 * instance metadata service, as upstream's nodes do (IMDS `GET /metadata/identity/oauth2/token`, header
 * Metadata: true, https://learn.microsoft.com/entra/identity/managed-identities-azure-resources/how-to-use-vm-token).
 * No secret is on the node: IMDS answers only from inside the VM. A token is reused until five minutes before it
 * expires. Used by the node side (metadata, the join service's instance lookups); the CLI keeps its own credential.
 */
import type { AccessToken, GetTokenOptions, TokenCredential } from '@azure/core-auth';
import { UserError } from '../../lib/errors.js';
import { IMDS_ENDPOINT, type AzureProviderOptions } from './options.js';

const IMDS_TOKEN_API_VERSION = '2018-02-01';
const REFRESH_MARGIN_MS = 5 * 60_000;

/** The token credential of the VM's managed identity, from IMDS. */
export class ImdsManagedIdentityCredential implements TokenCredential {
  private readonly cache = new Map<string, AccessToken>();

  constructor(
    private readonly imdsEndpoint: string = IMDS_ENDPOINT,
    private readonly now: () => number = Date.now,
  ) {}

  async getToken(scopes: string | string[], options?: GetTokenOptions): Promise<AccessToken> {
    // IMDS takes a resource, not scopes: "https://management.azure.com/.default" → "https://management.azure.com/".
    const scope = Array.isArray(scopes) ? scopes[0] : scopes;
    const resource = (scope ?? '').replace(/\.default$/, '');
    const cached = this.cache.get(resource);
    if (cached && cached.expiresOnTimestamp - REFRESH_MARGIN_MS > this.now()) return cached;
    const url = `${this.imdsEndpoint}/metadata/identity/oauth2/token?api-version=${IMDS_TOKEN_API_VERSION}&resource=${encodeURIComponent(resource)}`;
    let response: Response;
    try {
      response = await fetch(url, {
        headers: { Metadata: 'true' },
        signal: (options?.abortSignal as AbortSignal | undefined) ?? AbortSignal.timeout(10_000),
      });
    } catch (err) {
      throw new UserError(
        `The Azure instance metadata service (${this.imdsEndpoint}) gave no managed-identity token: ${(err as Error).message}`,
        {
          hint: "Nodes authenticate as their VM's managed identity, which only works on an Azure VM.",
          cause: err,
        },
      );
    }
    const body = (await response.json().catch(() => ({}))) as {
      access_token?: string;
      expires_on?: string | number;
      error_description?: string;
    };
    if (!response.ok || !body.access_token) {
      throw new UserError(
        `The Azure instance metadata service refused a managed-identity token for ${resource}: ${response.status} ${body.error_description ?? response.statusText}.`,
        {
          hint: 'The scale set must carry the user-assigned identity of provider.azure.userAssignedIdentity (`constellation iam create azure`); `constellation create` assigns it.',
        },
      );
    }
    const token = {
      token: body.access_token,
      expiresOnTimestamp: Number(body.expires_on ?? 0) * 1000 || this.now() + 3600_000,
    };
    this.cache.set(resource, token);
    return token;
  }
}

/** The node side's options: the given credential (tests), else the VM's managed identity from IMDS. */
export function nodeCredentialOptions(options: AzureProviderOptions): AzureProviderOptions {
  return options.credential
    ? options
    : { ...options, credential: new ImdsManagedIdentityCredential(options.imdsEndpoint ?? IMDS_ENDPOINT) };
}
