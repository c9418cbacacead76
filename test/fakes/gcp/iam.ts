/**
 * The fake IAM (iam.googleapis.com/v1) and Resource Manager (cloudresourcemanager.googleapis.com/v1) APIs,
 * as far as `iam create gcp` / `iam destroy` use them: service accounts and their keys, custom roles, and the
 * project IAM policy with etag-checked setIamPolicy. Like IAM, a new service account is not visible at once:
 * with `propagationRequests` n, the next n requests that need it (a GET of it, a setIamPolicy binding it) are
 * answered as if it did not exist (404 NOT_FOUND; 400 INVALID_ARGUMENT "Service account ... does not exist.").
 */
import { randomBytes } from 'node:crypto';
import { HttpError, json, type FakeRequest, type FakeResponse } from './http.js';

interface Policy {
  version: number;
  etag: string;
  bindings: { role: string; members: string[] }[];
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
    if (policy && req.method === 'POST') return this.policy(policy[1]!, policy[2] === 'setIamPolicy', req.body as { policy?: Policy });
    const m = /^\/v1\/projects\/([^/]+)\/(serviceAccounts|roles)(?:\/([^/]+))?(?:\/keys(?:\/([^/]+))?)?$/.exec(req.path);
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
      if (!/^[a-z]([-a-z0-9]{4,28}[a-z0-9])$/.test(accountId)) throw new HttpError(400, `Invalid accountId ${accountId}`, undefined, 'INVALID_ARGUMENT');
      const email = `${accountId}@${project}.iam.gserviceaccount.com`;
      if (this.serviceAccounts.has(email)) throw new HttpError(409, `Service account ${accountId} already exists within project projects/${project}.`, undefined, 'ALREADY_EXISTS');
      const account = { name: `projects/${project}/serviceAccounts/${email}`, projectId: project, uniqueId: String(Date.now()), email, ...body.serviceAccount };
      this.serviceAccounts.set(email, account);
      if (this.propagationRequests > 0) this.propagating.set(email, this.propagationRequests);
      return json(account);
    }
    const email = decodeURIComponent(id ?? '');
    const account = this.serviceAccounts.get(email);
    if (!account || this.stillPropagating(email)) throw new HttpError(404, `Unknown service account`, undefined, 'NOT_FOUND');
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
    if (!this.serviceAccounts.has(email)) throw new HttpError(404, `Service account ${email} does not exist.`, undefined, 'NOT_FOUND');
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
      return json({ name, privateKeyType: 'TYPE_GOOGLE_CREDENTIALS_FILE', keyAlgorithm: 'KEY_ALG_RSA_2048', privateKeyData: Buffer.from(JSON.stringify(file)).toString('base64') });
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
      if (this.roles.has(name)) throw new HttpError(409, `A role named ${body.roleId} in projects/${project} already exists.`, undefined, 'ALREADY_EXISTS');
      const role = { name, ...body.role, etag: randomBytes(6).toString('base64') };
      this.roles.set(name, role);
      return json(role);
    }
    const name = `projects/${project}/roles/${id}`;
    const role = this.roles.get(name);
    if (!role) throw new HttpError(404, `The role named ${name} was not found.`, undefined, 'NOT_FOUND');
    if (req.method === 'GET') return json(role);
    if (req.method === 'DELETE') {
      this.roles.delete(name);
      return json({ ...role, deleted: true });
    }
    throw new HttpError(405, 'Method not allowed');
  }

  private policy(project: string, set: boolean, body: { policy?: Policy }): FakeResponse {
    const current = this.policies.get(project) ?? { version: 1, etag: 'BwAAAA==', bindings: [] };
    if (!set) return json(current);
    const next = body.policy;
    if (!next) throw new HttpError(400, 'policy is required', undefined, 'INVALID_ARGUMENT');
    for (const member of (next.bindings ?? []).flatMap((b) => b.members)) {
      const email = member.replace(/^serviceAccount:/, '');
      if (member.startsWith('serviceAccount:') && this.stillPropagating(email)) {
        throw new HttpError(400, `Service account ${email} does not exist.`, 'badRequest', 'INVALID_ARGUMENT');
      }
    }
    if (next.etag !== current.etag) throw new HttpError(409, 'There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.', undefined, 'ABORTED');
    const stored = { version: next.version ?? 1, bindings: (next.bindings ?? []).filter((b) => b.members.length > 0), etag: randomBytes(6).toString('base64') };
    this.policies.set(project, stored);
    return json(stored);
  }
}
