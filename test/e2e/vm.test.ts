/**
 * `mini up --vm` end to end, on real VMs (QEMU + OVMF + swtpm, TCG here): one cluster of 1 control plane and 1
 * worker that boots the shared built qemu image (test/support/built-image.ts) and goes through its life in order:
 * up (both nodes join), verify (PCR 4, 9 and 11 of every node are `image measure` of the image), the TPM's one PCR
 * bank (SHA-256: the boot report's event log lists no other and replays to the reported PCRs), the state disks
 * (LUKS2 with dm-integrity, formatted and opened inside the guest; only ciphertext on the host), emergency SSH
 * (`constellation ssh --key`, then OpenSSH's client logs into each node's sshd with the certificate, accepting the
 * host by its host certificate alone; a bare key is refused), a worker reboot (a power cycle: a new QEMU on the same
 * TPM state and disks; it rejoins and reads back what it wrote to its disk before), a reboot of every control plane
 * (it waits; `recover` brings it back), `upgrade check` and `upgrade apply` to a second image (the same inputs built
 * as another version: its os-release differs, so PCR 4, 9 and 11 do; test/support/built-image.ts), and terminate (no
 * process, namespace, tap device or disk file left). One cluster for all, because each VM boot costs minutes here;
 * each `it` checks one thing and names it. A second, one-node cluster boots a disk whose initrd differs from the one
 * its signed measurements describe (an attacker's swap) and is refused.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { clusterPaths } from '../../providers/local/layout.js';
import { findOwnedProcesses } from '../../providers/local/processes.js';
import { ClusterNetwork, NETNS_DIR } from '../../providers/local/network.js';
import { ClusterFile } from '../../providers/local/cluster-file.js';
import { buildNodeImage } from '../../lib/node-image/build/index.js';
import { defaultBuildDeps, pinnedNodeBinary } from '../../lib/node-image/build/defaults.js';
import {
  builtQemuImage,
  builtQemuUpgradeImage,
  missingPackages,
  NODE_PROGRAM_DIR,
  UPGRADE_VERSION,
  type BuiltTestImage,
} from '../support/built-image.js';
import { runCli, type CliResult } from '../support/cli.js';
import { parseBootReport } from '../support/vm-boot.js';
import { parseEventLog, replayEventLog } from '../../lib/attestation/eventlog.js';
import { TPM_ALG } from '../../lib/tpm/constants.js';

interface VerifyJson {
  nodes: { node: string; outcome: string; reason?: string; pcrs?: Record<string, string> }[];
}

/** The node program's log lines with message `msg` (JSON lines amid the serial console's output). */
function logRecords(log: string, msg: string): Record<string, unknown>[] {
  const records: Record<string, unknown>[] = [];
  for (const line of log.split('\n')) {
    const start = line.indexOf('{"time"');
    if (start < 0 || !line.includes(`"msg":"${msg}"`)) continue;
    try {
      records.push(JSON.parse(line.slice(start).trim()) as Record<string, unknown>);
    } catch {
      // a line the console cut
    }
  }
  return records;
}

/** `ssh root@<address> <command>` with strict host checking against `knownHosts` only; exit code and output. */
function ssh(
  address: string,
  keyFile: string,
  certificateFile: string,
  knownHosts: string,
  command: string,
): Promise<{ code: number; output: string }> {
  const args = [
    '-F',
    '/dev/null',
    '-i',
    keyFile,
    '-o',
    `CertificateFile=${certificateFile}`,
    '-o',
    'IdentitiesOnly=yes',
  ];
  args.push('-o', 'BatchMode=yes', '-o', 'ConnectTimeout=30', '-o', 'StrictHostKeyChecking=yes');
  args.push(
    '-o',
    `UserKnownHostsFile=${knownHosts}`,
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    `root@${address}`,
    command,
  );
  return new Promise((resolve) => {
    execFile('ssh', args, { timeout: 90_000, env: { ...process.env, SSH_AUTH_SOCK: '' } }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, output: `${stdout}${stderr}` }),
    );
  });
}

/** The JSON metadata of a LUKS2 header (after the 4 KiB binary header, up to hdr_size). */
async function luks2Metadata(
  file: string,
): Promise<{ segments: Record<string, { encryption: string; integrity?: { type: string } }> }> {
  const disk = await fs.open(file, 'r');
  try {
    const header = Buffer.alloc(4096);
    await disk.read(header, 0, 4096, 0);
    const size = Number(header.readBigUInt64BE(8));
    const json = Buffer.alloc(size - 4096);
    await disk.read(json, 0, json.length, 4096);
    return JSON.parse(json.subarray(0, json.indexOf(0)).toString('utf8')) as never;
  } finally {
    await disk.close();
  }
}

