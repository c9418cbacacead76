/**
 * `iam create aws` / `iam destroy` (IamProvisioner): per node role (control plane, workers) an IAM role that
 * EC2 instances assume, an inline policy with what the nodes need, and an instance profile holding the role.
 * The profiles' names are what `--update-config` writes to provider.aws.iamProfileControlPlane/WorkerNodes.
 * Every identity is recorded in the journal as it is made; destroy deletes exactly those, in reverse order.
 */
import {
  AddRoleToInstanceProfileCommand,
  CreateInstanceProfileCommand,
  CreateRoleCommand,
  DeleteInstanceProfileCommand,
  DeleteRoleCommand,
  DeleteRolePolicyCommand,
  GetInstanceProfileCommand,
  GetRoleCommand,
  GetRolePolicyCommand,
  PutRolePolicyCommand,
  RemoveRoleFromInstanceProfileCommand,
  waitUntilInstanceProfileExists,
  type GetInstanceProfileCommandOutput,
  type GetRoleCommandOutput,
  type GetRolePolicyCommandOutput,
  type Tag,
} from '@aws-sdk/client-iam';
import { UserError } from '../../lib/errors.js';
import type {
  IamCreateRequest,
  IamCreateResult,
  IamPermissionChange,
  IamProvisioner,
  NodeRole,
  ProviderContext,
  RecordedResource,
} from '../contract.js';
import { permissionChange } from '../common/permission-diff.js';
import { AwsClients } from './clients.js';
import { deleteInReverseOrder } from './delete-order.js';
import { awsErrorCode, CreateFailedError, isNotFound, toUserError } from './errors.js';
import type { AwsProviderOptions } from './options.js';
import { IAM_KIND, isIamResource, recordData } from './resources.js';
import { runTaskGraph, TaskGraphError, type Task } from '../common/task-graph.js';

/** Marks identities made by `iam create` with their prefix, so a re-run can adopt what it made before. */
const PREFIX_TAG = 'constellation-iam-prefix';

const ASSUME_ROLE_POLICY = JSON.stringify({
  Version: '2012-10-17',
  Statement: [{ Effect: 'Allow', Principal: { Service: 'ec2.amazonaws.com' }, Action: 'sts:AssumeRole' }],
});

/** What every node reads: its own and its peers' instances, the load balancer, node images. */
const NODE_ACTIONS = [
  'ec2:DescribeInstances',
  'ec2:DescribeImages',
  'ec2:DescribeRegions',
  'elasticloadbalancing:DescribeLoadBalancers',
  'elasticloadbalancing:DescribeTags',
  'ecr:GetAuthorizationToken',
  'ecr:BatchCheckLayerAvailability',
  'ecr:GetDownloadUrlForLayer',
  'ecr:BatchGetImage',
];

/**
 * The control plane also runs the AWS cloud controller manager (bootstrapper/kubernetes/cloud-controller.ts: its
 * node and node-lifecycle controllers; routes and Services are off), which reads instances, zones and the network
 * and tags instances. Nothing deploys a CSI driver or an autoscaler, so their volume and scaling rights are not
 * granted (`iam upgrade apply` takes them from policies an older CLI made).
 */
const CONTROL_PLANE_ACTIONS = [
  ...NODE_ACTIONS,
  'ec2:DescribeAvailabilityZones',
  'ec2:DescribeRouteTables',
  'ec2:DescribeSecurityGroups',
  'ec2:DescribeSubnets',
  'ec2:DescribeVpcs',
  'ec2:CreateTags',
  'ec2:ModifyInstanceAttribute',
];

/** The actions an IAM policy document allows (IAM returns it URL-encoded). */
export function policyActions(document: string): string[] {
  let text = document;
  try {
    text = decodeURIComponent(document);
  } catch {
    // not encoded
  }
  const parsed = JSON.parse(text) as {
    Statement?: { Effect?: string; Action?: string | string[] }[] | { Effect?: string; Action?: string | string[] };
  };
  const statements = Array.isArray(parsed.Statement) ? parsed.Statement : parsed.Statement ? [parsed.Statement] : [];
  return statements
    .filter((st) => st.Effect === 'Allow')
    .flatMap((st) => (Array.isArray(st.Action) ? st.Action : st.Action ? [st.Action] : []));
}

