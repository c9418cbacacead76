/**
 * The cluster's DHCP server, run by the cloud daemon in the gateway namespace (./cloud-daemon.ts) for VM nodes
 * (providers/qemu/): a VM's /init asks for an address with busybox's udhcpc, as a cloud VM asks its cloud's DHCP.
 * Why our own ~100 lines instead of busybox udhcpd or dnsmasq: the answer is fixed by the cluster's registry, not
 * by a lease pool. A VM's MAC is made from its address (02:00:<a.b.c.d>, ./network.ts), so the server answers a
 * DISCOVER or REQUEST only for a MAC that encodes the address of a node the provider registered with the metadata
 * server, with exactly that address, a /24, and the gateway as router (where the metadata server is). There is no
 * lease state, no second process to own and no configuration file to keep in step with the registry.
 *
 * Replies go to the limited broadcast 255.255.255.255:68 from a socket bound to the gateway address (Linux sends a
 * limited broadcast out of the interface that owns the source address; the client has no address yet). Requests
 * arrive on a socket bound to 0.0.0.0:67 (broadcasts) and on the gateway's (unicast renewals).
 */
import dgram from 'node:dgram';

const BOOTREQUEST = 1;
const BOOTREPLY = 2;
const MAGIC = 0x63825363;
const DISCOVER = 1;
const OFFER = 2;
const REQUEST = 3;
const ACK = 5;
const LEASE_SECONDS = 7 * 24 * 3600;

export interface DhcpRequest {
  xid: number;
  flags: number;
  chaddr: Buffer;
  type: number;
}

/** Parses a BOOTREQUEST with a DHCP message type; undefined for anything else. */
export function parseDhcpRequest(packet: Buffer): DhcpRequest | undefined {
  if (
    packet.length < 240 ||
    packet[0] !== BOOTREQUEST ||
    packet[1] !== 1 ||
    packet[2] !== 6 ||
    packet.readUInt32BE(236) !== MAGIC
  )
    return undefined;
  let type: number | undefined;
  for (let at = 240; at < packet.length;) {
    const code = packet[at]!;
    if (code === 255) break;
    if (code === 0) {
      at++;
      continue;
    }
    const length = packet[at + 1];
    if (length === undefined || at + 2 + length > packet.length) return undefined;
    if (code === 53 && length === 1) type = packet[at + 2];
    at += 2 + length;
  }
  if (type === undefined) return undefined;
  return {
    xid: packet.readUInt32BE(4),
    flags: packet.readUInt16BE(10),
    chaddr: Buffer.from(packet.subarray(28, 34)),
    type,
  };
}

/** The address a MAC of ours encodes (02:00:a:b:c:d), or undefined for another MAC. */
export function addressOfMac(mac: Buffer): string | undefined {
  if (mac.length !== 6 || mac[0] !== 0x02 || mac[1] !== 0x00) return undefined;
  return [...mac.subarray(2)].join('.');
}

const ipBytes = (address: string) => Buffer.from(address.split('.').map(Number));

/** The OFFER or ACK for a request, giving `address`. */
export function dhcpReply(
  request: DhcpRequest,
  type: typeof OFFER | typeof ACK,
  address: string,
  gateway: string,
): Buffer {
  const head = Buffer.alloc(240);
  head[0] = BOOTREPLY;
  head[1] = 1;
  head[2] = 6;
  head.writeUInt32BE(request.xid, 4);
  head.writeUInt16BE(request.flags, 10);
  ipBytes(address).copy(head, 16); // yiaddr
  ipBytes(gateway).copy(head, 20); // siaddr
  request.chaddr.copy(head, 28);
  head.writeUInt32BE(MAGIC, 236);
  const lease = Buffer.alloc(4);
  lease.writeUInt32BE(LEASE_SECONDS);
  const option = (code: number, value: Buffer) => Buffer.concat([Buffer.from([code, value.length]), value]);
  return Buffer.concat([
    head,
    option(53, Buffer.from([type])),
    option(54, ipBytes(gateway)),
    option(51, lease),
    option(1, Buffer.from([255, 255, 255, 0])),
    option(3, ipBytes(gateway)),
    Buffer.from([255]),
  ]);
}

export interface DhcpServer {
  close(): Promise<void>;
}

/**
 * Starts the server for the cluster whose gateway address is `gateway`; `isNode(address)` says whether a registered
 * node has the address. `log` gets one line per answer.
 */
export async function startDhcpServer(options: {
  gateway: string;
  isNode: (address: string) => boolean;
  log?: (line: string) => void;
}): Promise<DhcpServer> {
  const prefix = options.gateway.split('.').slice(0, 3).join('.');
  const bind = (socket: dgram.Socket, address: string) =>
    new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind({ port: 67, address, exclusive: true }, () => {
        socket.off('error', reject);
        resolve();
      });
    });
  const any = dgram.createSocket({ type: 'udp4', reuseAddr: true });
  const sender = dgram.createSocket({ type: 'udp4', reuseAddr: true });
  await bind(any, '0.0.0.0');
  try {
    await bind(sender, options.gateway);
  } catch (err) {
    any.close();
    throw err;
  }
  sender.setBroadcast(true);
  const answer = (packet: Buffer) => {
    const request = parseDhcpRequest(packet);
    if (!request || (request.type !== DISCOVER && request.type !== REQUEST)) return;
    const address = addressOfMac(request.chaddr);
    if (!address || !address.startsWith(`${prefix}.`) || !options.isNode(address)) {
      options.log?.(`dhcp: no address for ${request.chaddr.toString('hex')} (not a registered node of this cluster)`);
      return;
    }
    const type = request.type === DISCOVER ? OFFER : ACK;
    sender.send(dhcpReply(request, type, address, options.gateway), 68, '255.255.255.255', (err) => {
      options.log?.(
        err
          ? `dhcp: cannot answer ${address}: ${err.message}`
          : `dhcp: ${type === OFFER ? 'offered' : 'acknowledged'} ${address}`,
      );
    });
  };
  any.on('message', answer);
  sender.on('message', answer);
  for (const socket of [any, sender]) socket.on('error', (err) => options.log?.(`dhcp: ${err.message}`));
  return {
    close: () =>
      Promise.all([any, sender].map((s) => new Promise<void>((resolve) => s.close(() => resolve())))).then(
        () => undefined,
      ),
  };
}
