/**
 * The local cluster's network (docs/design.md#providers: every node has an address that no other local user can take). Each node
 * runs in its own Linux network namespace, with an address that exists only there; the cluster's metadata server and
 * load balancer (the cloud daemon) run in one more namespace, the gateway, which holds the cluster's bridge:
 *
 *   root namespace: CLI, swtpm           gateway namespace cst-<id>            node namespace cst-<id>-<node>:
 *                                        (cloud daemon)                        launcher, bootstrapper, gocryptfs, etcd
 *   cnet-<range> <P>.2/24 ═══veth═══ uplink ─┐
 *                                            br0 <P>.1/24 ─┬─ v10  ═══veth═══ eth0 <P>.10/24
 *                                                          └─ v100 ═══veth═══ eth0 <P>.100/24     (one pair per node)
 *
 * <P> is the cluster's /24, taken from an address pool (10.213.0.0/16, or CONSTELLATION_LOCAL_ADDRESS_POOL) where it
 * overlaps none of the machine's routes. The link cnet-<range> in the root namespace reserves the range: creating it
 * is atomic, so of two clusters created at the same time exactly one gets a range.
 *
 * Why no other local user can take a cluster's addresses: a node's address and the gateway's exist only inside
 * their namespaces, and only root can enter a namespace or add an address, so nobody else can bind them (binding
 * an address that is not local fails with EADDRNOTAVAIL). The one address of the range in the root namespace, <P>.2,
 * is the source of the CLI's connections; nothing connects to it, and the metadata server knows it as no node.
 * The bridge sits in the gateway namespace rather than in the root one, so the machine's firewall (bridge netfilter,
 * as with Docker's FORWARD policy DROP) never sees the traffic between nodes.
 *
 * Every interface with an address has a MAC address made from that address (02:00:<a.b.c.d in hex>), so a node
 * plugged in again (a reboot) or a new node on an address used before needs no fresh ARP entries in its peers, and
 * the bridge never takes another port's MAC (its address is set, not inherited).
 *
 * Ownership: every name carries the cluster's network id (random, written to cluster.json and the resource journal
 * before anything exists), so whatever carries it is this cluster's, and a sweep of /run/netns finds what an
 * interrupted run made. Links go away with their namespace, but only once the kernel frees it (asynchronously);
 * links whose names are used again (a node's veth on reboot, the uplink) are deleted explicitly first.
 * Processes enter a namespace with `nsenter --net` (./processes.ts), which keeps them in the root mount namespace.
 * A VM node (providers/qemu/) has no address in its namespace: a bridge there joins its eth0 to the tap device of
 * its QEMU, and the guest holds the address (plugVmNode).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { UserError } from '../../lib/errors.js';
import { gatewayAddress, hostAddress } from './layout.js';

export const ADDRESS_POOL_ENV = 'CONSTELLATION_LOCAL_ADDRESS_POOL';
export const DEFAULT_ADDRESS_POOL = '10.213.0.0/16';
/** Where `ip netns` keeps named namespaces (bind mounts of nsfs files). */
export const NETNS_DIR = '/run/netns';

const BRIDGE = 'br0';
const UPLINK = 'uplink';
const NODE_LINK = 'eth0';

/** A fresh network id: 48 random bits, hex. */
export function newNetworkId(): string {
  return randomBytes(6).toString('hex');
}

/** Whether a string is a network id (as made by newNetworkId). */
export function isNetworkId(id: unknown): id is string {
  return typeof id === 'string' && /^[0-9a-f]{12}$/.test(id);
}

export function netnsPath(name: string): string {
  return `${NETNS_DIR}/${name}`;
}

// ---- Addresses -------------------------------------------------------------------------------------------------

/** An IPv4 network: its first address as an unsigned 32-bit number, and its prefix length. */
export interface Cidr {
  base: number;
  bits: number;
}

function parseIpv4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255)) return undefined;
  return parts.reduce((value, p) => value * 256 + Number(p), 0);
}

const mask = (bits: number) => (bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0);

/** "a.b.c.d/n" or "a.b.c.d" (a /32); undefined for anything else. */
export function parseCidr(text: string): Cidr | undefined {
  const [address, length, extra] = text.split('/');
  if (extra !== undefined) return undefined;
  const value = parseIpv4(address);
  const bits = length === undefined ? 32 : /^\d{1,2}$/.test(length) ? Number(length) : NaN;
  if (value === undefined || !(bits >= 0 && bits <= 32)) return undefined;
  return { base: (value & mask(bits)) >>> 0, bits };
}

