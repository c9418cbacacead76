/**
 * The fake IAM (iam.googleapis.com/v1) and Resource Manager (cloudresourcemanager.googleapis.com/v1) APIs,
 * as far as `iam create gcp` / `iam destroy` use them: service accounts and their keys, custom roles, and the
 * project IAM policy with etag-checked setIamPolicy. Like IAM, a new service account is not visible at once:
 * with `propagationRequests` n, the next n requests that need it (a GET of it, a setIamPolicy binding it) are
 * answered as if it did not exist (404 NOT_FOUND; 400 INVALID_ARGUMENT "Service account ... does not exist.").
 *
 * Custom roles are soft-deleted, as IAM does (https://cloud.google.com/iam/docs/creating-custom-roles#deleting-custom-role):
 * a deleted role stays readable with `deleted: true` and its ID cannot be used for a new role (400 FAILED_PRECONDITION)
 * until it is purged (37 days); it can be undeleted (POST roles/ID:undelete with its etag) and patched.
 * Policy versions (https://cloud.google.com/iam/docs/policies#versions): a policy holding conditional role bindings is
 * version 3; read with a lower requestedPolicyVersion it comes back as version 1 with those bindings' roles renamed
 * ROLE_withcond_HASH and without their conditions, and setIamPolicy refuses such roles or conditions at a version
 * below 3 (400 INVALID_ARGUMENT), so a writer that did not read version 3 cannot drop them silently.
 */
import { randomBytes } from 'node:crypto';
import { HttpError, json, type FakeRequest, type FakeResponse } from './http.js';

interface Policy {
  version: number;
  etag: string;
  bindings: { role: string; members: string[]; condition?: { title: string; expression: string } }[];
}

export class FakeIam {
  readonly serviceAccounts = new Map<string, Record<string, unknown>>();
  readonly keys = new Map<string, { account: string; name: string }>();
  readonly roles = new Map<string, Record<string, unknown>>();
  readonly policies = new Map<string, Policy>();
  /** How many requests a new service account stays invisible to (see the module header). */
  propagationRequests = 0;
  private readonly propagating = new Map<string, number>();

  reset(): void {
    this.propagationRequests = 0;
    this.propagating.clear();
    this.serviceAccounts.clear();
    this.keys.clear();
    this.roles.clear();
    this.policies.clear();
  }

  handle(req: FakeRequest): FakeResponse | undefined {
    const policy = /^\/v1\/projects\/([^/:]+):(getIamPolicy|setIamPolicy)$/.exec(req.path);
    if (policy && req.method === 'POST')
      return this.policy(
        policy[1]!,
        policy[2] === 'setIamPolicy',
        req.body as { policy?: Policy; options?: { requestedPolicyVersion?: number } },
      );
    const undelete = /^\/v1\/projects\/([^/]+)\/roles\/([^/:]+):undelete$/.exec(req.path);
    if (undelete && req.method === 'POST')
      return this.undeleteRole(undelete[1]!, undelete[2]!, req.body as { etag?: string });
    const m = /^\/v1\/projects\/([^/]+)\/(serviceAccounts|roles)(?:\/([^/]+))?(?:\/keys(?:\/([^/]+))?)?$/.exec(
      req.path,
    );
    if (!m) return undefined;
    const [, project, collection, id, keyId] = m;
    const isKeys = req.path.includes('/keys');
    if (collection === 'roles') return this.role(req, project!, id);
    if (isKeys) return this.key(req, project!, id!, keyId);
    return this.account(req, project!, id);
  }