function policyDocument(actions: string[]): string {
  return JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: actions, Resource: '*' }] });
}

const ROLES: { role: NodeRole; short: string; actions: string[]; configKey: string }[] = [
  {
    role: 'control-plane',
    short: 'control-plane',
    actions: CONTROL_PLANE_ACTIONS,
    configKey: 'iamProfileControlPlane',
  },
  { role: 'worker', short: 'worker', actions: NODE_ACTIONS, configKey: 'iamProfileWorkerNodes' },
];

export class AwsIam implements IamProvisioner {
  constructor(private readonly options: AwsProviderOptions = {}) {}

  async create(request: IamCreateRequest, ctx: ProviderContext): Promise<IamCreateResult> {
    const prefix = request.prefix;
    // Role names: at most 64 characters of [\w+=,.@-]; "-control-plane-profile" is the longest suffix.
    if (!/^[\w+=,.@-]{1,40}$/.test(prefix)) {
      throw new UserError(`The IAM prefix "${prefix}" is not usable for AWS IAM names.`, {
        hint: 'Use 1 to 40 letters, digits or any of + = , . @ _ -.',
      });
    }
    const clients = new AwsClients(this.options, ctx.log, ctx.signal);
    try {
      await clients.checkCredentials(
        typeof request.providerConfig.region === 'string' ? request.providerConfig.region : 'us-east-1',
      );
      const run = new IamCreateRun(prefix, ctx, clients);
      await run.load();
      try {
        await runTaskGraph(run.steps(), { signal: ctx.signal });
      } catch (err) {
        if (!(err instanceof TaskGraphError)) throw err;
        throw new CreateFailedError(
          toUserError(`step ${err.task}`, err.cause),
          err.otherFailures.map((f) => toUserError(f.task, f.error).message),
        );
      }
      return { configUpdates: Object.fromEntries(ROLES.map((r) => [r.configKey, profileName(prefix, r.short)])) };
    } finally {
      clients.destroy();
    }
  }

  /**
   * The inline policy of each role iam create recorded, against the actions this CLI gives that role; with `apply`
   * the policy is put again (PutRolePolicy replaces it whole).
   */
  async upgrade(ctx: ProviderContext, options: { apply: boolean }): Promise<IamPermissionChange[]> {
    const policies = (await ctx.journal.list()).filter((r) => isIamResource(r) && r.kind === IAM_KIND.rolePolicy);
    if (policies.length === 0) return [];
    const clients = new AwsClients(this.options, ctx.log, ctx.signal);
    try {
      await clients.checkCredentials('us-east-1');
      const changes: IamPermissionChange[] = [];
      for (const record of policies) {
        const {
          roleName: role,
          policyName: policy,
          iamPrefix,
        } = recordData(record) as unknown as { roleName: string; policyName: string; iamPrefix: string };
        const spec = ROLES.find((r) => roleName(iamPrefix, r.short) === role);
        if (!spec)
          throw new UserError(
            `The workspace records the IAM policy ${policy} of role ${role}, which this CLI does not make.`,
          );
        const out = await clients.send<GetRolePolicyCommandOutput>(
          clients.iam(),
          new GetRolePolicyCommand({ RoleName: role, PolicyName: policy }),
          `Reading the policy ${policy} of ${role}`,
        );
        const change = permissionChange(`${role}/${policy}`, policyActions(out.PolicyDocument ?? ''), spec.actions);
        if (!change) continue;
        changes.push(change);
        if (options.apply) {
          ctx.progress?.(`updating the policy ${policy} of ${role}`);
          await clients.send(
            clients.iam(),
            new PutRolePolicyCommand({
              RoleName: role,
              PolicyName: policy,
              PolicyDocument: policyDocument(spec.actions),
            }),
            `Setting the policy of ${role}`,
          );
        }
      }
      return changes;
    } finally {
      clients.destroy();
    }
  }

