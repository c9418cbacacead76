/**
 * The qemu provider's small pure parts: the DHCP packets of the cloud daemon (providers/local/dhcp-server.ts; the
 * server itself answers on the gateway's bridge, which test/e2e/vm.test.ts exercises), what the guest reads (default
 * gateway, state disk by serial), the QEMU command line, the image folder rules and the accelerator choice.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { addressOfMac, dhcpReply, parseDhcpRequest } from '../../../providers/local/dhcp-server.js';
import { chooseAccel } from '../../../providers/qemu/accel.js';
import { resolveQemuImage } from '../../../providers/qemu/image.js';
import {
  defaultGateway,
  findStateDisk,
  imageVersionOf,
  STATE_DISK_SERIAL,
} from '../../../providers/qemu/node-platform.js';
import { qemuArgs } from '../../../providers/qemu/vm.js';

/** A BOOTREQUEST as busybox udhcpc sends it: message type `type`, MAC 02:00:0a:d5:05:64 (10.213.5.100). */
function request(type: number, mac = [0x02, 0x00, 10, 213, 5, 100]): Buffer {
  const head = Buffer.alloc(240);
  head[0] = 1;
  head[1] = 1;
  head[2] = 6;
  head.writeUInt32BE(0x12345678, 4);
  Buffer.from(mac).copy(head, 28);
  head.writeUInt32BE(0x63825363, 236);
  return Buffer.concat([head, Buffer.from([53, 1, type, 255])]);
}

/** The options of a reply: code → value. */
function options(packet: Buffer): Map<number, Buffer> {
  const out = new Map<number, Buffer>();
  for (let at = 240; packet[at] !== 255; at += 2 + packet[at + 1]!)
    out.set(packet[at]!, packet.subarray(at + 2, at + 2 + packet[at + 1]!));
  return out;
}

describe('qemu provider: DHCP of the cloud daemon', () => {
  it('reads a DISCOVER: transaction id, MAC and message type', () => {
    const parsed = parseDhcpRequest(request(1));
    assert.equal(parsed?.xid, 0x12345678);
    assert.equal(parsed?.type, 1);
    assert.equal(parsed?.chaddr.toString('hex'), '0200' + '0ad50564');
  });

  it('ignores what is not a DHCP request (a reply, no magic cookie, a truncated option)', () => {
    const reply = request(1);
    reply[0] = 2;
    assert.equal(parseDhcpRequest(reply), undefined);
    const noMagic = request(1);
    noMagic.writeUInt32BE(0, 236);
    assert.equal(parseDhcpRequest(noMagic), undefined);
    assert.equal(parseDhcpRequest(Buffer.concat([request(1).subarray(0, 240), Buffer.from([53, 9, 1])])), undefined);
  });

  it('maps only MACs of our form to an address', () => {
    assert.equal(addressOfMac(Buffer.from([0x02, 0x00, 10, 213, 5, 100])), '10.213.5.100');
    assert.equal(addressOfMac(Buffer.from([0x52, 0x54, 0x00, 0x12, 0x34, 0x56])), undefined);
  });

  it("offers the address with a /24, the gateway as router and server, and the request's transaction id", () => {
    const offer = dhcpReply(parseDhcpRequest(request(1))!, 2, '10.213.5.100', '10.213.5.1');
    assert.equal(offer[0], 2);
    assert.equal(offer.readUInt32BE(4), 0x12345678);
    assert.deepEqual([...offer.subarray(16, 20)], [10, 213, 5, 100]);
    const opts = options(offer);
    assert.deepEqual([...opts.get(53)!], [2]);
    assert.deepEqual([...opts.get(1)!], [255, 255, 255, 0]);
    assert.deepEqual([...opts.get(3)!], [10, 213, 5, 1]);
    assert.deepEqual([...opts.get(54)!], [10, 213, 5, 1]);
  });
});