function overlaps(a: Cidr, b: Cidr): boolean {
  const m = mask(Math.min(a.bits, b.bits));
  return ((a.base ^ b.base) & m) >>> 0 === 0;
}

const prefixOf = (base: number) => [base >>> 24, (base >>> 16) & 255, (base >>> 8) & 255].join('.');

/** The pool the cluster ranges come from: an IPv4 network of /8 to /24, given as its network address. */
export function parseAddressPool(text: string): Cidr {
  const pool = parseCidr(text.trim());
  const wrong = (why: string) =>
    new UserError(`The local clusters' address pool "${text}" ${why}.`, {
      hint: `Set ${ADDRESS_POOL_ENV} to a private IPv4 network of /8 to /24 that this machine does not use, e.g. ${DEFAULT_ADDRESS_POOL}, or unset it.`,
    });
  if (!pool || !text.includes('/')) throw wrong('is not an IPv4 network (a.b.c.d/n)');
  if (pool.bits < 8 || pool.bits > 24) throw wrong('must be between /8 and /24 (each cluster takes a /24)');
  if (parseIpv4(text.trim().split('/')[0]) !== pool.base)
    throw wrong(`is not a network address (did you mean ${prefixOf(pool.base)}.${pool.base & 255}/${pool.bits}?)`);
  return pool;
}

/**
 * The /24 prefixes ("a.b.c") of the pool that overlap none of the routes, each once, starting at a random one so
 * that clusters created at the same time rarely try the same range first. Which one is free is found by claiming.
 */
export function candidateRanges(pool: Cidr, routes: readonly Cidr[], random: () => number = Math.random): string[] {
  const count = 2 ** (24 - pool.bits);
  const start = Math.floor(random() * count);
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const range: Cidr = { base: (pool.base + ((start + i) % count) * 256) >>> 0, bits: 24 };
    if (!routes.some((route) => overlaps(route, range))) out.push(prefixOf(range.base));
  }
  return out;
}

/** The destinations of every IPv4 route of this machine (`ip -j -4 route show table all`), default routes left out. */
export function parseRoutes(json: string): Cidr[] {
  const routes = JSON.parse(json) as { dst?: string }[];
  return routes.flatMap((r) => {
    const dst = r.dst === undefined ? undefined : parseCidr(r.dst);
    return dst && dst.bits > 0 ? [dst] : [];
  });
}

// ---- Running ip ------------------------------------------------------------------------------------------------

/** Runs `ip <args>`, with `batch` lines on stdin (for `-batch -`); resolves with stdout, rejects with IpError. */
export type IpRunner = (args: string[], batch?: string[]) => Promise<string>;

export class IpError extends Error {
  constructor(
    readonly args: string[],
    readonly stderr: string,
  ) {
    super(`ip ${args.join(' ')}: ${stderr.trim() || 'failed'}`);
    this.name = 'IpError';
  }
}

const NEEDS_ROOT_HINT =
  'Run the CLI as root (for example with sudo), as the README says. The local provider gives every node its own network namespace, which only root can make.';

/** Throws the UserError that says the local provider needs root, unless this process runs as root. */
export function requireRoot(): void {
  if (process.getuid?.() !== 0) {
    throw new UserError('The local provider needs root: its nodes run in their own network namespaces.', {
      hint: NEEDS_ROOT_HINT,
    });
  }
}

export const runIp: IpRunner = (args, batch) => {
  try {
    requireRoot();
  } catch (err) {
    return Promise.reject(err);
  }
  return new Promise((resolve, reject) => {
    const child = spawn('ip', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        e.code === 'ENOENT'
          ? new UserError('The local provider needs the `ip` command (iproute2), which is not installed.', {
              hint: 'Run `npm run setup`, which installs it.',
            })
          : e,
      ),
    );
    child.once('close', (code) =>
      code === 0 ? resolve(Buffer.concat(out).toString()) : reject(new IpError(args, Buffer.concat(err).toString())),
    );
    child.stdin.end(batch ? `${batch.join('\n')}\n` : undefined);
  });
};

const failedWith = (err: unknown, text: string) => err instanceof IpError && err.stderr.includes(text);

// ---- One cluster's network -------------------------------------------------------------------------------------

