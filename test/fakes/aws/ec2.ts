/**
 * The fake's EC2 API (EC2 query protocol): VPCs, subnets, internet gateways, elastic IPs, NAT gateways, route
 * tables, security groups, launch templates, images and instances, with AWS's dependency checks
 * (DependencyViolation when something still uses a resource), idempotency tokens and error codes.
 */
import { applyFilters, type FakeAwsState, type Instance, type NatGateway } from './state.js';
import { AwsFault, ec2Tags, list, oneOf, required, str, tagsFromSpecs, type Params, type XmlValue } from './wire.js';

type Handler = (s: FakeAwsState, p: Params) => Record<string, XmlValue>;

function notFound(code: string, what: string, id: string): AwsFault {
  return new AwsFault(code, `The ${what} '${id}' does not exist`);
}

/** By id; a resource made within the consistency window is not found yet (FakeAwsState.consistencyMs, consistencyMisses). */
function get<T>(map: Map<string, T>, id: string, code: string, what: string, s?: FakeAwsState): T {
  const v = map.get(id);
  if (!v) throw notFound(code, what, id);
  if (s?.namedNotYetVisible(id)) {
    s.injected.hit(code);
    throw notFound(code, what, id);
  }
  return v;
}

function ids(p: Params, name: string): string[] {
  return list<string>(p, name);
}

function byIds<T>(map: Map<string, T>, wanted: string[], code: string, what: string, s?: FakeAwsState): T[] {
  if (wanted.length === 0) return [...map.values()];
  return wanted.map((id) => get(map, id, code, what, s));
}

function natXml(s: FakeAwsState, n: NatGateway): XmlValue {
  const address = s.addresses.get(n.allocationId);
  return {
    natGatewayId: n.id,
    vpcId: n.vpcId,
    subnetId: n.subnetId,
    state: s.natState(n),
    connectivityType: 'public',
    natGatewayAddressSet: [{ allocationId: n.allocationId, publicIp: address?.publicIp }],
    tagSet: ec2Tags(n.tags),
  };
}

function instanceXml(s: FakeAwsState, i: Instance): XmlValue {
  const state = s.instanceState(i);
  const code = { pending: 0, running: 16, 'shutting-down': 32, terminated: 48 }[state];
  return {
    instanceId: i.id,
    imageId: i.imageId,
    instanceType: i.instanceType,
    instanceState: { code, name: state },
    privateDnsName: `ip-${i.privateIp.replace(/\./g, '-')}.${s.region}.compute.internal`,
    privateIpAddress: i.privateIp,
    launchTime: new Date(i.launchedAt).toISOString(),
    subnetId: i.subnetId,
    vpcId: s.subnets.get(i.subnetId)?.vpcId,
    placement: { availabilityZone: i.zone },
    tagSet: ec2Tags(i.tags),
  };
}

/**
 * Why EC2 refuses to launch from this launch template data, as the launch's status message, or undefined. Per
 * CreateVolume / EbsBlockDevice (EC2 API reference): io1 and io2 volumes need Iops.
 */
export function launchRefusal(data: Params): string | undefined {
  for (const m of list(data, 'BlockDeviceMapping')) {
    const ebs = (m.Ebs ?? {}) as Params;
    const type = str(ebs, 'VolumeType');
    if ((type === 'io1' || type === 'io2') && str(ebs, 'Iops') === undefined)
      return `The parameter iops must be specified for ${type} volumes. Launching EC2 instance failed.`;
  }
  return undefined;
}

