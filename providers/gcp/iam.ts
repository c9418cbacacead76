/**
 * `iam create gcp` / `iam destroy` (IamProvisioner): the identities a GCP cluster needs, made through the IAM
 * and Resource Manager REST APIs with the auth client of the Compute SDK (no IAM client library is in the
 * dependency set; google-auth-library's request() is the official transport for these APIs):
 *
 *   cluster service account (PREFIX-sa) ── key (the CLI's credentials file, gcpServiceAccountKey.json)
 *            │                                 and project roles to manage instances, networks, disks
 *   node service account (PREFIX-vm) ─── custom role PREFIX_node (read instances, groups, load balancer,
 *                                         shielded-VM identities) and log writing, bound on the project
 *
 * Every resource is journaled when GCP accepted it; bindings are journaled before the policy is written (a
 * removal of a binding that never landed is harmless). IAM makes a new service account visible only after a
 * while (a policy naming it is refused with "Service account ... does not exist."), so the bindings wait until
 * both accounts can be read, and a policy write refused for that reason is tried again (on the injectable sleep
 * of the options). destroy deletes what was journaled, in reverse order.
 * The key's private data goes only into the returned file, never into the journal or a log.
 */
import { realSleep } from '../../lib/clock.js';
import { UserError } from '../../lib/errors.js';
import type {
  IamCreateRequest,
  IamCreateResult,
  IamPermissionChange,
  IamProvisioner,
  ProviderContext,
  RecordedResource,
} from '../contract.js';
import { permissionChange } from '../common/permission-diff.js';
import { deleteInReverseDependencyOrder } from '../common/delete-order.js';
import { runTaskGraph, TaskGraphError } from '../common/task-graph.js';
import { GcpCompute, type RestAuthClient } from './clients.js';
import { gcpErrorInfo, isAlreadyExists, isNotFound, toUserError } from './errors.js';
import { DEFAULT_RETRY, type GcpProviderOptions } from './options.js';
import { gcpName } from './plan.js';
import { withRetry, type RetryPolicy } from './retry.js';

export const KEY_FILE = 'gcpServiceAccountKey.json';

/** What the CLI's service account needs to create and delete a cluster. */
export const CLUSTER_ROLES = [
  'roles/compute.instanceAdmin.v1',
  'roles/compute.networkAdmin',
  'roles/compute.securityAdmin',
  'roles/compute.storageAdmin',
  'roles/iam.serviceAccountUser',
] as const;

/** What a node asks the Compute API (peers, load balancer, join service's attestation checks). */
export const NODE_PERMISSIONS = [
  'compute.instances.get',
  'compute.instances.list',
  'compute.instances.getShieldedInstanceIdentity',
  'compute.instanceGroupManagers.get',
  'compute.instanceGroupManagers.list',
  'compute.addresses.get',
  'compute.addresses.list',
  'compute.forwardingRules.get',
  'compute.forwardingRules.list',
  'compute.globalAddresses.get',
  'compute.globalForwardingRules.get',
  'compute.globalForwardingRules.list',
  'compute.zones.list',
] as const;
const NODE_EXTRA_ROLES = ['roles/logging.logWriter'] as const;

const KIND = {
  serviceAccount: 'gcp:iam-service-account',
  role: 'gcp:iam-role',
  binding: 'gcp:iam-binding',
  key: 'gcp:iam-key',
} as const;

const POLICY_ATTEMPTS = 8;
/** https://cloud.google.com/iam/docs/policies#versions: the only version that keeps conditional role bindings. */
const POLICY_VERSION = 3;
/** How long to wait for a new service account to become visible: attempts, first delay, cap (about 2 minutes). */
const VISIBILITY = { attempts: 20, baseDelayMs: 500, maxDelayMs: 8000 };

interface Policy {
  version?: number;
  etag?: string;
  bindings?: { role: string; members: string[]; condition?: unknown }[];
}

interface Endpoints {
  iam: string;
  resourceManager: string;
}

export class GcpIam implements IamProvisioner {
  constructor(private readonly options: GcpProviderOptions = {}) {}