describe('qemu provider: what the guest reads', () => {
  it('finds the default gateway in /proc/net/route (little-endian hex)', () => {
    const routes =
      'Iface\tDestination\tGateway \tFlags\n' + 'eth0\t0005D50A\t00000000\t0001\n' + 'eth0\t00000000\t0105D50A\t0003\n';
    assert.equal(defaultGateway(routes), '10.213.5.1');
    assert.equal(defaultGateway('Iface\tDestination\tGateway\n'), undefined);
  });

  it('reads the image version from os-release', () => {
    assert.equal(imageVersionOf('NAME="Constellation"\nIMAGE_VERSION="v1.2.0"\n'), 'v1.2.0');
    assert.equal(imageVersionOf('NAME="Debian"\n'), undefined);
  });

  it('finds the state disk by its virtio serial, else /dev/vdb', async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'qemu-guest-'));
    try {
      await fs.mkdir(path.join(root, 'block', 'vda'), { recursive: true });
      await fs.mkdir(path.join(root, 'block', 'vdc'), { recursive: true });
      await fs.writeFile(path.join(root, 'block', 'vdc', 'serial'), `${STATE_DISK_SERIAL}\n`);
      const files = { cmdline: '', routes: '', blockDevices: path.join(root, 'block'), devices: '/dev' };
      assert.equal(await findStateDisk(files), '/dev/vdc');
      await fs.rm(path.join(root, 'block', 'vdc'), { recursive: true });
      assert.equal(await findStateDisk(files), '/dev/vdb');
    } finally {
      await fs.rm(root, { recursive: true, force: true });
    }
  });
});

describe('qemu provider: host side', () => {
  it('boots with -nodefaults, the image disk as the only boot option, no option ROM on the network card and a virtio-rng device', () => {
    const paths = {
      bootDisk: '/n/boot.qcow2',
      stateDisk: '/n/state.raw',
      firmwareVars: '/n/VARS.fd',
      qmpSocket: '/r/qmp.sock',
      qemuLog: '/n/qemu.log',
      serialLog: '/n/node.log',
    };
    const args = qemuArgs('worker-0', '10.213.5.100', paths, '/r/swtpm.sock.ctrl', {
      vcpus: 2,
      memoryMiB: 2048,
      firmware: '/fw/CODE.fd',
      firmwareVars: '/fw/VARS.fd',
      accel: 'tcg',
    });
    assert.ok(args.includes('-nodefaults'));
    assert.equal(args.filter((a) => a.includes('bootindex')).length, 1);
    assert.ok(args.includes('virtio-blk-pci,drive=boot,bootindex=1'));
    assert.ok(args.includes('virtio-net-pci,netdev=net0,mac=02:00:0a:d5:05:64,romfile='));
    assert.ok(args.includes('tpm-crb,tpmdev=tpm0'));
    // The host's randomness for the guest (the firmware's EFI_RNG_PROTOCOL seeds the kernel before Node.js starts).
    assert.ok(args.includes('rng-random,id=rng0,filename=/dev/urandom'));
    assert.ok(args.includes('virtio-rng-pci,rng=rng0'));
  });

  it('refuses an image folder without signed measurements, naming the missing file', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'qemu-image-'));
    try {
      await fs.writeFile(path.join(dir, 'constellation-qemu-v1.raw'), '');
      await fs.writeFile(path.join(dir, 'measurements.json'), '{}');
      await assert.rejects(
        resolveQemuImage(dir),
        /has no measurements\.json\.sig: an image without signed measurements is refused/,
      );
      await fs.writeFile(path.join(dir, 'measurements.json.sig'), '');
      assert.equal((await resolveQemuImage(dir)).rawDisk, path.join(dir, 'constellation-qemu-v1.raw'));
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it("chooses the accelerator: the config's, TCG without /dev/kvm, else a probe remembered per kernel", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'qemu-accel-'));
    try {
      const base = {
        rawDisk: '/x.raw',
        firmware: '/c',
        firmwareVars: '/v',
        kernelKey: 'linux@abc',
        rememberIn: path.join(dir, 'accel.json'),
      };
      let probes = 0;
      const probe = async () => (probes++, false);
      assert.equal((await chooseAccel('kvm', base, probe)).accel, 'kvm');
      assert.equal((await chooseAccel('auto', { ...base, kvmDevice: path.join(dir, 'no-kvm') }, probe)).accel, 'tcg');
      const device = path.join(dir, 'kvm');
      await fs.writeFile(device, '');
      assert.deepEqual(await chooseAccel('auto', { ...base, kvmDevice: device }, probe), {
        accel: 'tcg',
        reason: 'a probe boot of this kernel under KVM hung',
      });
      await chooseAccel('auto', { ...base, kvmDevice: device }, probe);
      assert.equal(probes, 1, 'the answer is remembered');
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