/** Launches one instance from a launch template (auto scaling groups and RunInstances alike). */
export function launchInstance(
  s: FakeAwsState,
  launchTemplateId: string,
  subnetId: string,
  extraTags: Record<string, string>,
  groupName?: string,
): Instance {
  const lt = get(s.launchTemplates, launchTemplateId, 'InvalidLaunchTemplateId.NotFound', 'launch template ID', s);
  const subnet = get(s.subnets, subnetId, 'InvalidSubnetID.NotFound', 'subnet ID', s);
  // Tags of the group win over the launch template's for the same key ("Tag Auto Scaling groups and instances").
  const instanceTags = tagsFromSpecs(lt.data, 'instance');
  const instance: Instance = {
    id: s.newId('i'),
    groupName,
    launchTemplateId,
    subnetId,
    zone: subnet.zone,
    privateIp: s.nextIp(s.privateIpBase ?? subnet.cidr.split('.').slice(0, 2).join('.')),
    instanceType: str(lt.data, 'InstanceType') ?? 'm6a.xlarge',
    imageId: str(lt.data, 'ImageId') ?? '',
    launchTemplateVersion: lt.versions.length,
    launchedAt: s.now(),
    tags: { ...instanceTags, ...extraTags },
  };
  s.instances.set(instance.id, instance);
  return instance;
}

/** LaunchTemplateData as DescribeLaunchTemplateVersions answers (EC2 lowerCamel names, lists of items). */
function launchTemplateDataXml(data: Params): XmlValue {
  const tags = (spec: Params) => list(spec, 'Tag').map((t) => ({ key: str(t, 'Key'), value: str(t, 'Value') }));
  return {
    imageId: str(data, 'ImageId'),
    instanceType: str(data, 'InstanceType'),
    tagSpecificationSet: list(data, 'TagSpecification').map((spec) => ({
      resourceType: str(spec, 'ResourceType'),
      tagSet: tags(spec),
    })),
  };
}

function dependencyViolation(what: string): AwsFault {
  return new AwsFault('DependencyViolation', `The ${what} has dependencies and cannot be deleted.`);
}

function liveInstances(s: FakeAwsState): Instance[] {
  return [...s.instances.values()].filter((i) => s.instanceState(i) !== 'terminated');
}

