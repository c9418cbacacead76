/**
 * `iam create azure` / `iam destroy`: the identity Azure nodes run as. Makes (unless it exists) the cluster's
 * resource group, a user-assigned managed identity in it, and role assignments of that identity on the resource
 * group: Virtual Machine Contributor (the scale sets the nodes and the cloud controller manager read) and Network
 * Contributor (load balancers and the security group the cloud controller manager manages for Services). Every resource is recorded as soon as Azure made it;
 * destroy deletes exactly those. Role assignment names are derived from scope, role and principal, so a re-run
 * makes the same assignment again instead of failing with RoleAssignmentExists.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  IamCreateRequest,
  IamCreateResult,
  IamPermissionChange,
  IamProvisioner,
  ProviderContext,
} from '../contract.js';
import { permissionChange } from '../common/permission-diff.js';
import { UserError } from '../../lib/errors.js';
import { createIamClients, resolveCredential, type AzureIamClients } from './clients.js';
import { deleteAll, isAzureKind } from './deletion.js';
import { azureErrorDetails, toUserError } from './errors.js';
import { ARM_SCOPE, type AzureProviderOptions } from './options.js';
import { parseResourceId, resourceGroupId, resourceId } from './plan.js';
import { ensureRegistered, IAM_NAMESPACES } from './resource-providers.js';

/** Built-in Azure role definition ids (the same in every tenant). */
export const NODE_ROLES = [
  { name: 'Virtual Machine Contributor', id: '9980e02c-c2be-4d73-94e8-173b1dc7cf3c' },
  { name: 'Network Contributor', id: '4d97b98b-1d4f-4787-a291-c67834d212e7' },
] as const;

const IAM_KINDS = new Set(['azure:resource-group', 'azure:user-assigned-identity', 'azure:role-assignment']);