  async destroy(ctx: ProviderContext): Promise<void> {
    const recorded = (await ctx.journal.list()).filter(isIamResource);
    if (recorded.length === 0) return;
    const clients = new AwsClients(this.options, ctx.log, ctx.signal);
    try {
      await clients.checkCredentials('us-east-1');
      const iam = clients.iam();
      const send = (command: unknown, r: RecordedResource) => clients.send(iam, command, `Deleting ${r.kind} ${r.id}`);
      await deleteInReverseOrder(recorded, {
        ctx,
        options: this.options,
        fromJournal: true,
        what: 'Destroying the AWS IAM identities',
        deleteOne: async (r) => {
          const data = recordData(r) as { roleName?: string; policyName?: string; profileName?: string };
          try {
            switch (r.kind) {
              case IAM_KIND.instanceProfileRole:
                return void (await send(
                  new RemoveRoleFromInstanceProfileCommand({
                    InstanceProfileName: data.profileName,
                    RoleName: data.roleName,
                  }),
                  r,
                ));
              case IAM_KIND.rolePolicy:
                return void (await send(
                  new DeleteRolePolicyCommand({ RoleName: data.roleName, PolicyName: data.policyName }),
                  r,
                ));
              case IAM_KIND.instanceProfile:
                return void (await send(new DeleteInstanceProfileCommand({ InstanceProfileName: r.id }), r));
              case IAM_KIND.role:
                return void (await send(new DeleteRoleCommand({ RoleName: r.id }), r));
              default:
                throw new UserError(`The journal holds an IAM resource of unknown kind ${r.kind} (${r.id}).`);
            }
          } catch (err) {
            if (!isNotFound(err)) throw err;
          }
        },
      });
    } finally {
      clients.destroy();
    }
  }
}

function roleName(prefix: string, short: string): string {
  return `${prefix}-${short}-role`;
}

function profileName(prefix: string, short: string): string {
  return `${prefix}-${short}-profile`;
}

class IamCreateRun {
  private readonly made = new Map<string, RecordedResource>();

  constructor(
    private readonly prefix: string,
    private readonly ctx: ProviderContext,
    private readonly clients: AwsClients,
  ) {}

  async load(): Promise<void> {
    for (const r of (await this.ctx.journal.list()).filter(isIamResource)) {
      if (recordData(r).iamPrefix !== this.prefix) {
        throw new UserError(
          `The workspace already holds IAM identities made with prefix "${String(recordData(r).iamPrefix)}".`,
          {
            hint: 'Run `constellation iam destroy` first, or use another workspace.',
          },
        );
      }
      if (r.name) this.made.set(r.name, r);
    }
  }

  steps(): Task[] {
    return ROLES.flatMap(({ short, actions }) => {
      const role = roleName(this.prefix, short);
      const profile = profileName(this.prefix, short);
      const policy = `${this.prefix}-${short}-policy`;
      return [
        { id: `role-${short}`, run: () => this.role(short, role) },
        {
          id: `role-policy-${short}`,
          deps: [`role-${short}`],
          run: () =>
            this.ensure(
              `role-policy-${short}`,
              IAM_KIND.rolePolicy,
              `${role}|${policy}`,
              [`role-${short}`],
              { roleName: role, policyName: policy },
              async () => {
                // Idempotent: PutRolePolicy replaces a policy of the same name.
                await this.clients.send(
                  this.clients.iam(),
                  new PutRolePolicyCommand({
                    RoleName: role,
                    PolicyName: policy,
                    PolicyDocument: policyDocument(actions),
                  }),
                  `Setting the policy of ${role}`,
                );
              },
            ),
        },
        { id: `instance-profile-${short}`, run: () => this.instanceProfile(short, profile) },
        {
          id: `instance-profile-role-${short}`,
          deps: [`role-${short}`, `instance-profile-${short}`],
          run: () =>
            this.ensure(
              `instance-profile-role-${short}`,
              IAM_KIND.instanceProfileRole,
              `${profile}|${role}`,
              [`role-${short}`, `instance-profile-${short}`],
              { roleName: role, profileName: profile },
              () => this.addRole(profile, role),
            ),
        },
      ];
    });
  }

