/**
 * Options of the Azure provider. Without any, the SDKs talk to the public Azure Resource Manager and the
 * instance metadata service and authenticate with DefaultAzureCredential. Tests (and the benchmark) point
 * them at a local fake: an HTTPS endpoint with its own CA, a static token credential, short retry delays and
 * poll intervals. The ProviderModule receives them as a plain record, hence the parse function.
 */
import type { TokenCredential } from '@azure/core-auth';
import type { Sleep } from '../../lib/clock.js';

export const ARM_ENDPOINT = 'https://management.azure.com';
export const ARM_SCOPE = 'https://management.azure.com/.default';
export const IMDS_ENDPOINT = 'http://169.254.169.254';

export interface AzureProviderOptions {
  /** Azure Resource Manager base URL. */
  endpoint?: string;
  /** A token credential to use instead of DefaultAzureCredential. */
  credential?: TokenCredential;
  /** Extra TLS trust (a test CA) for the ARM endpoint. */
  tlsOptions?: { ca?: string | Buffer };
  /** SDK retry policy: attempts and delays for throttling (429/503) and transient errors. */
  retryOptions?: { maxRetries?: number; retryDelayInMs?: number; maxRetryDelayInMs?: number };
  /** Poll interval of long-running operations, ms (the SDK default is 2000 unless Azure sends Retry-After). */
  pollIntervalMs?: number;
  /** The image new VMs boot (the config's `image`): addInstance sets it on the scale set's model. */
  image?: string;
  /** Base URL of the wire server the node reports Ready to (node side; default http://168.63.129.16). */
  wireServerEndpoint?: string;
  /** Base URL of the instance metadata service (node side). */
  imdsEndpoint?: string;
  /** IAM: how long to wait between attempts while a new identity replicates (PrincipalNotFound), and how often. */
  principalRetryDelayMs?: number;
  principalRetries?: number;
  /** How resource provider registration waits (tests: a recording fake), and its poll interval. */
  sleep?: Sleep;
  registrationPollMs?: number;
}

export function parseAzureOptions(raw: Record<string, unknown> = {}): AzureProviderOptions {
  const str = (key: string): string | undefined => (typeof raw[key] === 'string' ? (raw[key] as string) : undefined);
  const num = (key: string): number | undefined => (typeof raw[key] === 'number' ? (raw[key] as number) : undefined);
  const credential = raw.credential as TokenCredential | undefined;
  if (credential !== undefined && typeof credential.getToken !== 'function') {
    throw new TypeError('azure provider option "credential" must be a TokenCredential');
  }
  return {
    endpoint: str('endpoint'),
    credential,
    tlsOptions: raw.tlsOptions as AzureProviderOptions['tlsOptions'],
    retryOptions: raw.retryOptions as AzureProviderOptions['retryOptions'],
    pollIntervalMs: num('pollIntervalMs'),
    image: str('image'),
    imdsEndpoint: str('imdsEndpoint'),
    wireServerEndpoint: str('wireServerEndpoint'),
    principalRetryDelayMs: num('principalRetryDelayMs'),
    principalRetries: num('principalRetries'),
    sleep: typeof raw.sleep === 'function' ? (raw.sleep as Sleep) : undefined,
    registrationPollMs: num('registrationPollMs'),
  };
}