  async create(request: IamCreateRequest, ctx: ProviderContext): Promise<IamCreateResult> {
    const project = request.providerConfig.project;
    if (typeof project !== 'string' || project === '') {
      throw new UserError('iam create gcp needs the GCP project.', {
        hint: 'Pass --projectID (or set provider.gcp.project in the config).',
      });
    }
    const prefix = gcpName(request.prefix).slice(0, 24).replace(/-+$/, '');
    if (!/^[a-z][-a-z0-9]{2,}$/.test(prefix)) {
      throw new UserError(`The prefix "${request.prefix}" cannot name GCP service accounts.`, {
        hint: 'Use 3 to 24 lowercase letters, digits and dashes, starting with a letter.',
      });
    }
    const rest = await this.rest(ctx);
    const clusterId = `${prefix}-sa`;
    const nodeId = `${prefix}-vm`;
    const roleId = `${prefix.replace(/-/g, '_')}_node`;
    const clusterEmail = `${clusterId}@${project}.iam.gserviceaccount.com`;
    const nodeEmail = `${nodeId}@${project}.iam.gserviceaccount.com`;
    const roleName = `projects/${project}/roles/${roleId}`;
    const accountId = (email: string) => `projects/${project}/serviceAccounts/${email}`;
    const bindings = [
      ...CLUSTER_ROLES.map((role) => ({
        role,
        member: `serviceAccount:${clusterEmail}`,
        deps: [accountId(clusterEmail)],
      })),
      { role: roleName, member: `serviceAccount:${nodeEmail}`, deps: [accountId(nodeEmail), roleName] },
      ...NODE_EXTRA_ROLES.map((role) => ({
        role,
        member: `serviceAccount:${nodeEmail}`,
        deps: [accountId(nodeEmail)],
      })),
    ];
    let keyContent = '';

    const tasks = [
      {
        id: 'cluster-account',
        deps: [],
        run: () =>
          this.ensureAccount(rest, ctx, project, clusterId, 'Constellation: creates and manages the cluster (the CLI)'),
      },
      {
        id: 'node-account',
        deps: [],
        run: () => this.ensureAccount(rest, ctx, project, nodeId, 'Constellation: the nodes'),
      },
      { id: 'node-role', deps: [], run: () => this.ensureRole(rest, ctx, project, roleId) },
      {
        id: 'bindings',
        deps: ['cluster-account', 'node-account', 'node-role'],
        run: () => this.addBindings(rest, ctx, project, bindings),
      },
      {
        id: 'key',
        deps: ['cluster-account'],
        run: async () => {
          keyContent = await this.createKey(rest, ctx, project, clusterEmail);
        },
      },
    ];
    try {
      await runTaskGraph(tasks, { signal: ctx.signal });
    } catch (err) {
      const cause = err instanceof TaskGraphError ? err.cause : err;
      const userError = toUserError('Creating the GCP identities', cause);
      throw new UserError(userError.message, {
        hint: `${userError.hint ? `${userError.hint} ` : ''}Run \`constellation iam create gcp\` again to continue, or \`constellation iam destroy\` to delete what was made.`,
        cause,
      });
    }
    const { region, zone } = request.providerConfig;
    return {
      configUpdates: {
        project,
        ...(typeof region === 'string' && region ? { region } : {}),
        ...(typeof zone === 'string' && zone ? { zone } : {}),
        serviceAccountKeyPath: KEY_FILE,
        IAMServiceAccountVM: nodeEmail,
      },
      files: [{ name: KEY_FILE, content: keyContent }],
    };
  }

