/**
 * Options of the AWS provider (`infrastructure(options)`, the node platform's `providerOptions`, `iam(options)`).
 * Without options the SDK's default credential chain, its endpoints and its retry policy are used; tests and
 * the bench pass overrides so that the unmodified SDK talks to a fake AWS on 127.0.0.1 quickly.
 * No SDK import here: this module is loaded with the provider's index.
 */
import type { Clock, Sleep } from '../../lib/clock.js';

export type AwsService = 'ec2' | 'elbv2' | 'autoscaling' | 'iam';

/** One API call as the instrumentation sees it (bench: attribute calls to tasks of the create graph). */
export interface AwsApiCall {
  service: AwsService;
  operation: string;
  /** The create/terminate step that made the call, when it ran inside one. */
  task?: string;
  /** The call polls a long-running operation (waiter) rather than doing work. */
  waiting: boolean;
}

/** A type alias (not an interface) so it is assignable to the contract's Record<string, unknown>. */
export type AwsProviderOptions = {
  /** Region when no recorded resource names one (terminate/list of an empty workspace, node side). */
  region?: string;
  /** The AMI nodes added later boot (addInstance: an upgrade's replacements); the CLI passes the config's image. */
  image?: string;
  /** The cluster's uid when the journal is empty (terminate with byTag after an interrupted first step). */
  uid?: string;
  /** One endpoint URL for every AWS service (a fake), or one per service. */
  endpoint?: string;
  endpoints?: Partial<Record<AwsService, string>>;
  /** Static credentials instead of the default provider chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** SDK attempts per call (default: the SDK's, 3) and a fixed delay between them instead of the SDK's backoff. */
  maxAttempts?: number;
  retryDelayMs?: number;
  /** Waiter polling in seconds (defaults: 5 to 30, at most 20 minutes). */
  waiter?: { minDelaySeconds?: number; maxDelaySeconds?: number; maxWaitSeconds?: number };
  /** Our own polls (instance replacement) and retries of deletes refused with DependencyViolation. */
  pollIntervalMs?: number;
  dependencyRetries?: number;
  /** How long create retries a `*.NotFound` for a resource it made moments ago (EC2 eventual consistency); default 2 minutes. */
  consistencyTimeoutMs?: number;
  /** How long create waits for the auto scaling groups to run their desired capacity (default 20 minutes). */
  capacityTimeoutMs?: number;
  /** Time and waiting of create's capacity wait (tests: a fake clock). */
  clock?: Clock;
  sleep?: Sleep;
  /** Instance metadata service base URL (node side); default AWS_EC2_METADATA_SERVICE_ENDPOINT or 169.254.169.254. */
  imdsEndpoint?: string;
  /** Instrumentation: every API call, as it is sent. */
  onApiCall?: (call: AwsApiCall) => void;
  /** Instrumentation: the create graph's steps and their dependencies, when create starts. */
  onPlan?: (steps: { id: string; deps: string[] }[]) => void;
};