  private async ensure(
    name: string,
    kind: string,
    id: string,
    deps: string[],
    data: Record<string, unknown>,
    create: () => Promise<void>,
  ): Promise<void> {
    if (this.made.has(name)) return;
    this.ctx.progress?.(`creating ${id}`);
    await create();
    const record: RecordedResource = {
      kind,
      id,
      name,
      dependsOn: deps.map((d) => this.made.get(d)!.id),
      data: { iamPrefix: this.prefix, ...data },
    };
    await this.ctx.journal.record(record);
    this.made.set(name, record);
  }

  private get tags(): Tag[] {
    return [{ Key: PREFIX_TAG, Value: this.prefix }];
  }

  private role(short: string, name: string): Promise<void> {
    return this.ensure(`role-${short}`, IAM_KIND.role, name, [], {}, async () => {
      try {
        await this.clients.send(
          this.clients.iam(),
          new CreateRoleCommand({
            RoleName: name,
            AssumeRolePolicyDocument: ASSUME_ROLE_POLICY,
            Description: `Constellation ${short} nodes`,
            Tags: this.tags,
          }),
          `Creating the IAM role ${name}`,
        );
      } catch (err) {
        if (awsErrorCode(err) !== 'EntityAlreadyExists') throw err;
        const existing = await this.clients.send<GetRoleCommandOutput>(
          this.clients.iam(),
          new GetRoleCommand({ RoleName: name }),
          `Reading the IAM role ${name}`,
        );
        this.adoptOrRefuse(`role ${name}`, existing.Role?.Tags, err);
      }
    });
  }

  private async instanceProfile(short: string, name: string): Promise<void> {
    await this.ensure(`instance-profile-${short}`, IAM_KIND.instanceProfile, name, [], {}, async () => {
      try {
        await this.clients.send(
          this.clients.iam(),
          new CreateInstanceProfileCommand({ InstanceProfileName: name, Tags: this.tags }),
          `Creating the instance profile ${name}`,
        );
      } catch (err) {
        if (awsErrorCode(err) !== 'EntityAlreadyExists') throw err;
        const existing = await this.getProfile(name);
        this.adoptOrRefuse(`instance profile ${name}`, existing.InstanceProfile?.Tags, err);
      }
    });
    // IAM is eventually consistent: EC2 may not see a new profile for a few seconds.
    await this.clients.wait(
      waitUntilInstanceProfileExists,
      this.clients.iam(),
      { InstanceProfileName: name },
      `Waiting for the instance profile ${name}`,
    );
  }

  private async addRole(profile: string, role: string): Promise<void> {
    try {
      await this.clients.send(
        this.clients.iam(),
        new AddRoleToInstanceProfileCommand({ InstanceProfileName: profile, RoleName: role }),
        `Adding ${role} to ${profile}`,
      );
    } catch (err) {
      // A profile holds one role: LimitExceeded when an interrupted run added it already.
      if (awsErrorCode(err) !== 'LimitExceeded') throw err;
      const existing = await this.getProfile(profile);
      if (!existing.InstanceProfile?.Roles?.some((r) => r.RoleName === role)) throw err;
    }
  }

  private getProfile(name: string): Promise<GetInstanceProfileCommandOutput> {
    return this.clients.send<GetInstanceProfileCommandOutput>(
      this.clients.iam(),
      new GetInstanceProfileCommand({ InstanceProfileName: name }),
      `Reading the instance profile ${name}`,
    );
  }

  /** An identity of that name exists: ours from an interrupted run (tagged with the prefix), or someone else's. */
  private adoptOrRefuse(what: string, tags: Tag[] | undefined, err: unknown): void {
    if (tags?.some((t) => t.Key === PREFIX_TAG && t.Value === this.prefix)) return;
    throw new UserError(`The IAM ${what} already exists and was not made by \`constellation iam create\`.`, {
      hint: 'Choose another --prefix, or delete that identity if you no longer need it.',
      cause: err,
    });
  }
}