  /**
   * The nodes' custom role iam create recorded, against NODE_PERMISSIONS; with `apply` it is patched to them (the
   * role's ID and its binding stay). The project role bindings are not compared: this CLI has not changed them.
   */
  async upgrade(ctx: ProviderContext, options: { apply: boolean }): Promise<IamPermissionChange[]> {
    const roles = (await ctx.journal.list()).filter((r) => r.kind === KIND.role);
    if (roles.length === 0) return [];
    const rest = await this.rest(ctx);
    const changes: IamPermissionChange[] = [];
    for (const record of roles) {
      const url = `${rest.endpoints.iam}/v1/${record.id}`;
      let role: { includedPermissions?: string[]; deleted?: boolean };
      try {
        role = await rest.call('GET', url);
      } catch (err) {
        throw toUserError(`Reading the custom role ${record.name ?? record.id}`, err);
      }
      if (role.deleted) {
        throw new UserError(`The custom role ${record.id} is deleted.`, {
          hint: 'Run `constellation iam destroy` and `constellation iam create gcp` again.',
        });
      }
      const change = permissionChange(record.id, role.includedPermissions ?? [], NODE_PERMISSIONS);
      if (!change) continue;
      changes.push(change);
      if (options.apply) {
        ctx.progress?.(`updating custom role ${record.name ?? record.id}`);
        try {
          await rest.call('PATCH', `${url}?updateMask=includedPermissions`, {
            includedPermissions: [...NODE_PERMISSIONS],
          });
        } catch (err) {
          throw toUserError(`Updating the custom role ${record.name ?? record.id}`, err);
        }
      }
    }
    return changes;
  }

  async destroy(ctx: ProviderContext): Promise<void> {
    const records = (await ctx.journal.list()).filter((r) => (Object.values(KIND) as string[]).includes(r.kind));
    if (records.length === 0) return;
    const rest = await this.rest(ctx);
    try {
      // Each record is deleted after every record that depends on it; a failure skips only those.
      await deleteInReverseDependencyOrder(records, {
        deleteOne: (r) => this.deleteRecorded(rest, ctx, r),
        journal: ctx.journal,
        onFailure: 'skip-dependents',
        signal: ctx.signal,
      });
    } catch (err) {
      if (!(err instanceof TaskGraphError)) throw err;
      if (err.task === '(aborted)') throw err.cause;
      const messages = err.failures.map((f) => toUserError(`Deleting ${f.task}`, f.error).message);
      throw new UserError(`Deleting the GCP identities failed: ${messages.join('; ')}`, {
        hint: 'Run `constellation iam destroy` again: the workspace still lists what is left.',
        cause: err,
      });
    }
  }

  private async rest(ctx: ProviderContext): Promise<RestApi> {
    const api = await GcpCompute.open(this.options, this.options.keyFilename);
    const endpoints = {
      iam: (this.options.iamEndpoint ?? 'https://iam.googleapis.com').replace(/\/$/, ''),
      resourceManager: (this.options.resourceManagerEndpoint ?? 'https://cloudresourcemanager.googleapis.com').replace(
        /\/$/,
        '',
      ),
    };
    return new RestApi(await api.authClient(), endpoints, { ...DEFAULT_RETRY, ...this.options.retry }, ctx.signal);
  }

  private async ensureAccount(
    rest: RestApi,
    ctx: ProviderContext,
    project: string,
    accountId: string,
    description: string,
  ): Promise<void> {
    const email = `${accountId}@${project}.iam.gserviceaccount.com`;
    ctx.progress?.(`creating service account ${email}`);
    try {
      await rest.call('POST', `${rest.endpoints.iam}/v1/projects/${project}/serviceAccounts`, {
        accountId,
        serviceAccount: { displayName: accountId, description },
      });
    } catch (err) {
      if (!isAlreadyExists(err)) throw toUserError(`Creating service account ${email}`, err);
    }
    await ctx.journal.record({
      kind: KIND.serviceAccount,
      id: `projects/${project}/serviceAccounts/${email}`,
      name: email,
      data: { project, email },
    });
  }