/** The locally administered MAC address of the interface with this address: 02:00 and the address's four bytes. */
export function macAddress(address: string): string {
  const value = parseIpv4(address);
  if (value === undefined) throw new Error(`not an IPv4 address: ${address}`);
  return ['02', '00', ...[24, 16, 8, 0].map((shift) => ((value >>> shift) & 255).toString(16).padStart(2, '0'))].join(
    ':',
  );
}

/** The root-namespace link that reserves a range: cnet-<the range's 24 bits in hex>, at most 15 characters. */
export function rangeLink(prefix: string): string {
  const value = parseIpv4(`${prefix}.0`);
  if (value === undefined) throw new Error(`not an address prefix: ${prefix}`);
  return `cnet-${(value >>> 8).toString(16).padStart(6, '0')}`;
}

const exists = (file: string) =>
  fs.access(file).then(
    () => true,
    () => false,
  );

export class ClusterNetwork {
  /** The gateway namespace's name. */
  readonly gateway: string;

  constructor(
    readonly id: string,
    private readonly ip: IpRunner = runIp,
  ) {
    if (!isNetworkId(id)) throw new Error(`not a network id: ${id}`);
    this.gateway = `cst-${id}`;
  }

  nodeNetns(node: string): string {
    return `${this.gateway}-${node}`;
  }

  /**
   * Makes the gateway namespace if it is missing; tells which of its links exist, so `configure` adds only the
   * missing ones. An uplink means the namespace still holds a range (its peer reserves it in the root namespace).
   */
  async ensureGateway(): Promise<{ bridge: boolean; uplink: boolean }> {
    if (!(await exists(netnsPath(this.gateway)))) {
      await this.ip(['netns', 'add', this.gateway]);
      return { bridge: false, uplink: false };
    }
    const links = new Set(
      (JSON.parse(await this.ip(['-n', this.gateway, '-j', 'link', 'show'])) as { ifname: string }[]).map(
        (l) => l.ifname,
      ),
    );
    return { bridge: links.has(BRIDGE), uplink: links.has(UPLINK) };
  }

  /** The destinations of the machine's routes, which a cluster's range must not overlap. */
  async routes(): Promise<Cidr[]> {
    return parseRoutes(await this.ip(['-j', '-4', 'route', 'show', 'table', 'all']));
  }

  /** Reserves the range by creating its root-namespace link (peer: the gateway's uplink); false when it is taken. */
  async claimRange(prefix: string): Promise<boolean> {
    try {
      await this.ip(['link', 'add', rangeLink(prefix), 'type', 'veth', 'peer', 'name', UPLINK, 'netns', this.gateway]);
      return true;
    } catch (err) {
      if (failedWith(err, 'File exists')) return false;
      throw err;
    }
  }

  /** Gives up the range the gateway holds, if any (deleting the uplink deletes its peer at once). */
  async releaseRange(): Promise<void> {
    await this.deleteLink(this.gateway, UPLINK);
  }

  /** Addresses and links of a claimed range, idempotent: <P>.2 in the root namespace, the bridge with <P>.1. */
  async configure(prefix: string, present: { bridge: boolean }): Promise<void> {
    const link = rangeLink(prefix);
    await Promise.all([
      this.ip(
        ['-batch', '-'],
        [
          `link set ${link} address ${macAddress(hostAddress(prefix))}`,
          `addr replace ${hostAddress(prefix)}/24 dev ${link}`,
          `link set ${link} up`,
        ],
      ),
      this.ip(
        ['-n', this.gateway, '-batch', '-'],
        [
          ...(present.bridge ? [] : [`link add ${BRIDGE} type bridge`]),
          `link set ${BRIDGE} address ${macAddress(gatewayAddress(prefix))}`,
          `addr replace ${gatewayAddress(prefix)}/24 dev ${BRIDGE}`,
          `link set ${BRIDGE} up`,
          `link set ${UPLINK} master ${BRIDGE} up`,
          'link set lo up',
        ],
      ),
    ]);
  }

  /**
   * Gives a node its namespace, plugged into the bridge, with `address`/24 and loopback up. A node that has a
   * namespace already (a reboot) gets a new pair of links, so what it had before does not matter.
   */
  async plugNode(node: string, host: number, address: string): Promise<void> {
    await this.plugNodes([{ node, host, address }]);
  }

