/**
 * Options of the GCP provider (`infrastructure(options)`, the node platform's `providerOptions`, `iam(options)`).
 * Without options the Compute client uses Google application default credentials and the real endpoints;
 * tests and the bench point the unmodified SDK at a fake on 127.0.0.1 (apiEndpoint/port/protocol plus an
 * auth client with a static token) and shorten retry delays. No SDK import here: loaded with the index.
 */
import type { Sleep } from '../../lib/clock.js';

/** A type alias (not an interface) so it is assignable to the contract's Record<string, unknown>. */
export type GcpProviderOptions = {
  /** Project/region/zone when no recorded resource names them (terminate --by-tag of an empty journal, node side). */
  project?: string;
  region?: string;
  zone?: string;
  /** The image new instances boot (the config's `image`): addInstance makes the group's template boot it. */
  image?: string;
  /** Longest wait for an added instance to run or a removed one to be gone (default 15 minutes). */
  instanceTimeoutMs?: number;
  /** The cluster's uid when the journal is empty (terminate byTag after an interrupted first step). */
  uid?: string;
  /** Compute API host (default compute.googleapis.com), port (443) and protocol (https). */
  apiEndpoint?: string;
  port?: number;
  protocol?: 'http' | 'https';
  /** IAM and Resource Manager base URLs (default https://iam.googleapis.com, https://cloudresourcemanager.googleapis.com). */
  iamEndpoint?: string;
  resourceManagerEndpoint?: string;
  /** An auth client (google-auth-library AuthClient) instead of application default credentials (tests). */
  authClient?: unknown;
  /** A service-account key file instead of application default credentials (the config's serviceAccountKeyPath). */
  keyFilename?: string;
  /** Metadata server base URL (node side); default GCE_METADATA_HOST or http://metadata.google.internal. */
  metadataEndpoint?: string;
  /** Retries of throttled (429) and unavailable (5xx) calls: attempts in all, first delay, cap. */
  retry?: { attempts?: number; baseDelayMs?: number; maxDelayMs?: number };
  /** Our own polls (instance replacement) and retries of deletes refused because a resource is still in use. */
  pollIntervalMs?: number;
  inUseRetries?: number;
  /** How `iam create` waits for a new service account to become visible (tests: a recording fake). */
  sleep?: Sleep;
  iamVisibility?: { attempts?: number; baseDelayMs?: number; maxDelayMs?: number };
  /**
   * How `create` waits while a new service-account key or role binding takes effect (IAM: up to minutes; meanwhile
   * calls fail with 403 or the token request with invalid_grant): attempts in all, first delay, cap.
   */
  propagation?: { attempts?: number; baseDelayMs?: number; maxDelayMs?: number };
  /** Instrumentation: the create graph's steps and their dependencies, when create starts (the bench). */
  onPlan?: (steps: { id: string; deps: string[] }[]) => void;
};

export const DEFAULT_RETRY = { attempts: 6, baseDelayMs: 1000, maxDelayMs: 30_000 };
/** About two minutes in all. */
export const DEFAULT_PROPAGATION = { attempts: 12, baseDelayMs: 2000, maxDelayMs: 15_000 };
export const DEFAULT_POLL_INTERVAL_MS = 5000;
export const DEFAULT_IN_USE_RETRIES = 12;