  /**
   * Makes the node role exist with exactly our permissions. A role of that ID may exist already (an earlier run) or be
   * soft-deleted (an earlier `iam destroy`: IAM keeps a deleted role's ID for 37 days and refuses a new role with it):
   * the deleted one is undeleted, and either is patched to our permissions instead of being adopted as it is.
   */
  private async ensureRole(rest: RestApi, ctx: ProviderContext, project: string, roleId: string): Promise<void> {
    ctx.progress?.(`creating custom role ${roleId}`);
    const role = {
      title: `Constellation node (${roleId})`,
      description: 'What Constellation nodes read from the Compute API.',
      includedPermissions: [...NODE_PERMISSIONS],
      stage: 'GA',
    };
    const url = `${rest.endpoints.iam}/v1/projects/${project}/roles/${roleId}`;
    try {
      await rest.call('POST', `${rest.endpoints.iam}/v1/projects/${project}/roles`, { roleId, role });
    } catch (err) {
      if (!isAlreadyExists(err) && !isDeletedRole(err)) throw toUserError(`Creating custom role ${roleId}`, err);
      try {
        const existing = await rest.call<{ deleted?: boolean; etag?: string }>('GET', url);
        if (existing.deleted) {
          ctx.progress?.(`undeleting custom role ${roleId} (deleted earlier; IAM keeps its ID)`);
          await rest.call('POST', `${url}:undelete`, { etag: existing.etag });
        }
        await rest.call('PATCH', `${url}?updateMask=title,description,includedPermissions,stage`, role);
      } catch (inner) {
        throw toUserError(`Updating the existing custom role ${roleId}`, inner);
      }
    }
    await ctx.journal.record({
      kind: KIND.role,
      id: `projects/${project}/roles/${roleId}`,
      name: roleId,
      data: { project },
    });
  }

  private async addBindings(
    rest: RestApi,
    ctx: ProviderContext,
    project: string,
    bindings: { role: string; member: string; deps: string[] }[],
  ): Promise<void> {
    const emails = [...new Set(bindings.map((b) => b.member.replace(/^serviceAccount:/, '')))];
    await Promise.all(
      emails.map((email) =>
        this.untilVisible(
          ctx,
          email,
          () =>
            rest.call(
              'GET',
              `${rest.endpoints.iam}/v1/projects/${project}/serviceAccounts/${encodeURIComponent(email)}`,
            ),
          isNotFound,
        ),
      ),
    );
    ctx.progress?.('granting the service accounts their roles');
    for (const b of bindings) {
      await ctx.journal.record({
        kind: KIND.binding,
        id: `projects/${project}/iamPolicy/${b.role}/${b.member}`,
        dependsOn: b.deps,
        data: { project, role: b.role, member: b.member },
      });
    }
    // Readable is not always bindable yet: a policy write refused because an account "does not exist" is repeated.
    await this.untilVisible(
      ctx,
      emails.join(' and '),
      () =>
        this.updatePolicy(rest, project, (policy) => {
          for (const b of bindings) {
            const binding = (policy.bindings ??= []).find((x) => x.role === b.role);
            if (!binding) policy.bindings.push({ role: b.role, members: [b.member] });
            else if (!binding.members.includes(b.member)) binding.members.push(b.member);
          }
        }),
      isAccountNotVisible,
    );
  }