/** A UUID (the format role assignment names must have) derived from the given parts. */
export function deterministicUuid(...parts: string[]): string {
  const hex = createHash('sha256').update(parts.join('\n')).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${((parseInt(hex[16], 16) & 0x3) | 0x8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

function requireField(config: Record<string, unknown>, key: string, flag: string): string {
  const value = config[key];
  if (typeof value !== 'string' || value === '') {
    throw new UserError(`iam create azure needs the ${key}.`, {
      hint: `Pass ${flag} (or set provider.azure.${key} in the config).`,
    });
  }
  return value;
}

/** The tenant id from the token's `tid` claim, when the credential returns a JWT. */
async function tenantOfCredential(options: AzureProviderOptions): Promise<string | undefined> {
  try {
    const token = await (await resolveCredential(options)).getToken(ARM_SCOPE);
    const payload = token?.token.split('.')[1];
    if (!payload) return undefined;
    const tid = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { tid?: unknown }).tid;
    return typeof tid === 'string' ? tid : undefined;
  } catch {
    return undefined;
  }
}

export class AzureIam implements IamProvisioner {
  constructor(private readonly options: AzureProviderOptions = {}) {}

  async create(request: IamCreateRequest, ctx: ProviderContext): Promise<IamCreateResult> {
    const config = request.providerConfig;
    const subscription = requireField(config, 'subscription', '--subscription');
    const location = requireField(config, 'location', '--location');
    const resourceGroup =
      typeof config.resourceGroup === 'string' && config.resourceGroup ? config.resourceGroup : `${request.prefix}-rg`;
    const clients = await createIamClients(subscription, this.options);
    const tags = { 'constellation-iam': request.prefix };
    const rgId = resourceGroupId(subscription, resourceGroup);
    const recorded = new Set((await ctx.journal.list()).map((r) => r.id.toLowerCase()));

    try {
      await ensureRegistered(clients.resources, IAM_NAMESPACES, ctx, {
        sleep: this.options.sleep,
        pollIntervalMs: this.options.registrationPollMs,
      });
      ctx.progress?.(`resource group ${resourceGroup}`);
      if (
        recorded.has(rgId.toLowerCase()) ||
        !(await clients.resources.resourceGroups.checkExistence(resourceGroup)).body
      ) {
        await clients.resources.resourceGroups.createOrUpdate(resourceGroup, { location, tags });
        await ctx.journal.record({ kind: 'azure:resource-group', id: rgId, name: resourceGroup });
      }

      const identityName =
        typeof config.identityName === 'string' && config.identityName
          ? config.identityName
          : `${request.prefix}-nodes`;
      ctx.progress?.(`managed identity ${identityName}`);
      const identity = await clients.msi.userAssignedIdentities.createOrUpdate(resourceGroup, identityName, {
        location,
        tags,
      });
      const identityId =
        identity.id ?? resourceId(subscription, resourceGroup, 'azure:user-assigned-identity', identityName);
      await ctx.journal.record({
        kind: 'azure:user-assigned-identity',
        id: identityId,
        name: identityName,
        dependsOn: [rgId],
      });
      if (!identity.principalId) throw new UserError(`Azure returned no principal id for identity ${identityName}.`);

      await Promise.all(
        NODE_ROLES.map((role) =>
          this.assignRole(clients, ctx, {
            subscription,
            scope: rgId,
            role,
            principalId: identity.principalId!,
            identityId,
          }),
        ),
      );

      const tenant =
        (typeof config.tenant === 'string' && config.tenant) ||
        identity.tenantId ||
        (await tenantOfCredential(this.options));
      return {
        configUpdates: {
          subscription,
          ...(tenant ? { tenant } : {}),
          location,
          resourceGroup,
          userAssignedIdentity: identityId,
        },
      };
    } catch (err) {
      throw toUserError(err, 'creating the Azure identities');
    }
  }

  /** Assigns a role, retrying while a new identity has not yet replicated to Azure AD (PrincipalNotFound). */
  private async assignRole(
    clients: AzureIamClients,
    ctx: ProviderContext,
    p: {
      subscription: string;
      scope: string;
      role: (typeof NODE_ROLES)[number];
      principalId: string;
      identityId: string;
    },
  ): Promise<void> {
    const name = deterministicUuid(p.scope, p.role.id, p.principalId);
    const id = `${p.scope}/providers/Microsoft.Authorization/roleAssignments/${name}`;
    const attempts = this.options.principalRetries ?? 12;
    ctx.progress?.(`role assignment ${p.role.name}`);
    for (let attempt = 1; ; attempt++) {
      try {
        await clients.authorization.roleAssignments.create(p.scope, name, {
          roleDefinitionId: `/subscriptions/${p.subscription}/providers/Microsoft.Authorization/roleDefinitions/${p.role.id}`,
          principalId: p.principalId,
          principalType: 'ServicePrincipal',
          description: `constellation: ${p.role.name} for the nodes' identity`,
        });
        break;
      } catch (err) {
        if (azureErrorDetails(err).code !== 'PrincipalNotFound' || attempt >= attempts) throw err;
        ctx.log.debug('azure: identity not replicated yet, retrying role assignment', { attempt });
        await sleep(this.options.principalRetryDelayMs ?? 5000, undefined, { signal: ctx.signal });
      }
    }
    await ctx.journal.record({
      kind: 'azure:role-assignment',
      id,
      name: p.role.name,
      dependsOn: [p.identityId, p.scope],
    });
  }

  /**
   * The role assignments iam create recorded for the nodes' identity, against NODE_ROLES on the resource group; with
   * `apply` the missing ones are assigned and the ones this CLI no longer gives are deleted.
   */
  async upgrade(ctx: ProviderContext, options: { apply: boolean }): Promise<IamPermissionChange[]> {
    const records = await ctx.journal.list();
    const identity = records.find((r) => r.kind === 'azure:user-assigned-identity');
    if (!identity) return [];
    const assignments = records.filter((r) => r.kind === 'azure:role-assignment');
    const change = permissionChange(
      identity.name ?? identity.id,
      assignments.map((r) => r.name ?? ''),
      NODE_ROLES.map((r) => r.name),
    );
    if (!change || !options.apply) return change ? [change] : [];
    const { subscription, resourceGroup, name } = parseResourceId(identity.id);
    const clients = await createIamClients(subscription, this.options);
    try {
      const principalId = (await clients.msi.userAssignedIdentities.get(resourceGroup, name)).principalId;
      if (!principalId) throw new UserError(`Azure returned no principal id for identity ${name}.`);
      const scope = resourceGroupId(subscription, resourceGroup);
      for (const role of NODE_ROLES.filter((r) => change.add.includes(r.name))) {
        await this.assignRole(clients, ctx, { subscription, scope, role, principalId, identityId: identity.id });
      }
      for (const record of assignments.filter((r) => change.remove.includes(r.name ?? ''))) {
        ctx.progress?.(`removing role assignment ${record.name ?? record.id}`);
        await clients.authorization.roleAssignments.deleteById(record.id);
        await ctx.journal.remove(record.id);
      }
    } catch (err) {
      throw toUserError(err, "updating the Azure identity's role assignments");
    }
    return [change];
  }

  async destroy(ctx: ProviderContext): Promise<void> {
    const recorded = (await ctx.journal.list()).filter((r) => IAM_KINDS.has(r.kind) && isAzureKind(r.kind));
    if (recorded.length === 0) return;
    const clients = await createIamClients(parseResourceId(recorded[0].id).subscription, this.options);
    await deleteAll(recorded, new Set(recorded.map((r) => r.id)), {
      clients,
      journal: ctx.journal,
      pollIntervalMs: this.options.pollIntervalMs,
      signal: ctx.signal,
      progress: ctx.progress,
    });
  }
}