  private account(req: FakeRequest, project: string, id: string | undefined): FakeResponse {
    if (!id && req.method === 'POST') {
      const body = req.body as { accountId?: string; serviceAccount?: { displayName?: string; description?: string } };
      const accountId = body.accountId ?? '';
      if (!/^[a-z]([-a-z0-9]{4,28}[a-z0-9])$/.test(accountId))
        throw new HttpError(400, `Invalid accountId ${accountId}`, undefined, 'INVALID_ARGUMENT');
      const email = `${accountId}@${project}.iam.gserviceaccount.com`;
      if (this.serviceAccounts.has(email))
        throw new HttpError(
          409,
          `Service account ${accountId} already exists within project projects/${project}.`,
          undefined,
          'ALREADY_EXISTS',
        );
      const account = {
        name: `projects/${project}/serviceAccounts/${email}`,
        projectId: project,
        uniqueId: String(Date.now()),
        email,
        ...body.serviceAccount,
      };
      this.serviceAccounts.set(email, account);
      if (this.propagationRequests > 0) this.propagating.set(email, this.propagationRequests);
      return json(account);
    }
    const email = decodeURIComponent(id ?? '');
    const account = this.serviceAccounts.get(email);
    if (!account || this.stillPropagating(email))
      throw new HttpError(404, `Unknown service account`, undefined, 'NOT_FOUND');
    if (req.method === 'GET') return json(account);
    if (req.method === 'DELETE') {
      this.serviceAccounts.delete(email);
      for (const [k, v] of this.keys) if (v.account === email) this.keys.delete(k);
      return json({});
    }
    throw new HttpError(405, 'Method not allowed');
  }

  /** True (and one request fewer to go) while a new account is not visible yet. */
  private stillPropagating(email: string): boolean {
    const left = this.propagating.get(email) ?? 0;
    if (left <= 0) return false;
    this.propagating.set(email, left - 1);
    return true;
  }

  private key(req: FakeRequest, project: string, id: string, keyId: string | undefined): FakeResponse {
    const email = decodeURIComponent(id);
    if (!this.serviceAccounts.has(email))
      throw new HttpError(404, `Service account ${email} does not exist.`, undefined, 'NOT_FOUND');
    if (!keyId && req.method === 'POST') {
      const newId = randomBytes(20).toString('hex');
      const name = `projects/${project}/serviceAccounts/${email}/keys/${newId}`;
      this.keys.set(newId, { account: email, name });
      const file = {
        type: 'service_account',
        project_id: project,
        private_key_id: newId,
        private_key: '-----BEGIN PRIVATE KEY-----\nZmFrZQ==\n-----END PRIVATE KEY-----\n',
        client_email: email,
      };
      return json({
        name,
        privateKeyType: 'TYPE_GOOGLE_CREDENTIALS_FILE',
        keyAlgorithm: 'KEY_ALG_RSA_2048',
        privateKeyData: Buffer.from(JSON.stringify(file)).toString('base64'),
      });
    }
    if (keyId && req.method === 'DELETE') {
      if (!this.keys.delete(keyId)) throw new HttpError(404, `Key ${keyId} does not exist.`, undefined, 'NOT_FOUND');
      return json({});
    }
    throw new HttpError(405, 'Method not allowed');
  }

  private role(req: FakeRequest, project: string, id: string | undefined): FakeResponse {
    if (!id && req.method === 'POST') {
      const body = req.body as { roleId?: string; role?: Record<string, unknown> };
      const name = `projects/${project}/roles/${body.roleId}`;
      if (this.roles.get(name)?.deleted) {
        throw new HttpError(
          400,
          `You can't create a role with role_id (${body.roleId}) where there is an existing role with that role_id in a deleted state.`,
          undefined,
          'FAILED_PRECONDITION',
        );
      }
      if (this.roles.has(name))
        throw new HttpError(
          409,
          `A role named ${body.roleId} in projects/${project} already exists.`,
          undefined,
          'ALREADY_EXISTS',
        );
      const role = { name, ...body.role, etag: randomBytes(6).toString('base64') };
      this.roles.set(name, role);
      return json(role);
    }
    const name = `projects/${project}/roles/${id}`;
    const role = this.roles.get(name);
    if (!role) throw new HttpError(404, `The role named ${name} was not found.`, undefined, 'NOT_FOUND');
    if (req.method === 'GET') return json(role);
    if (req.method === 'DELETE') {
      if (role.deleted) throw new HttpError(400, `Role ${name} is already deleted.`, undefined, 'FAILED_PRECONDITION');
      Object.assign(role, { deleted: true, etag: randomBytes(6).toString('base64') });
      return json(role);
    }
    if (req.method === 'PATCH') {
      if (role.deleted)
        throw new HttpError(400, `You can't update a deleted role (${name}).`, undefined, 'FAILED_PRECONDITION');
      const mask = (req.query.get('updateMask') ?? '').split(',').filter(Boolean);
      const patch = req.body as Record<string, unknown>;
      for (const field of mask) if (field in patch) role[field] = patch[field];
      role.etag = randomBytes(6).toString('base64');
      return json(role);
    }
    throw new HttpError(405, 'Method not allowed');
  }