describe('mini up --vm: a cluster of QEMU VMs that boot the node image (TCG)', function () {
  this.timeout(45 * 60_000);
  let image: BuiltTestImage;
  let ws: string;
  let netId: string | undefined;
  const cli = (args: string[]): Promise<CliResult> =>
    runCli([...args, '-C', ws], { cwd: ws, env: { XDG_CONFIG_HOME: image.configHome } });
  const nodeLog = (name: string) => fs.readFile(path.join(clusterPaths(ws).nodesDir, name, 'node.log'), 'latin1');

  before(async function () {
    const missing = await missingPackages();
    if (missing.length > 0) {
      if (process.env.CI === 'true')
        throw new Error(`the package cache lacks ${missing.join(', ')}: run \`npm run image-inputs\``);
      this.skip();
    }
    image = await builtQemuImage();
    ws = await fs.mkdtemp(path.join(os.tmpdir(), 'vm-cluster-'));
  });

  after(async function () {
    if (!ws) return;
    const paths = clusterPaths(ws);
    netId ??= (await ClusterFile.load(paths).catch(() => undefined))?.record.netId;
    await cli(['terminate', '-y']).catch(() => undefined);
    for (const pid of await findOwnedProcesses(paths.dir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    if (netId) await new ClusterNetwork(netId).remove().catch(() => undefined);
    await fs.rm(ws, { recursive: true, force: true });
  });

  it('mini up --vm -c 1 -w 1 boots both VMs, and both join', async () => {
    const res = await cli(['mini', 'up', '--vm', '--image', image.dir, '-c', '1', '-w', '1', '-y']);
    assert.equal(res.code, 0, `mini up --vm failed:\n${res.stderr}\n${res.stdout}`);
    assert.match(res.stdout, /2 nodes joined/);
    assert.match(res.stdout, /booting VM control-plane-0 \((TCG|KVM): /, 'mini up says which accelerator runs the VM');
    netId = (await ClusterFile.load(clusterPaths(ws)))?.record.netId;
  });

  it('verify --all: every node VERIFIED, with PCR 4, 9 and 11 equal to `image measure` of the image', async () => {
    const measured = await runCli(['image', 'measure', image.rawDisk, '--json']);
    assert.equal(measured.code, 0, measured.stderr);
    const predicted = (JSON.parse(measured.stdout) as { pcrs: Record<string, string> }).pcrs;
    const res = await cli(['verify', '--all', '-o', 'json']);
    assert.equal(res.code, 0, `verify failed:\n${res.stderr}\n${res.stdout}`);
    const { nodes } = JSON.parse(res.stdout) as VerifyJson;
    assert.deepEqual(nodes.map((n) => n.node).sort(), ['control-plane-0', 'worker-0']);
    for (const node of nodes) {
      assert.equal(node.outcome, 'verified', `${node.node}: ${node.reason}`);
      for (const pcr of ['4', '9', '11']) assert.equal(node.pcrs?.[pcr], predicted[pcr], `${node.node} PCR ${pcr}`);
    }
  });

  it("each node's TPM has the SHA-256 PCR bank alone (the firmware hashes each measured byte once): the event log of its boot report lists SHA-256 only and replays to the PCRs the report shows", async () => {
    for (const name of ['control-plane-0', 'worker-0']) {
      const { pcrs, eventLog } = parseBootReport(await nodeLog(name));
      const log = parseEventLog(eventLog);
      assert.deepEqual(
        log.specId.algorithms.map((a) => a.algorithmId),
        [TPM_ALG.SHA256],
        `${name}: the event log's banks`,
      );
      const replayed = replayEventLog(log).get(TPM_ALG.SHA256)!;
      for (const pcr of [0, 1, 2, 3, 4, 5, 6, 7, 9, 11])
        assert.equal(
          Buffer.from(replayed.get(pcr) ?? Buffer.alloc(32)).toString('hex'),
          pcrs.get(pcr),
          `${name} PCR ${pcr}`,
        );
    }
  });

  it("each node formatted its state disk as LUKS2 with dm-integrity inside the guest: the node's log says so, the host file holds a LUKS2 header with hmac(sha256)", async () => {
    for (const name of ['control-plane-0', 'worker-0']) {
      const formatted = logRecords(await nodeLog(name), 'state disk formatted');
      assert.equal(formatted.length, 1, `${name}'s log says "state disk formatted" once`);
      console.log(
        `      ${name}: LUKS2 + dm-integrity format, mkfs and mount took ${formatted[0]!.ms} ms in the guest`,
      );
      const metadata = await luks2Metadata(path.join(clusterPaths(ws).nodesDir, name, 'state.raw'));
      assert.equal(metadata.segments['0']?.encryption, 'aes-xts-plain64', `${name}: cipher`);
      assert.equal(metadata.segments['0']?.integrity?.type, 'hmac(sha256)', `${name}: dm-integrity`);
      const disk = await fs.open(path.join(clusterPaths(ws).nodesDir, name, 'state.raw'), 'r');
      try {
        const header = Buffer.alloc(8);
        await disk.read(header, 0, 8, 0);
        assert.deepEqual([...header.subarray(0, 6)], [0x4c, 0x55, 0x4b, 0x53, 0xba, 0xbe], `${name}: LUKS magic`);
        assert.equal(header.readUInt16BE(6), 2, `${name}: LUKS version 2`);
      } finally {
        await disk.close();
      }
    }
  });

  it("constellation ssh: the certificate logs into each node's sshd, which the CA's known_hosts line accepts with strict checking; a bare key is refused", async () => {
    const keyFile = path.join(ws, 'id_ed25519');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'operator', '-f', keyFile]);
    const res = await cli(['ssh', '--key', `${keyFile}.pub`]);
    assert.equal(res.code, 0, res.stderr);
    const knownHosts = path.join(ws, 'constellation-known-hosts');
    assert.match(await fs.readFile(knownHosts, 'utf8'), /^@cert-authority \* ssh-ed25519 \S+ /);
    const record = (await ClusterFile.load(clusterPaths(ws)))!.record;
    for (const name of ['control-plane-0', 'worker-0']) {
      const address = `${record.prefix}.${record.nodes[name]!.host}`;
      // sshd starts once the node is in its cluster (after mini up returned, at most a moment later).
      const deadline = Date.now() + 60_000;
      while (logRecords(await nodeLog(name), 'emergency SSH server started').length === 0) {
        assert.ok(Date.now() < deadline, `${name}: no "emergency SSH server started" in its log`);
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
      const login = await ssh(
        address,
        keyFile,
        `${keyFile}-cert.pub`,
        knownHosts,
        'cat /etc/os-release; ip -4 -o addr',
      );
      assert.equal(login.code, 0, `${name}: ${login.output}`);
      assert.match(login.output, /IMAGE_VERSION="v0\.0\.1-test"/, `${name}: the command ran on the node`);
      assert.match(login.output, new RegExp(`inet ${address.replace(/\./g, '\\.')}/`), `${name}: on its address`);
      const bare = await ssh(address, keyFile, '/dev/null', knownHosts, 'true');
      assert.equal(bare.code, 255, `${name}: the bare key`);
      assert.match(bare.output, /Permission denied \(publickey\)/, `${name}: the bare key`);
    }
  });

  it('mini reboot worker-0 power-cycles the VM (a new QEMU and swtpm on the same TPM state and disks): it boots again, rejoins reading back what it wrote to its disk, and verifies', async () => {
    const before = (await nodeLog('worker-0')).split('CONSTELLATION-BOOT end').length;
    // The boot history on the state disk: the join wrote its first entry; the rejoin reads it back and appends.
    const written = logRecords(await nodeLog('worker-0'), 'boot history recorded');
    assert.deepEqual(
      written.map((r) => r.entries),
      [1],
      'the join wrote one entry to the state disk',
    );
    const res = await cli(['mini', 'reboot', 'worker-0']);
    assert.equal(res.code, 0, res.stderr);
    const deadline = Date.now() + 20 * 60_000;
    for (;;) {
      const log = await nodeLog('worker-0');
      if (log.split('CONSTELLATION-BOOT end').length > before && logRecords(log, 'boot history recorded').length > 1)
        break;
      assert.ok(Date.now() < deadline, 'worker-0 did not boot again and rejoin');
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
    const log = await nodeLog('worker-0');
    assert.match(log, /"state disk unlocked"/);
    const reread = logRecords(log, 'boot history recorded').at(-1)!;
    assert.equal(reread.entries, 2, 'the rejoin appended to the history it read');
    assert.equal(
      reread.first,
      written[0]!.first,
      'the entry written before the reboot reads back intact through dm-crypt and dm-integrity',
    );
    const verified = await cli(['verify', '--all', '-o', 'json']);
    assert.equal(verified.code, 0, verified.stderr);
    for (const node of (JSON.parse(verified.stdout) as VerifyJson).nodes)
      assert.equal(node.outcome, 'verified', `${node.node}: ${node.reason}`);
  });

  it('mini reboot of every control plane: it waits for recovery, `recover` brings it back, verify --all OK', async () => {
    const boots = (await nodeLog('control-plane-0')).split('CONSTELLATION-BOOT end').length;
    const started = Date.now();
    const res = await cli(['mini', 'reboot', 'control-plane-0']);
    assert.equal(res.code, 0, res.stderr);
    const deadline = Date.now() + 20 * 60_000;
    for (;;) {
      const log = await nodeLog('control-plane-0');
      if (
        log.split('CONSTELLATION-BOOT end').length > boots &&
        /"bootstrapper started"/.test(log.slice(log.lastIndexOf('CONSTELLATION-BOOT end')))
      )
        break;
      assert.ok(Date.now() < deadline, 'control-plane-0 did not boot again');
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
    const booted = Date.now();
    const recovered = await cli(['recover']);
    assert.equal(recovered.code, 0, `recover failed:\n${recovered.stderr}\n${recovered.stdout}`);
    // The recover call that brought the node back got its answer (the node did not cut it off while resuming).
    assert.match(recovered.stdout, /recovered control-plane-0/);
    const recoveredAt = Date.now();
    assert.match(
      await nodeLog('control-plane-0'),
      /"recovered: state disk unlocked with the master secret from the CLI"/,
    );
    const verified = await cli(['verify', '--all', '-o', 'json']);
    assert.equal(verified.code, 0, verified.stderr);
    for (const node of (JSON.parse(verified.stdout) as VerifyJson).nodes)
      assert.equal(node.outcome, 'verified', `${node.node}: ${node.reason}`);
    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    console.log(
      `      reboot to "bootstrapper started" ${s(booted - started)}, recover ${s(recoveredAt - booted)}, verify --all ${s(Date.now() - recoveredAt)}`,
    );
  });

  it('upgrade check offers the second image of the qemu image store; upgrade apply replaces both nodes with VMs of it, each verified', async () => {
    const next = await builtQemuUpgradeImage();
    if (next.buildMs > 0) console.log(`      built ${UPGRADE_VERSION} in ${Math.round(next.buildMs / 1000)} s`);
    const check = await cli(['upgrade', 'check', '--update-config']);
    assert.equal(check.code, 0, `upgrade check failed:\n${check.stderr}\n${check.stdout}`);
    assert.match(check.stdout, new RegExp(`${UPGRADE_VERSION}\\s+newer`), check.stdout);
    assert.match(check.stdout, new RegExp(`Wrote image ${UPGRADE_VERSION}`));

    const started = Date.now();
    const res = await cli(['upgrade', 'apply', '-y', '--timeout', '900']);
    assert.equal(res.code, 0, `upgrade apply failed:\n${res.stderr}\n${res.stdout}`);
    console.log(`      upgrade apply 1 + 1: ${Math.round((Date.now() - started) / 1000)} s`);
    assert.match(res.stdout, /Upgraded: control-plane-0 → \S+, worker-0 → \S+\./);

    const measured = await runCli(['image', 'measure', next.rawDisk, '--json']);
    assert.equal(measured.code, 0, measured.stderr);
    const predicted = (JSON.parse(measured.stdout) as { pcrs: Record<string, string> }).pcrs;
    const verified = await cli(['verify', '--all', '-o', 'json']);
    assert.equal(verified.code, 0, verified.stderr);
    const { nodes } = JSON.parse(verified.stdout) as VerifyJson;
    assert.equal(nodes.length, 2);
    assert.ok(!nodes.some((n) => n.node === 'control-plane-0' || n.node === 'worker-0'), 'both old nodes are gone');
    for (const node of nodes) {
      assert.equal(node.outcome, 'verified', `${node.node}: ${node.reason}`);
      for (const pcr of ['4', '9', '11'])
        assert.equal(node.pcrs?.[pcr], predicted[pcr], `${node.node} PCR ${pcr} is the new image's`);
    }
    const status = await cli(['status', '--json']);
    assert.equal(status.code, 0, status.stderr);
    const entries = (
      JSON.parse(status.stdout) as { nodes: { name: string; upToDate?: boolean; outdated?: string[] }[] }
    ).nodes;
    for (const n of entries) assert.equal(n.upToDate, true, `${n.name}: ${n.outdated?.join('; ')}`);
  });

  it('terminate leaves no process, namespace, tap device or disk file', async () => {
    const paths = clusterPaths(ws);
    const res = await cli(['terminate', '-y']);
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(await findOwnedProcesses(paths.dir), []);
    const namespaces = (await fs.readdir(NETNS_DIR).catch(() => [] as string[])).filter(
      (n) => netId && n.includes(netId),
    );
    assert.deepEqual(namespaces, [], 'namespaces of the cluster (and the tap devices inside them)');
    assert.equal(await fs.stat(paths.dir).catch(() => undefined), undefined, 'the cluster folder with the disks');
    assert.equal(
      await fs.stat(paths.runtimeDir).catch(() => undefined),
      undefined,
      'the runtime folder with the QMP sockets',
    );
  });
});

describe('mini up --vm on a disk whose initrd changed after its measurements were signed', function () {
  this.timeout(45 * 60_000);
  let work: string | undefined;
  let ws: string | undefined;

  after(async function () {
    if (ws) {
      const paths = clusterPaths(ws);
      const netId = (await ClusterFile.load(paths).catch(() => undefined))?.record.netId;
      await runCli(['terminate', '-y', '-C', ws], { cwd: ws }).catch(() => undefined);
      for (const pid of await findOwnedProcesses(paths.dir)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      if (netId) await new ClusterNetwork(netId).remove().catch(() => undefined);
      await fs.rm(ws, { recursive: true, force: true });
    }
    if (work) await fs.rm(work, { recursive: true, force: true });
  });

  it('the node is refused at init and gets nothing; verify -e names PCR 9 and 11', async function () {
    const missing = await missingPackages();
    if (missing.length > 0) {
      if (process.env.CI === 'true')
        throw new Error(`the package cache lacks ${missing.join(', ')}: run \`npm run image-inputs\``);
      this.skip();
    }
    const image = await builtQemuImage();
    work = await fs.mkdtemp(path.join(os.tmpdir(), 'vm-swapped-'));
    // The other disk: the same build with one more line in the node program, so only the initrd differs.
    const program = path.join(work, 'node-program');
    await fs.cp(NODE_PROGRAM_DIR, program, { recursive: true });
    await fs.appendFile(path.join(program, 'main.cjs'), '// changed after measuring\n');
    const other = path.join(work, 'other');
    const built = await buildNodeImage(
      {
        provider: 'qemu',
        outDir: other,
        version: 'v0.0.1-test',
        packageCache: image.packageCache,
        nodeProgramDir: program,
        node: await pinnedNodeBinary(),
        download: false,
      },
      defaultBuildDeps(undefined, path.join(work, 'other-key')),
    );
    // The attacker's folder: that disk under the image's genuine signed measurements.
    const swapped = path.join(work, 'swapped');
    await fs.mkdir(swapped);
    await fs.copyFile(built.rawDisk, path.join(swapped, path.basename(image.rawDisk)));
    for (const file of ['measurements.json', 'measurements.json.sig', 'manifest.json'])
      await fs.copyFile(path.join(image.dir, file), path.join(swapped, file));

    ws = await fs.mkdtemp(path.join(os.tmpdir(), 'vm-refused-'));
    const env = { XDG_CONFIG_HOME: image.configHome };
    const up = await runCli(['mini', 'up', '--vm', '--image', swapped, '-c', '1', '-w', '0', '-y', '-C', ws], {
      cwd: ws,
      env,
    });
    assert.notEqual(up.code, 0, up.stdout);
    assert.match(up.stderr, /PCR 9\b/);
    assert.match(up.stderr, /PCR 11\b/);
    const log = await fs.readFile(path.join(clusterPaths(ws).nodesDir, 'control-plane-0', 'node.log'), 'latin1');
    assert.doesNotMatch(log, /"state disk formatted"|extended PCR 15/, 'the refused node got no secret');

    const record = (await ClusterFile.load(clusterPaths(ws)))!.record;
    const address = `${record.prefix}.${record.nodes['control-plane-0']!.host}`;
    const verify = await runCli(['verify', '-e', address, '--cluster-id', '0'.repeat(64), '-C', ws], { cwd: ws, env });
    assert.notEqual(verify.code, 0);
    assert.match(`${verify.stdout}${verify.stderr}`, /PCR 9\b/);
    assert.match(`${verify.stdout}${verify.stderr}`, /PCR 11\b/);
  });
});