  /** Runs `call` until it no longer fails with `notVisible`, backing off on the options' sleep. */
  private async untilVisible(
    ctx: ProviderContext,
    what: string,
    call: () => Promise<unknown>,
    notVisible: (err: unknown) => boolean,
  ): Promise<void> {
    const sleep = this.options.sleep ?? realSleep;
    const policy = { ...VISIBILITY, ...this.options.iamVisibility };
    for (let attempt = 1; ; attempt++) {
      try {
        await call();
        return;
      } catch (err) {
        if (!notVisible(err) || attempt >= policy.attempts) throw err;
        if (attempt === 1) ctx.progress?.(`waiting until IAM shows service account ${what}`);
        ctx.log.debug('gcp: service account not visible yet', { what, attempt });
        await sleep(Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1)), ctx.signal);
      }
    }
  }

  private async createKey(rest: RestApi, ctx: ProviderContext, project: string, email: string): Promise<string> {
    // A key's private part is returned only once: a key made by an earlier, interrupted run is useless. Replace it.
    for (const old of (await ctx.journal.list()).filter((r) => r.kind === KIND.key)) {
      await this.deleteRecorded(rest, ctx, old);
      await ctx.journal.remove(old.id);
    }
    ctx.progress?.(`creating a key for ${email}`);
    const accountId = `projects/${project}/serviceAccounts/${email}`;
    let key: { name: string; privateKeyData: string };
    try {
      key = await rest.call(
        'POST',
        `${rest.endpoints.iam}/v1/projects/${project}/serviceAccounts/${encodeURIComponent(email)}/keys`,
        {
          privateKeyType: 'TYPE_GOOGLE_CREDENTIALS_FILE',
          keyAlgorithm: 'KEY_ALG_RSA_2048',
        },
      );
    } catch (err) {
      throw toUserError(`Creating a key for ${email}`, err);
    }
    await ctx.journal.record({ kind: KIND.key, id: key.name, dependsOn: [accountId], data: { project } });
    return Buffer.from(key.privateKeyData, 'base64').toString('utf8');
  }

  /** Read-modify-write of the project's IAM policy, repeated when another writer got in between (etag). */
  private async updatePolicy(rest: RestApi, project: string, change: (policy: Policy) => void): Promise<void> {
    const base = `${rest.endpoints.resourceManager}/v1/projects/${project}`;
    for (let attempt = 1; ; attempt++) {
      try {
        // Version 3 both ways: a policy with conditional bindings read at a lower version comes back with those
        // bindings renamed and unconditional, and writing that back is refused (or, worse, drops the conditions).
        const policy = await rest.call<Policy>('POST', `${base}:getIamPolicy`, {
          options: { requestedPolicyVersion: POLICY_VERSION },
        });
        change(policy);
        policy.version = POLICY_VERSION;
        await rest.call('POST', `${base}:setIamPolicy`, { policy });
        return;
      } catch (err) {
        const { status, reason } = gcpErrorInfo(err);
        if (status === 409 && reason === 'ABORTED' && attempt < POLICY_ATTEMPTS) continue;
        if (isAccountNotVisible(err)) throw err;
        throw toUserError(`Updating the IAM policy of project ${project}`, err);
      }
    }
  }

  private async deleteRecorded(rest: RestApi, ctx: ProviderContext, record: RecordedResource): Promise<void> {
    const project = String(record.data?.project ?? '');
    ctx.progress?.(`deleting ${record.name ?? record.id}`);
    if (record.kind === KIND.binding) {
      const { role, member } = record.data as { role: string; member: string };
      await this.updatePolicy(rest, project, (policy) => {
        for (const b of policy.bindings ?? []) if (b.role === role) b.members = b.members.filter((m) => m !== member);
        policy.bindings = (policy.bindings ?? []).filter((b) => b.members.length > 0);
      });
      return;
    }
    // Service accounts, roles and keys are deleted by their resource name.
    const path = record.id.replace(
      /serviceAccounts\/([^/]+)/,
      (_, email: string) => `serviceAccounts/${encodeURIComponent(email)}`,
    );
    try {
      await rest.call('DELETE', `${rest.endpoints.iam}/v1/${path}`);
    } catch (err) {
      // A role deleted before (IAM keeps it, marked deleted) is as gone as one that does not exist.
      if (!isNotFound(err) && !/already deleted/i.test(gcpErrorInfo(err).message)) throw err;
    }
  }
}

/** IAM refuses a new role whose ID a soft-deleted role still holds: 400 FAILED_PRECONDITION "... in a deleted state." */
function isDeletedRole(err: unknown): boolean {
  const { status, message } = gcpErrorInfo(err);
  return status === 400 && /deleted state/i.test(message);
}

/** IAM refuses a policy naming a service account it does not show yet: 400 "Service account ... does not exist." */
function isAccountNotVisible(err: unknown): boolean {
  const { status, message } = gcpErrorInfo(err);
  return status === 400 && /service account .* does not exist/i.test(message);
}

/** JSON over the auth client, with retries of throttled calls. */
class RestApi {
  constructor(
    private readonly auth: RestAuthClient,
    readonly endpoints: Endpoints,
    private readonly retry: RetryPolicy,
    private readonly signal?: AbortSignal,
  ) {}

  async call<T = unknown>(method: string, url: string, data?: unknown): Promise<T> {
    const response = await withRetry(
      () => this.auth.request<T>({ url, method, ...(data === undefined ? {} : { data }) }),
      this.retry,
      { signal: this.signal },
    );
    return response.data;
  }
}