  private undeleteRole(project: string, id: string, body: { etag?: string }): FakeResponse {
    const name = `projects/${project}/roles/${id}`;
    const role = this.roles.get(name);
    if (!role) throw new HttpError(404, `The role named ${name} was not found.`, undefined, 'NOT_FOUND');
    if (!role.deleted) throw new HttpError(400, `Role ${name} is not deleted.`, undefined, 'FAILED_PRECONDITION');
    if (body.etag !== undefined && body.etag !== role.etag)
      throw new HttpError(409, 'The etag does not match.', undefined, 'ABORTED');
    delete role.deleted;
    role.etag = randomBytes(6).toString('base64');
    return json(role);
  }

  /** A role the test deleted earlier (soft, as IAM does): its ID is blocked until undeleted. */
  softDeleteRole(name: string, role: Record<string, unknown>): void {
    this.roles.set(name, { name, ...role, deleted: true, etag: randomBytes(6).toString('base64') });
  }

  private policy(
    project: string,
    set: boolean,
    body: { policy?: Policy; options?: { requestedPolicyVersion?: number } },
  ): FakeResponse {
    const current = this.policies.get(project) ?? { version: 1, etag: 'BwAAAA==', bindings: [] };
    if (!set) {
      if ((body.options?.requestedPolicyVersion ?? 1) >= 3 || !current.bindings.some((b) => b.condition))
        return json(current);
      return json({
        version: 1,
        etag: current.etag,
        bindings: current.bindings.map((b) =>
          b.condition ? { role: `${b.role}_withcond_${randomBytes(10).toString('hex')}`, members: b.members } : b,
        ),
      });
    }
    const next = body.policy;
    if (!next) throw new HttpError(400, 'policy is required', undefined, 'INVALID_ARGUMENT');
    if ((next.bindings ?? []).some((b) => b.role.includes('_withcond_'))) {
      throw new HttpError(
        400,
        'Role (_withcond_) does not exist: a policy read at version 1 cannot be written back while it has conditional bindings.',
        undefined,
        'INVALID_ARGUMENT',
      );
    }
    if ((next.version ?? 1) < 3 && (next.bindings ?? []).some((b) => b.condition)) {
      throw new HttpError(400, 'Conditions can be used only with policy version 3.', undefined, 'INVALID_ARGUMENT');
    }
    for (const member of (next.bindings ?? []).flatMap((b) => b.members)) {
      const email = member.replace(/^serviceAccount:/, '');
      if (member.startsWith('serviceAccount:') && this.stillPropagating(email)) {
        throw new HttpError(400, `Service account ${email} does not exist.`, 'badRequest', 'INVALID_ARGUMENT');
      }
    }
    if (next.etag !== current.etag)
      throw new HttpError(
        409,
        'There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.',
        undefined,
        'ABORTED',
      );
    const bindings = (next.bindings ?? []).filter((b) => b.members.length > 0);
    const stored = {
      version: bindings.some((b) => b.condition) ? 3 : (next.version ?? 1),
      bindings,
      etag: randomBytes(6).toString('base64'),
    };
    this.policies.set(project, stored);
    return json(stored);
  }
}