export const ec2Handlers: Record<string, Handler> = {
  CreateVpc(s, p) {
    const id = s.newId('vpc');
    s.vpcs.set(id, { id, cidr: required(p, 'CidrBlock'), tags: tagsFromSpecs(p, 'vpc') });
    // Every VPC comes with a main route table and a default security group.
    const rtb = s.newId('rtb');
    s.routeTables.set(rtb, {
      id: rtb,
      vpcId: id,
      main: true,
      tags: {},
      routes: [],
      associations: [{ id: s.newId('rtbassoc'), main: true }],
    });
    const sg = s.newId('sg');
    s.securityGroups.set(sg, { id: sg, vpcId: id, name: 'default', isDefault: true, tags: {}, ingress: [] });
    return {
      vpc: { vpcId: id, cidrBlock: s.vpcs.get(id)!.cidr, state: 'available', tagSet: ec2Tags(s.vpcs.get(id)!.tags) },
    };
  },
  DescribeVpcs(s, p) {
    const vpcs = applyFilters(byIds(s.vpcs, ids(p, 'VpcId'), 'InvalidVpcID.NotFound', 'vpc ID', s), p);
    return {
      vpcSet: vpcs.map((v) => ({ vpcId: v.id, cidrBlock: v.cidr, state: 'available', tagSet: ec2Tags(v.tags) })),
    };
  },
  DeleteVpc(s, p) {
    const id = required(p, 'VpcId');
    get(s.vpcs, id, 'InvalidVpcID.NotFound', 'vpc ID', s);
    const used =
      [...s.subnets.values()].some((x) => x.vpcId === id) ||
      [...s.securityGroups.values()].some((x) => x.vpcId === id && !x.isDefault) ||
      [...s.routeTables.values()].some((x) => x.vpcId === id && !x.main) ||
      [...s.internetGateways.values()].some((x) => x.attachments.includes(id));
    if (used) throw new AwsFault('DependencyViolation', `The vpc '${id}' has dependencies and cannot be deleted.`);
    s.vpcs.delete(id);
    for (const t of [...s.routeTables.values()]) if (t.vpcId === id) s.routeTables.delete(t.id);
    for (const g of [...s.securityGroups.values()]) if (g.vpcId === id) s.securityGroups.delete(g.id);
    return { return: true };
  },

  CreateSubnet(s, p) {
    const vpcId = required(p, 'VpcId');
    get(s.vpcs, vpcId, 'InvalidVpcID.NotFound', 'vpc ID', s);
    const cidr = required(p, 'CidrBlock');
    if ([...s.subnets.values()].some((x) => x.vpcId === vpcId && x.cidr === cidr)) {
      throw new AwsFault('InvalidSubnet.Conflict', `The CIDR '${cidr}' conflicts with another subnet`);
    }
    const id = s.newId('subnet');
    const subnet = {
      id,
      vpcId,
      cidr,
      zone: str(p, 'AvailabilityZone') ?? `${s.region}a`,
      tags: tagsFromSpecs(p, 'subnet'),
    };
    s.subnets.set(id, subnet);
    return {
      subnet: {
        subnetId: id,
        vpcId,
        cidrBlock: cidr,
        availabilityZone: subnet.zone,
        state: 'available',
        tagSet: ec2Tags(subnet.tags),
      },
    };
  },
  DescribeSubnets(s, p) {
    const subnets = applyFilters(
      byIds(s.subnets, ids(p, 'SubnetId'), 'InvalidSubnetID.NotFound', 'subnet ID', s),
      p,
      (x, n) => (n === 'vpc-id' ? x.vpcId : n === 'cidr-block' ? x.cidr : undefined),
    );
    return {
      subnetSet: subnets.map((x) => ({
        subnetId: x.id,
        vpcId: x.vpcId,
        cidrBlock: x.cidr,
        availabilityZone: x.zone,
        tagSet: ec2Tags(x.tags),
      })),
    };
  },
  DeleteSubnet(s, p) {
    const id = required(p, 'SubnetId');
    get(s.subnets, id, 'InvalidSubnetID.NotFound', 'subnet ID', s);
    s.settle();
    const used =
      liveInstances(s).some((i) => i.subnetId === id) ||
      [...s.natGateways.values()].some((n) => n.subnetId === id && s.natState(n) !== 'deleted') ||
      [...s.loadBalancers.values()].some((lb) => lb.subnetMappings.some((m) => m.subnetId === id));
    if (used) throw dependencyViolation(`subnet '${id}'`);
    s.subnets.delete(id);
    for (const t of s.routeTables.values()) t.associations = t.associations.filter((a) => a.subnetId !== id);
    return { return: true };
  },

  CreateInternetGateway(s, p) {
    const id = s.newId('igw');
    s.internetGateways.set(id, { id, attachments: [], tags: tagsFromSpecs(p, 'internet-gateway') });
    return {
      internetGateway: { internetGatewayId: id, attachmentSet: [], tagSet: ec2Tags(s.internetGateways.get(id)!.tags) },
    };
  },
  AttachInternetGateway(s, p) {
    const igw = get(
      s.internetGateways,
      required(p, 'InternetGatewayId'),
      'InvalidInternetGatewayID.NotFound',
      'internet gateway ID',
      s,
    );
    const vpcId = required(p, 'VpcId');
    get(s.vpcs, vpcId, 'InvalidVpcID.NotFound', 'vpc ID', s);
    if (igw.attachments.length > 0)
      throw new AwsFault(
        'Resource.AlreadyAssociated',
        `resource ${igw.id} is already attached to network ${igw.attachments[0]}`,
      );
    igw.attachments.push(vpcId);
    return { return: true };
  },
  DetachInternetGateway(s, p) {
    const igw = get(
      s.internetGateways,
      required(p, 'InternetGatewayId'),
      'InvalidInternetGatewayID.NotFound',
      'internet gateway ID',
      s,
    );
    const vpcId = required(p, 'VpcId');
    if (!igw.attachments.includes(vpcId))
      throw new AwsFault('Gateway.NotAttached', `resource ${igw.id} is not attached to network ${vpcId}`);
    s.settle();
    const mapped = [...s.addresses.values()].some((a) => {
      if (!a.holder) return false;
      const nat = s.natGateways.get(a.holder);
      const lb = s.loadBalancers.get(a.holder);
      const subnetId = nat?.subnetId ?? lb?.subnetMappings.find((m) => m.allocationId === a.allocationId)?.subnetId;
      return subnetId !== undefined && s.subnets.get(subnetId)?.vpcId === vpcId;
    });
    if (mapped) {
      throw new AwsFault(
        'DependencyViolation',
        `Network ${vpcId} has some mapped public address(es). Please unmap those public address(es) before detaching the gateway.`,
      );
    }
    igw.attachments = igw.attachments.filter((v) => v !== vpcId);
    return { return: true };
  },
  DescribeInternetGateways(s, p) {
    const gws = applyFilters(
      byIds(
        s.internetGateways,
        ids(p, 'InternetGatewayId'),
        'InvalidInternetGatewayID.NotFound',
        'internet gateway ID',
        s,
      ),
      p,
    );
    return {
      internetGatewaySet: gws.map((g) => ({
        internetGatewayId: g.id,
        attachmentSet: g.attachments.map((vpcId) => ({ vpcId, state: 'available' })),
        tagSet: ec2Tags(g.tags),
      })),
    };
  },
  DeleteInternetGateway(s, p) {
    const igw = get(
      s.internetGateways,
      required(p, 'InternetGatewayId'),
      'InvalidInternetGatewayID.NotFound',
      'internet gateway ID',
      s,
    );
    if (igw.attachments.length > 0) throw dependencyViolation(`internetGateway '${igw.id}'`);
    s.internetGateways.delete(igw.id);
    return { return: true };
  },

  AllocateAddress(s, p) {
    if (s.addresses.size >= s.addressLimit)
      throw new AwsFault('AddressLimitExceeded', 'The maximum number of addresses has been reached.');
    const allocationId = s.newId('eipalloc');
    const publicIp = s.nextIp(s.publicIpBase ?? '198.51');
    s.addresses.set(allocationId, { allocationId, publicIp, tags: tagsFromSpecs(p, 'elastic-ip') });
    return { allocationId, publicIp, domain: 'vpc' };
  },
  DescribeAddresses(s, p) {
    s.settle();
    const addrs = applyFilters(
      byIds(s.addresses, ids(p, 'AllocationId'), 'InvalidAllocationID.NotFound', 'allocation ID', s),
      p,
    );
    return {
      addressesSet: addrs.map((a) => ({
        allocationId: a.allocationId,
        publicIp: a.publicIp,
        domain: 'vpc',
        tagSet: ec2Tags(a.tags),
      })),
    };
  },
  ReleaseAddress(s, p) {
    const id = required(p, 'AllocationId');
    const a = get(s.addresses, id, 'InvalidAllocationID.NotFound', 'allocation ID', s);
    s.settle();
    if (a.holder) throw new AwsFault('InvalidIPAddress.InUse', `Address ${a.publicIp} is in use.`);
    s.addresses.delete(id);
    return { return: true };
  },

  CreateNatGateway(s, p) {
    const token = str(p, 'ClientToken');
    const same = token && [...s.natGateways.values()].find((n) => n.clientToken === token);
    if (same) return { natGateway: natXml(s, same), clientToken: token };
    const subnet = get(s.subnets, required(p, 'SubnetId'), 'InvalidSubnetID.NotFound', 'subnet ID', s);
    const address = get(s.addresses, required(p, 'AllocationId'), 'InvalidAllocationID.NotFound', 'allocation ID', s);
    s.settle();
    if (address.holder)
      throw new AwsFault(
        'Resource.AlreadyAssociated',
        `Elastic IP address [${address.allocationId}] is already associated`,
      );
    if (![...s.internetGateways.values()].some((g) => g.attachments.includes(subnet.vpcId))) {
      throw new AwsFault('InvalidParameterValue', `Network ${subnet.vpcId} has no Internet gateway attached`);
    }
    const n: NatGateway = {
      id: s.newId('nat'),
      vpcId: subnet.vpcId,
      subnetId: subnet.id,
      allocationId: address.allocationId,
      clientToken: token,
      createdAt: s.now(),
      tags: tagsFromSpecs(p, 'natgateway'),
    };
    s.natGateways.set(n.id, n);
    address.holder = n.id;
    return { natGateway: natXml(s, n), clientToken: token };
  },
  DescribeNatGateways(s, p) {
    const wanted = ids(p, 'NatGatewayId');
    for (const id of wanted)
      if (!s.natGateways.has(id)) throw new AwsFault('NatGatewayNotFound', `NAT gateway ${id} was not found`);
    const gws = applyFilters(
      wanted.length ? wanted.map((id) => s.natGateways.get(id)!) : [...s.natGateways.values()],
      p,
      (n, name) => (name === 'state' ? s.natState(n) : name === 'vpc-id' ? n.vpcId : undefined),
    );
    return { natGatewaySet: gws.map((n) => natXml(s, n)) };
  },
  DeleteNatGateway(s, p) {
    const id = required(p, 'NatGatewayId');
    const n = s.natGateways.get(id);
    if (!n || s.natState(n) === 'deleted')
      throw new AwsFault('NatGatewayNotFound', `The Nat Gateway ${id} was not found`);
    n.deletedAt ??= s.now();
    return { natGatewayId: id };
  },

  CreateRouteTable(s, p) {
    const vpcId = required(p, 'VpcId');
    get(s.vpcs, vpcId, 'InvalidVpcID.NotFound', 'vpc ID', s);
    const id = s.newId('rtb');
    s.routeTables.set(id, {
      id,
      vpcId,
      main: false,
      routes: [],
      associations: [],
      tags: tagsFromSpecs(p, 'route-table'),
    });
    return {
      routeTable: {
        routeTableId: id,
        vpcId,
        routeSet: [],
        associationSet: [],
        tagSet: ec2Tags(s.routeTables.get(id)!.tags),
      },
    };
  },
  CreateRoute(s, p) {
    const t = get(s.routeTables, required(p, 'RouteTableId'), 'InvalidRouteTableID.NotFound', 'route table ID', s);
    const destination = required(p, 'DestinationCidrBlock');
    if (t.routes.some((r) => r.destination === destination)) {
      throw new AwsFault('RouteAlreadyExists', `The route identified by ${destination} already exists.`);
    }
    const gatewayId = str(p, 'GatewayId');
    const natGatewayId = str(p, 'NatGatewayId');
    if (gatewayId) {
      const igw = get(s.internetGateways, gatewayId, 'InvalidGatewayID.NotFound', 'gateway ID', s);
      if (!igw.attachments.includes(t.vpcId))
        throw new AwsFault(
          'InvalidParameterValue',
          `route table ${t.id} and network gateway ${gatewayId} belong to different networks`,
        );
    }
    if (natGatewayId) get(s.natGateways, natGatewayId, 'NatGatewayNotFound', 'NAT gateway', s);
    t.routes.push({ destination, gatewayId, natGatewayId });
    return { return: true };
  },
  DeleteRoute(s, p) {
    const t = get(s.routeTables, required(p, 'RouteTableId'), 'InvalidRouteTableID.NotFound', 'route table ID', s);
    const destination = required(p, 'DestinationCidrBlock');
    if (!t.routes.some((r) => r.destination === destination)) {
      throw new AwsFault(
        'InvalidRoute.NotFound',
        `no route with destination-cidr-block ${destination} in route table ${t.id}`,
      );
    }
    t.routes = t.routes.filter((r) => r.destination !== destination);
    return { return: true };
  },
  AssociateRouteTable(s, p) {
    const t = get(s.routeTables, required(p, 'RouteTableId'), 'InvalidRouteTableID.NotFound', 'route table ID', s);
    const subnetId = required(p, 'SubnetId');
    get(s.subnets, subnetId, 'InvalidSubnetID.NotFound', 'subnet ID', s);
    const taken = [...s.routeTables.values()].find((x) => x.associations.some((a) => a.subnetId === subnetId));
    if (taken)
      throw new AwsFault(
        'Resource.AlreadyAssociated',
        `the specified association for route table ${taken.id} conflicts with an existing association`,
      );
    const id = s.newId('rtbassoc');
    t.associations.push({ id, subnetId, main: false });
    return { associationId: id, associationState: { state: 'associated' } };
  },
  DisassociateRouteTable(s, p) {
    const id = required(p, 'AssociationId');
    const t = [...s.routeTables.values()].find((x) => x.associations.some((a) => a.id === id));
    if (!t) throw new AwsFault('InvalidAssociationID.NotFound', `The association ID '${id}' does not exist`);
    t.associations = t.associations.filter((a) => a.id !== id);
    return { return: true };
  },
  DescribeRouteTables(s, p) {
    const tables = applyFilters(
      byIds(s.routeTables, ids(p, 'RouteTableId'), 'InvalidRouteTableID.NotFound', 'route table ID', s),
      p,
      (t, n) => (n === 'vpc-id' ? t.vpcId : undefined),
    );
    return {
      routeTableSet: tables.map((t) => ({
        routeTableId: t.id,
        vpcId: t.vpcId,
        routeSet: t.routes.map((r) => ({
          destinationCidrBlock: r.destination,
          gatewayId: r.gatewayId,
          natGatewayId: r.natGatewayId,
          state: 'active',
        })),
        associationSet: t.associations.map((a) => ({
          routeTableAssociationId: a.id,
          routeTableId: t.id,
          subnetId: a.subnetId,
          main: a.main,
        })),
        tagSet: ec2Tags(t.tags),
      })),
    };
  },
  DeleteRouteTable(s, p) {
    const t = get(s.routeTables, required(p, 'RouteTableId'), 'InvalidRouteTableID.NotFound', 'route table ID', s);
    if (t.main || t.associations.length > 0) throw dependencyViolation(`routeTable '${t.id}'`);
    s.routeTables.delete(t.id);
    return { return: true };
  },

  CreateSecurityGroup(s, p) {
    const vpcId = required(p, 'VpcId');
    get(s.vpcs, vpcId, 'InvalidVpcID.NotFound', 'vpc ID', s);
    const name = required(p, 'GroupName');
    if ([...s.securityGroups.values()].some((g) => g.vpcId === vpcId && g.name === name)) {
      throw new AwsFault('InvalidGroup.Duplicate', `The security group '${name}' already exists for VPC '${vpcId}'`);
    }
    const id = s.newId('sg');
    s.securityGroups.set(id, {
      id,
      vpcId,
      name,
      isDefault: false,
      ingress: [],
      tags: tagsFromSpecs(p, 'security-group'),
    });
    return { groupId: id, tagSet: ec2Tags(s.securityGroups.get(id)!.tags) };
  },
  AuthorizeSecurityGroupIngress(s, p) {
    const g = get(s.securityGroups, required(p, 'GroupId'), 'InvalidGroup.NotFound', 'security group', s);
    const perms = list(p, 'IpPermissions');
    const key = (x: Params) =>
      JSON.stringify([x.IpProtocol, x.FromPort, x.ToPort, list(x, 'IpRanges').map((r) => r.CidrIp)]);
    const existing = new Set(g.ingress.map(key));
    const duplicate = perms.find((x) => existing.has(key(x)));
    if (duplicate)
      throw new AwsFault(
        'InvalidPermission.Duplicate',
        `the specified rule "peer: ${String(list(duplicate, 'IpRanges')[0]?.CidrIp)}" already exists`,
      );
    g.ingress.push(...perms);
    return { return: true };
  },
  DescribeSecurityGroups(s, p) {
    const groups = applyFilters(
      byIds(s.securityGroups, ids(p, 'GroupId'), 'InvalidGroup.NotFound', 'security group', s),
      p,
      (g, n) => (n === 'vpc-id' ? g.vpcId : n === 'group-name' ? g.name : undefined),
    );
    return {
      securityGroupInfo: groups.map((g) => ({
        groupId: g.id,
        groupName: g.name,
        vpcId: g.vpcId,
        tagSet: ec2Tags(g.tags),
      })),
    };
  },
  DeleteSecurityGroup(s, p) {
    const g = get(s.securityGroups, required(p, 'GroupId'), 'InvalidGroup.NotFound', 'security group', s);
    s.settle();
    const used =
      liveInstances(s).some((i) =>
        list<string>(s.launchTemplates.get(i.launchTemplateId)?.data ?? {}, 'SecurityGroupId').includes(g.id),
      ) || [...s.loadBalancers.values()].some((lb) => lb.securityGroups.includes(g.id));
    if (used) throw new AwsFault('DependencyViolation', `resource ${g.id} has a dependent object`);
    s.securityGroups.delete(g.id);
    return { return: true };
  },

  CreateLaunchTemplate(s, p) {
    const name = required(p, 'LaunchTemplateName');
    // VolumeType of LaunchTemplateEbsBlockDeviceRequest and HttpTokens of the metadata options (EC2 API reference).
    const data = (p.LaunchTemplateData ?? {}) as Params;
    for (const m of list(data, 'BlockDeviceMapping'))
      oneOf(
        (m.Ebs ?? {}) as Params,
        'VolumeType',
        ['standard', 'io1', 'io2', 'gp2', 'sc1', 'st1', 'gp3'],
        'InvalidParameterValue',
      );
    oneOf((data.MetadataOptions ?? {}) as Params, 'HttpTokens', ['optional', 'required'], 'InvalidParameterValue');
    oneOf((data.CpuOptions ?? {}) as Params, 'AmdSevSnp', ['enabled', 'disabled'], 'InvalidParameterValue');
    const token = str(p, 'ClientToken');
    const existing = [...s.launchTemplates.values()].find((t) => t.name === name);
    if (existing && (!token || existing.clientToken !== token)) {
      throw new AwsFault('InvalidLaunchTemplateName.AlreadyExistsException', `Launch template name already in use.`);
    }
    const lt = existing ?? {
      id: s.newId('lt'),
      name,
      clientToken: token,
      data,
      versions: [data],
      tags: tagsFromSpecs(p, 'launch-template'),
    };
    s.launchTemplates.set(lt.id, lt);
    return {
      launchTemplate: {
        launchTemplateId: lt.id,
        launchTemplateName: name,
        defaultVersionNumber: 1,
        latestVersionNumber: 1,
        tagSet: ec2Tags(lt.tags),
      },
    };
  },
  DescribeLaunchTemplates(s, p) {
    const names = list<string>(p, 'LaunchTemplateName');
    let templates = byIds(
      s.launchTemplates,
      ids(p, 'LaunchTemplateId'),
      'InvalidLaunchTemplateId.NotFound',
      'launch template ID',
      s,
    );
    if (names.length > 0) {
      templates = names.map((n) => {
        const t = [...s.launchTemplates.values()].find((x) => x.name === n);
        if (!t)
          throw new AwsFault(
            'InvalidLaunchTemplateName.NotFoundException',
            `At least one of the launch templates specified in the request does not exist.`,
          );
        return t;
      });
    }
    return {
      launchTemplates: applyFilters(templates, p).map((t) => ({
        launchTemplateId: t.id,
        launchTemplateName: t.name,
        tagSet: ec2Tags(t.tags),
      })),
    };
  },
  /**
   * CreateLaunchTemplateVersion (EC2 API reference): a new version from SourceVersion with the LaunchTemplateData
   * given replacing those top-level parameters; the new version is $Latest (what our groups launch).
   */
  CreateLaunchTemplateVersion(s, p) {
    const id = required(p, 'LaunchTemplateId');
    const lt = get(s.launchTemplates, id, 'InvalidLaunchTemplateId.NotFound', 'launch template ID', s);
    const source = str(p, 'SourceVersion');
    const base = source === undefined ? {} : source === '$Latest' ? lt.data : lt.versions[Number(source) - 1];
    if (!base)
      throw new AwsFault('InvalidLaunchTemplateId.VersionNotFound', `Could not find launch template version ${source}`);
    const data = { ...base, ...((p.LaunchTemplateData ?? {}) as Params) };
    lt.versions.push(data);
    lt.data = data;
    return {
      launchTemplateVersion: {
        launchTemplateId: id,
        launchTemplateName: lt.name,
        versionNumber: lt.versions.length,
        versionDescription: str(p, 'VersionDescription'),
      },
    };
  },
  DescribeLaunchTemplateVersions(s, p) {
    const lt = get(
      s.launchTemplates,
      required(p, 'LaunchTemplateId'),
      'InvalidLaunchTemplateId.NotFound',
      'launch template ID',
      s,
    );
    const wanted = list<string>(p, 'LaunchTemplateVersion');
    const numbers =
      wanted.length === 0
        ? lt.versions.map((_, i) => i + 1)
        : wanted.map((v) => (v === '$Latest' ? lt.versions.length : v === '$Default' ? 1 : Number(v)));
    return {
      launchTemplateVersionSet: numbers.map((n) => ({
        launchTemplateId: lt.id,
        launchTemplateName: lt.name,
        versionNumber: n,
        defaultVersion: n === 1,
        launchTemplateData: launchTemplateDataXml(lt.versions[n - 1] ?? {}),
      })),
    };
  },
  DeleteLaunchTemplate(s, p) {
    const id = required(p, 'LaunchTemplateId');
    const t = get(s.launchTemplates, id, 'InvalidLaunchTemplateId.NotFound', 'launch template ID', s);
    s.launchTemplates.delete(id);
    return { launchTemplate: { launchTemplateId: id, launchTemplateName: t.name } };
  },

  /** DescribeAccountAttributes (EC2 API reference): without AttributeNames, every attribute, vpc-max-elastic-ips among them. */
  DescribeAccountAttributes(s, p) {
    const names = list<string>(p, 'AttributeName');
    for (const n of names)
      if (n !== 'supported-platforms' && n !== 'default-vpc')
        throw new AwsFault('InvalidParameterValue', `Value (${n}) for parameter attributeName is invalid.`);
    const all = [
      { attributeName: 'supported-platforms', attributeValueSet: [{ attributeValue: 'VPC' }] },
      { attributeName: 'vpc-max-elastic-ips', attributeValueSet: [{ attributeValue: String(s.addressLimit) }] },
    ];
    return { accountAttributeSet: names.length ? all.filter((a) => names.includes(a.attributeName)) : all };
  },
  DescribeImages(s, p) {
    const images = ids(p, 'ImageId').map((id) => {
      const image = s.images.get(id);
      if (!image) throw new AwsFault('InvalidAMIID.NotFound', `The image id '[${id}]' does not exist`);
      return image;
    });
    return {
      imagesSet: images.map((i) => ({
        imageId: i.id,
        imageState: 'available',
        bootMode: i.bootMode,
        tpmSupport: i.tpmSupport,
      })),
    };
  },

  DescribeInstances(s, p) {
    const wanted = ids(p, 'InstanceId');
    for (const id of wanted) get(s.instances, id, 'InvalidInstanceID.NotFound', 'instance ID', s);
    // A filter names no resource: instances not visible yet are left out, not refused.
    const all = [...s.instances.values()].filter((i) => !s.notYetVisible(i.id));
    const instances = applyFilters(wanted.length ? wanted.map((id) => s.instances.get(id)!) : all, p, (i, n) =>
      n === 'instance-state-name' ? s.instanceState(i) : n === 'instance-id' ? i.id : undefined,
    );
    return {
      reservationSet: instances.map((i) => ({
        reservationId: `r-${i.id.slice(2)}`,
        ownerId: s.account,
        instancesSet: [instanceXml(s, i)],
      })),
    };
  },
  /** CreateTags (EC2 API reference): adds or overwrites tags; an empty value is a value. */
  CreateTags(s, p) {
    const tags = list(p, 'Tag').map((t) => [str(t, 'Key') ?? '', str(t, 'Value') ?? ''] as const);
    for (const id of ids(p, 'ResourceId')) {
      const tagged = id.startsWith('i-')
        ? get(s.instances, id, 'InvalidInstanceID.NotFound', 'instance ID', s)
        : undefined;
      if (!tagged) throw new AwsFault('InvalidID', `The ID '${id}' is not valid`);
      for (const [k, v] of tags) tagged.tags[k] = v;
    }
    return { return: true };
  },
  TerminateInstances(s, p) {
    const instances = ids(p, 'InstanceId').map((id) =>
      get(s.instances, id, 'InvalidInstanceID.NotFound', 'instance ID', s),
    );
    for (const i of instances) i.terminatedAt ??= s.now();
    return {
      instancesSet: instances.map((i) => ({
        instanceId: i.id,
        currentState: { code: 32, name: s.instanceState(i) },
        previousState: { code: 16, name: 'running' },
      })),
    };
  },
};
