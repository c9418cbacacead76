/**
 * The fake's IAM API (AWS Query protocol): roles with inline policies and instance profiles, with IAM's
 * conflict rules (DeleteConflict while attached, one role per profile) and its eventual consistency (a new
 * instance profile is readable only after the operation time, which the SDK's waiter bridges).
 */
import type { FakeAwsState, IamRole, InstanceProfile } from './state.js';
import { AwsFault, list, queryTags, required, tagsFromList, type Params, type XmlValue } from './wire.js';

type Handler = (s: FakeAwsState, p: Params) => Record<string, XmlValue>;

function noSuchEntity(what: string, name: string): AwsFault {
  return new AwsFault('NoSuchEntity', `The ${what} with name ${name} cannot be found.`, 404);
}

function roleXml(r: IamRole): XmlValue {
  return {
    Path: '/',
    RoleName: r.name,
    RoleId: `AROA${r.name.length}EXAMPLE`,
    Arn: r.arn,
    CreateDate: new Date(0).toISOString(),
    AssumeRolePolicyDocument: encodeURIComponent(r.assumeRolePolicy),
    Tags: queryTags(r.tags),
  };
}

function profileXml(s: FakeAwsState, p: InstanceProfile): XmlValue {
  return {
    Path: '/',
    InstanceProfileName: p.name,
    InstanceProfileId: `AIPA${p.name.length}EXAMPLE`,
    Arn: p.arn,
    CreateDate: new Date(p.createdAt).toISOString(),
    Roles: p.roles.map((r) => roleXml(s.roles.get(r)!)),
    Tags: queryTags(p.tags),
  };
}

function role(s: FakeAwsState, name: string): IamRole {
  const r = s.roles.get(name);
  if (!r) throw noSuchEntity('role', name);
  return r;
}

function profile(s: FakeAwsState, name: string): InstanceProfile {
  const p = s.instanceProfiles.get(name);
  if (!p) throw noSuchEntity('instance profile', name);
  return p;
}

export const iamHandlers: Record<string, Handler> = {
  CreateRole(s, p) {
    const name = required(p, 'RoleName');
    if (s.roles.has(name)) throw new AwsFault('EntityAlreadyExists', `Role with name ${name} already exists.`, 409);
    const r: IamRole = {
      name,
      arn: `arn:aws:iam::${s.account}:role/${name}`,
      assumeRolePolicy: required(p, 'AssumeRolePolicyDocument'),
      policies: new Map(),
      tags: tagsFromList(list(p, 'Tags')),
    };
    s.roles.set(name, r);
    return { Role: roleXml(r) };
  },
  GetRole(s, p) {
    return { Role: roleXml(role(s, required(p, 'RoleName'))) };
  },
  PutRolePolicy(s, p) {
    role(s, required(p, 'RoleName')).policies.set(required(p, 'PolicyName'), required(p, 'PolicyDocument'));
    return {};
  },
  GetRolePolicy(s, p) {
    const r = role(s, required(p, 'RoleName'));
    const name = required(p, 'PolicyName');
    const document = r.policies.get(name);
    if (document === undefined) throw noSuchEntity('role policy', name);
    // IAM returns the document URL-encoded (RFC 3986), as GetRolePolicy's documentation says.
    return { RoleName: r.name, PolicyName: name, PolicyDocument: encodeURIComponent(document) };
  },
  DeleteRolePolicy(s, p) {
    const r = role(s, required(p, 'RoleName'));
    const name = required(p, 'PolicyName');
    if (!r.policies.delete(name)) throw noSuchEntity('role policy', name);
    return {};
  },
  DeleteRole(s, p) {
    const r = role(s, required(p, 'RoleName'));
    if (r.policies.size > 0)
      throw new AwsFault('DeleteConflict', 'Cannot delete entity, must delete policies first.', 409);
    if ([...s.instanceProfiles.values()].some((x) => x.roles.includes(r.name))) {
      throw new AwsFault('DeleteConflict', 'Cannot delete entity, must remove roles from instance profile first.', 409);
    }
    s.roles.delete(r.name);
    return {};
  },
  CreateInstanceProfile(s, p) {
    const name = required(p, 'InstanceProfileName');
    if (s.instanceProfiles.has(name))
      throw new AwsFault('EntityAlreadyExists', `Instance Profile ${name} already exists.`, 409);
    const ip: InstanceProfile = {
      name,
      arn: `arn:aws:iam::${s.account}:instance-profile/${name}`,
      roles: [],
      createdAt: s.now(),
      tags: tagsFromList(list(p, 'Tags')),
    };
    s.instanceProfiles.set(name, ip);
    return { InstanceProfile: profileXml(s, ip) };
  },
  GetInstanceProfile(s, p) {
    const ip = profile(s, required(p, 'InstanceProfileName'));
    // Eventual consistency: a new profile becomes readable after the operation time.
    if (!s.done(ip.createdAt)) {
      s.injected.hit('NoSuchEntity (instance profile not yet visible)');
      throw noSuchEntity('instance profile', ip.name);
    }
    return { InstanceProfile: profileXml(s, ip) };
  },
  AddRoleToInstanceProfile(s, p) {
    const ip = profile(s, required(p, 'InstanceProfileName'));
    const r = role(s, required(p, 'RoleName'));
    if (ip.roles.length > 0)
      throw new AwsFault('LimitExceeded', 'Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1', 409);
    ip.roles.push(r.name);
    return {};
  },
  RemoveRoleFromInstanceProfile(s, p) {
    const ip = profile(s, required(p, 'InstanceProfileName'));
    const name = required(p, 'RoleName');
    if (!ip.roles.includes(name)) throw noSuchEntity('role', name);
    ip.roles = ip.roles.filter((r) => r !== name);
    return {};
  },
  DeleteInstanceProfile(s, p) {
    const ip = profile(s, required(p, 'InstanceProfileName'));
    if (ip.roles.length > 0)
      throw new AwsFault('DeleteConflict', 'Cannot delete entity, must remove roles from instance profile first.', 409);
    s.instanceProfiles.delete(ip.name);
    return {};
  },
};