  /**
   * plugNode for several nodes, with `ip` run N + 2 times instead of 3N: one run makes every missing namespace, one
   * makes every node's pair of links on the bridge, and one per node sets its side up (`ip -batch` runs every line
   * in one namespace, and a link's addresses are dropped when it moves to another, so each node's needs its own).
   */
  async plugNodes(nodes: readonly { node: string; host: number; address: string }[]): Promise<void> {
    if (nodes.length === 0) return;
    const plugged = await Promise.all(nodes.map(({ node }) => exists(netnsPath(this.nodeNetns(node)))));
    await Promise.all(nodes.map(({ host }, i) => (plugged[i] ? this.deleteLink(this.gateway, `v${host}`) : undefined)));
    const missing = nodes.filter((_, i) => !plugged[i]).map(({ node }) => `netns add ${this.nodeNetns(node)}`);
    if (missing.length > 0) await this.ip(['-batch', '-'], missing);
    await this.ip(
      ['-n', this.gateway, '-batch', '-'],
      nodes.flatMap(({ node, host }) => [
        `link add v${host} type veth peer name ${NODE_LINK} netns ${this.nodeNetns(node)}`,
        `link set v${host} master ${BRIDGE} up`,
      ]),
    );
    await Promise.all(
      nodes.map(({ node, address }) =>
        this.ip(
          ['-n', this.nodeNetns(node), '-batch', '-'],
          [
            `link set ${NODE_LINK} address ${macAddress(address)}`,
            `addr add ${address}/24 dev ${NODE_LINK}`,
            `link set ${NODE_LINK} up`,
            'link set lo up',
          ],
        ),
      ),
    );
  }

  /**
   * Gives a VM node (providers/qemu/) its namespace, plugged into the cluster's bridge like a process node, but with
   * no address on the host side: the namespace holds a bridge joining its link to the bridge and a persistent tap
   * device `tap`, which the node's QEMU (started in the namespace) opens; the guest behind it has the address (by
   * DHCP, from the MAC made from it). Run again (a power-on), it makes fresh links, as plugNode does.
   */
  async plugVmNode(node: string, host: number, tap: string): Promise<void> {
    const netns = this.nodeNetns(node);
    if (await exists(netnsPath(netns))) {
      await this.deleteLink(this.gateway, `v${host}`);
      await this.deleteLink(netns, tap);
      await this.deleteLink(netns, BRIDGE);
    } else await this.ip(['netns', 'add', netns]);
    await this.ip(
      ['-n', this.gateway, '-batch', '-'],
      [`link add v${host} type veth peer name ${NODE_LINK} netns ${netns}`, `link set v${host} master ${BRIDGE} up`],
    );
    await this.ip(
      ['-n', netns, '-batch', '-'],
      [
        `link add ${BRIDGE} type bridge`,
        `link set ${BRIDGE} up`,
        `link set ${NODE_LINK} master ${BRIDGE} up`,
        `tuntap add dev ${tap} mode tap`,
        `link set ${tap} master ${BRIDGE} up`,
        'link set lo up',
      ],
    );
  }

  /** Removes a node's namespace and its link on the bridge (run after its processes stopped). */
  async unplugNode(node: string, host: number): Promise<void> {
    if (await exists(netnsPath(this.gateway))) await this.deleteLink(this.gateway, `v${host}`);
    const netns = this.nodeNetns(node);
    if (await exists(netnsPath(netns))) await this.ip(['netns', 'del', netns]);
  }

  /** The names of every namespace of this cluster that exists: node namespaces, then the gateway's. */
  async namespaces(): Promise<string[]> {
    const names = await fs.readdir(NETNS_DIR).catch(() => [] as string[]);
    const nodes = names.filter((n) => n.startsWith(`${this.gateway}-`)).sort();
    return [...nodes, ...names.filter((n) => n === this.gateway)];
  }

  /** Removes everything of this cluster's network that exists (run after its processes stopped). */
  async remove(): Promise<void> {
    const names = await this.namespaces();
    if (names.includes(this.gateway)) await this.releaseRange();
    if (names.length > 0)
      await this.ip(
        ['-batch', '-'],
        names.map((n) => `netns del ${n}`),
      );
  }

  private async deleteLink(netns: string, link: string): Promise<void> {
    try {
      await this.ip(['-n', netns, 'link', 'del', link]);
    } catch (err) {
      if (!failedWith(err, 'Cannot find device')) throw err;
    }
  }
}
