/**
 * The local cluster's network (providers/local/network.ts): which address ranges a cluster may take, how a range is
 * reserved when clusters are created at the same time, and what the namespaces leave behind. The claims run the
 * real `ip` on this machine (as root), in namespaces named after a random network id, so they touch nothing else.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  candidateRanges,
  ClusterNetwork,
  type IpRunner,
  macAddress,
  netnsPath,
  newNetworkId,
  parseAddressPool,
  parseCidr,
  parseRoutes,
  rangeLink,
  runIp,
} from '../../../providers/local/network.js';
import { CLI, REPO_ROOT } from '../../support/cli.js';
import { NOBODY, rootLinkExists } from './support.js';

describe('local provider: address ranges', () => {
  const pool = parseAddressPool('10.213.0.0/16');

  it('offers every /24 of the pool once, from a random start', () => {
    const all = candidateRanges(pool, [], () => 0.5);
    assert.equal(all.length, 256);
    assert.equal(new Set(all).size, 256);
    assert.equal(all[0], '10.213.128');
    assert.ok(all.every((p) => /^10\.213\.\d{1,3}$/.test(p)));
    assert.notEqual(candidateRanges(pool, [], () => 0)[0], candidateRanges(pool, [], () => 0.99)[0]);
  });

  it('leaves out every range that overlaps a route of the machine, whatever its size', () => {
    const routes = ['10.213.7.0/24', '10.213.16.0/20', '10.213.200.5', '10.0.0.0/9'].map((r) => parseCidr(r)!);
    const left = new Set(candidateRanges(pool, routes, () => 0));
    assert.equal(left.has('10.213.7'), false);
    for (let n = 16; n < 32; n++) assert.equal(left.has(`10.213.${n}`), false, `10.213.${n} is inside 10.213.16.0/20`);
    assert.equal(left.has('10.213.200'), false, 'a host route inside the range');
    assert.equal(left.has('10.213.6'), true);
    assert.equal(left.size, 256 - 1 - 16 - 1);
    assert.deepEqual(
      candidateRanges(pool, [parseCidr('10.128.0.0/9')!]),
      [],
      'a route that covers the whole pool leaves nothing',
    );
  });

  it('reads the routes of `ip -j -4 route show table all`, without default routes', () => {
    const json = JSON.stringify([
      { dst: 'default', gateway: '192.0.2.1', dev: 'eth0' },
      { dst: '192.0.2.0/24', dev: 'eth0' },
      { type: 'local', dst: '127.0.0.1', dev: 'lo', table: 'local' },
      { type: 'unreachable', dst: '0.0.0.0/0', table: '100' },
    ]);
    assert.deepEqual(parseRoutes(json), [parseCidr('192.0.2.0/24'), parseCidr('127.0.0.1/32')]);
  });

  it('takes a pool from /8 to /24, given as its network address, and refuses anything else naming the variable', () => {
    assert.deepEqual(parseAddressPool('10.99.4.0/24'), { base: (10 << 24) + (99 << 16) + (4 << 8), bits: 24 });
    assert.equal(candidateRanges(parseAddressPool('10.99.4.0/24'), []).join(), '10.99.4');
    for (const [text, why] of [
      ['10.213.0.0', /is not an IPv4 network/],
      ['10.213.0.0/25', /between \/8 and \/24/],
      ['10.0.0.0/7', /between \/8 and \/24/],
      ['10.213.5.0/16', /not a network address \(did you mean 10\.213\.0\.0\/16\?\)/],
      ['10.213.300.0/24', /is not an IPv4 network/],
      ['fd00::/64', /is not an IPv4 network/],
    ] as const) {
      assert.throws(
        () => parseAddressPool(text),
        (err: Error & { hint?: string }) =>
          why.test(err.message) && /CONSTELLATION_LOCAL_ADDRESS_POOL/.test(err.hint ?? ''),
        text,
      );
    }
  });

  it('names the link that reserves a range after the range, within the 15 characters a link name may have', () => {
    assert.equal(rangeLink('10.213.5'), 'cnet-0ad505');
    assert.equal(rangeLink('255.255.255'), 'cnet-ffffff');
    assert.equal(macAddress('10.213.5.100'), '02:00:0a:d5:05:64');
  });
});

describe('local provider: network namespaces (root)', function () {
  this.timeout(30_000);
  const networks: ClusterNetwork[] = [];
  const network = (ip: IpRunner = runIp) => {
    const made = new ClusterNetwork(newNetworkId(), ip);
    networks.push(made);
    return made;
  };
  // A range of the default pool's neighbourhood that nothing on a test machine uses; one test at a time claims it.
  const free = async () => {
    const routes = await network().routes();
    return candidateRanges(parseAddressPool('10.214.0.0/16'), routes)[0];
  };

  afterEach(async () => {
    for (const n of networks.splice(0)) await n.remove();
  });

  it('gives a range to exactly one of several clusters that claim it at the same time', async () => {
    const prefix = await free();
    const rivals = [network(), network(), network(), network()];
    await Promise.all(rivals.map((n) => n.ensureGateway()));
    const won = await Promise.all(rivals.map((n) => n.claimRange(prefix)));
    assert.equal(won.filter(Boolean).length, 1, `claims: ${won.join(', ')}`);
    const winner = rivals[won.indexOf(true)];
    assert.equal((await winner.ensureGateway()).uplink, true, 'the winner holds the range');
    // Given up, the range is free at once (the uplink's deletion takes its peer with it).
    await winner.releaseRange();
    assert.equal(await rootLinkExists(rangeLink(prefix)), false);
    assert.equal(await rivals[(won.indexOf(true) + 1) % 4].claimRange(prefix), true);
  });

  it('plugs nodes into the bridge and removes every namespace and link it made', async () => {
    const prefix = await free();
    let ipRuns = 0;
    const net = network((args, batch) => {
      ipRuns++;
      return runIp(args, batch);
    });
    const present = await net.ensureGateway();
    assert.deepEqual(present, { bridge: false, uplink: false });
    assert.equal(await net.claimRange(prefix), true);
    await net.configure(prefix, present);
    await net.plugNode('worker-0', 100, `${prefix}.100`);
    ipRuns = 0;
    // Together, as create plugs its nodes: worker-0 again (as on a reboot) and two new ones, in 2 + 3 runs of ip
    // (worker-0's old link on the bridge is deleted first), not 3 per node.
    await net.plugNodes([
      { node: 'worker-0', host: 100, address: `${prefix}.100` },
      { node: 'worker-1', host: 101, address: `${prefix}.101` },
      { node: 'worker-2', host: 102, address: `${prefix}.102` },
    ]);
    assert.equal(ipRuns, 6);
    assert.deepEqual(await net.ensureGateway(), { bridge: true, uplink: true });
    for (const [node, address] of [
      ['worker-0', `${prefix}.100`],
      ['worker-2', `${prefix}.102`],
    ]) {
      const inNode = await ipJson(['-n', net.nodeNetns(node), '-j', 'addr', 'show', 'dev', 'eth0']);
      assert.deepEqual(
        inNode[0].addr_info.filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`),
        [`${address}/24`],
      );
      assert.equal(inNode[0].address, macAddress(address));
    }
    await net.unplugNode('worker-2', 102);

    await net.unplugNode('worker-1', 101);
    await fs.access(netnsPath(net.nodeNetns('worker-1'))).then(
      () => assert.fail('worker-1 still has a namespace'),
      () => undefined,
    );
    assert.deepEqual(await net.namespaces(), [net.nodeNetns('worker-0'), net.gateway]);
    await net.remove();
    assert.deepEqual(await net.namespaces(), []);
    assert.equal(await rootLinkExists(rangeLink(prefix)), false);
    await net.remove(); // nothing left: nothing to do
  });

  it('tells a user who is not root that the local provider needs root', async () => {
    const script = `
      const { ClusterNetwork } = await import(${JSON.stringify(`${REPO_ROOT}/providers/local/network.ts`)});
      try { await new ClusterNetwork('0123456789ab').ensureGateway(); } catch (err) { console.log(JSON.stringify({ message: err.message, hint: err.hint })); }`;
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '-e', script],
        { uid: NOBODY, gid: NOBODY, cwd: REPO_ROOT },
        (err, stdout) => (err ? reject(err) : resolve(stdout)),
      ),
    );
    const { message, hint } = JSON.parse(out) as { message: string; hint: string };
    assert.equal(message, 'The local provider needs root: its nodes run in their own network namespaces.');
    assert.match(hint, /Run the CLI as root/);
  });

  it('mini up run by a user who is not root says so, before the provider makes any node, namespace or record', async () => {
    const ws = await fs.mkdtemp(path.join(os.tmpdir(), 'cl-nonroot-'));
    try {
      await fs.chown(ws, NOBODY, NOBODY);
      const res = await new Promise<{ code: number; stderr: string }>((resolve) =>
        execFile(
          process.execPath,
          [CLI, 'mini', 'up', '-C', ws],
          { uid: NOBODY, gid: NOBODY, cwd: ws, env: { ...process.env, HOME: ws } },
          (err, _out, stderr) => resolve({ code: err ? Number(err.code) : 0, stderr }),
        ),
      );
      assert.notEqual(res.code, 0);
      assert.match(
        res.stderr,
        /The local provider needs root: its nodes run in their own network namespaces\. Nothing was started or written\./,
      );
      assert.match(res.stderr, /Hint: Run the command as root/);
      await assert.rejects(fs.stat(path.join(ws, 'constellation-local', 'cluster.json')), { code: 'ENOENT' });
      await assert.rejects(fs.stat(path.join(ws, 'constellation-local', 'nodes')), { code: 'ENOENT' });
    } finally {
      await fs.rm(ws, { recursive: true, force: true });
    }
  });
});

function ipJson(
  args: string[],
): Promise<{ address: string; addr_info: { family: string; local: string; prefixlen: number }[] }[]> {
  return new Promise((resolve, reject) =>
    execFile('ip', args, (err, stdout) => (err ? reject(err) : resolve(JSON.parse(stdout)))),
  );
}
