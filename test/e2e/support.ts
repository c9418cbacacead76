/**
 * Helpers for the end-to-end tests: a private copy of the built CLI (its dist/ is the local nodes' image, so a test
 * can change a byte of it without touching the repository's build, and a rebuild elsewhere cannot change the
 * measurements under a running test), running that CLI in a workspace, polling, and cleaning up every process a
 * workspace's cluster started.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { editConfig } from '../../lib/config/edit.js';
import { ClusterFile } from '../../providers/local/cluster-file.js';
import { LocalImageStore } from '../../providers/local/image-store.js';
import { clusterPaths } from '../../providers/local/layout.js';
import { ClusterNetwork } from '../../providers/local/network.js';
import { findOwnedProcesses } from '../../providers/local/processes.js';
import { REPO_ROOT, type CliResult } from '../support/cli.js';
import { pollUntil } from '../../lib/poll.js';

export interface CliCopy {
  root: string;
  cli: string;
  /** The node image the copy's local provider boots (its dist/node-program/, the bundled node program). */
  imageDir: string;
  /** The node program's entry in it. */
  entry: string;
}

export async function tempDir(prefix: string): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), prefix));
}

/** Copies bin/, dist/, package.json and the oclif manifest; node_modules is linked. Needs a build (npm run build). */
export async function copyBuiltCli(dir: string): Promise<CliCopy> {
  const root = path.join(dir, 'cli');
  await fs.mkdir(root, { recursive: true });
  for (const entry of ['bin', 'dist', 'package.json', 'oclif.manifest.json']) {
    await fs.cp(path.join(REPO_ROOT, entry), path.join(root, entry), { recursive: true });
  }
  await fs.symlink(path.join(REPO_ROOT, 'node_modules'), path.join(root, 'node_modules'));
  const imageDir = path.join(root, 'dist', 'node-program');
  return { root, cli: path.join(root, 'bin', 'constellation'), imageDir, entry: path.join(imageDir, 'main.cjs') };
}

/**
 * The copy's build with one line more in the node program's entry (PCRs 9 and 11 change), in a new folder `dir`
 * laid out as `mini image create --from` takes it (dist/node-program/ copied).
 */
export async function changedBuild(copy: CliCopy, dir: string, marker: string): Promise<string> {
  await fs.mkdir(path.join(dir, 'dist'), { recursive: true });
  await fs.cp(copy.imageDir, path.join(dir, 'dist', 'node-program'), { recursive: true });
  await fs.appendFile(path.join(dir, 'dist', 'node-program', 'main.cjs'), `// ${marker}\n`);
  return dir;
}

/** Appends a line to a file of an image, as an attacker would (images are read-only: its owner makes it writable). */
export async function tamper(file: string, line: string): Promise<void> {
  await fs.chmod(file, 0o644);
  await fs.appendFile(file, `${line}\n`);
}

/** Runs the copy's CLI in workspace `ws` (-C), without a terminal. */
export function run(copy: CliCopy, ws: string, args: string[], env?: NodeJS.ProcessEnv): Promise<CliResult> {
  return new Promise((resolve) => {
    const options = { cwd: ws, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, ...env } };
    const child = execFile(process.execPath, [copy.cli, ...args, '-C', ws], options, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
    child.stdin?.end();
  });
}

/** Starts the copy's CLI without waiting for it (to kill it part-way); `withOutput` pipes its stdout. */
export function start(
  copy: CliCopy,
  ws: string,
  args: string[],
  withOutput = false,
  env?: NodeJS.ProcessEnv,
): ChildProcess {
  return spawn(process.execPath, [copy.cli, ...args, '-C', ws], {
    cwd: ws,
    env: { ...process.env, ...env },
    stdio: ['ignore', withOutput ? 'pipe' : 'ignore', 'ignore'],
  });
}

/** Polls `check` every 10 ms until it returns a value other than undefined/false. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
): Promise<T> {
  return pollUntil<T>(
    async () => {
      const value = await check();
      return value === false ? undefined : value;
    },
    { timeoutMs, intervalMs: 10, what },
  );
}

export async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

/** Every live process carrying the workspace's local-cluster owner mark. */
export function clusterProcesses(ws: string): Promise<number[]> {
  return findOwnedProcesses(clusterPaths(ws).dir);
}

/** The network of the workspace's local cluster (namespaces named after its id), while cluster.json exists. */
export async function clusterNetwork(ws: string): Promise<ClusterNetwork | undefined> {
  const netId = (await ClusterFile.load(clusterPaths(ws)).catch(() => undefined))?.record.netId;
  return netId ? new ClusterNetwork(netId) : undefined;
}

/** Last resort after a test: `terminate -y`, then SIGKILL whatever of the workspace still runs and remove its namespaces. */
export async function cleanUp(copy: CliCopy, ws: string): Promise<void> {
  const network = await clusterNetwork(ws);
  await run(copy, ws, ['terminate', '-y']).catch(() => undefined);
  for (const pid of await clusterProcesses(ws)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await network?.remove();
}

/** The join service's standard gRPC health check at `address` (host:port); resolves when it is SERVING. */
async function checkJoinServiceHealth(address: string, timeoutMs = 2000): Promise<void> {
  const [{ HealthClient, HealthCheckResponse_ServingStatus: ServingStatus }, atls, { Metadata }] = await Promise.all([
    import('../../proto/gen/grpc/health/v1/health.js'),
    import('../../lib/atls/index.js'),
    import('@grpc/grpc-js'),
  ]);
  const client = new HealthClient(address, await atls.createAttestedClientCredentials(), {
    ...atls.attestedChannelOptions,
    'grpc.use_local_subchannel_pool': 1,
  });
  try {
    const res = await new Promise<{ status: number }>((resolve, reject) =>
      client.check(
        { service: 'constellation.join.v1.JoinService' },
        new Metadata(),
        { deadline: Date.now() + timeoutMs },
        (err, r) => (err ? reject(err) : resolve(r)),
      ),
    );
    if (res.status !== ServingStatus.SERVING)
      throw new Error(`the join service at ${address} is ${ServingStatus[res.status]}`);
  } finally {
    client.close();
  }
}

/**
 * Asks the load balancer every 100 ms for the join service's health (SERVING), a node's status and an attestation
 * document; counts the calls that fail.
 */
export function startLoadBalancerProbe(lb: string): { stop(): Promise<{ calls: number; failures: string[] }> } {
  let running = true;
  let calls = 0;
  const failures: string[] = [];
  const loop = (async () => {
    const [{ VerifyClient }, atls, { randomBytes }, { getNodeStatus }] = await Promise.all([
      import('../../proto/gen/constellation/verify.js'),
      import('../../lib/atls/index.js'),
      import('node:crypto'),
      import('../../cli/cluster/status.js'),
    ]);
    while (running) {
      const started = Date.now();
      calls++;
      try {
        await checkJoinServiceHealth(`${lb}:30090`);
        await getNodeStatus(`${lb}:30081`, 2000);
        const client = new VerifyClient(`${lb}:30081`, await atls.createAttestedClientCredentials(), {
          ...atls.attestedChannelOptions,
          'grpc.use_local_subchannel_pool': 1,
        });
        try {
          await new Promise<void>((resolve, reject) =>
            client.getAttestation({ nonce: randomBytes(32) }, (err, res) =>
              err ? reject(err) : res.document.length > 0 ? resolve() : reject(new Error('empty document')),
            ),
          );
        } finally {
          client.close();
        }
      } catch (err) {
        failures.push(`${new Date().toISOString()} ${(err as Error).message}`);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 100 - (Date.now() - started))));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { calls, failures };
    },
  };
}

export interface NodeStatusJson {
  name: string;
  role: string;
  address: string;
  state: string;
  reason?: string;
  software?: { image: string; measurementsDigest: string };
}

export async function status(copy: CliCopy, ws: string): Promise<NodeStatusJson[]> {
  const res = await run(copy, ws, ['status', '--json']);
  if (res.code !== 0) throw new Error(`status failed: ${res.stderr}`);
  return (JSON.parse(res.stdout) as { nodes: NodeStatusJson[] }).nodes;
}

/** The node side of a join attempt, played by the test: JoinHello + attestation with `issuer`, over the real wire. */
export async function attemptJoin(
  address: string,
  issuer: import('../../lib/attestation/types.js').Issuer,
  hello: import('../../proto/gen/constellation/join.js').JoinHello,
): Promise<{ error?: Error; responses: string[] }> {
  const atls = await import('../../lib/atls/index.js');
  const { JoinServiceClient } = await import('../../proto/gen/constellation/join.js');
  const client = new JoinServiceClient(
    address,
    await atls.createAttestedClientCredentials(),
    atls.attestedChannelOptions,
  );
  const call = client.issueJoinTicket();
  const responses: string[] = [];
  call.on('data', (message: { kind?: { $case: string } }) => responses.push(message.kind?.$case ?? 'empty'));
  try {
    const session = await atls.attestedClient(call, atls.joinClientAdapter, {
      purpose: 'join',
      peer: 'the join service',
      issuer,
      bound: atls.joinHelloBoundFields(hello),
      hello: { kind: { $case: 'hello', value: hello } },
      timeoutMs: 20_000,
    });
    session.channel.end();
    return { responses };
  } catch (error) {
    return { error: error as Error, responses };
  } finally {
    client.close();
  }
}

export interface ProbeNode {
  /** One join attempt at `address` (host:port of a join service or the load balancer). */
  join(address: string): Promise<{ error?: Error; responses: string[] }>;
  close(): Promise<void>;
}

/**
 * A node of the cluster's image (measured like a booting node) with its own swtpm, registered with the local
 * provider's metadata server as a worker (as `create` registers every node), that joins on demand: to ask a chosen
 * join service directly, or to join at a chosen moment.
 */
export async function startProbeNode(
  ws: string,
  image: { imageDir: string; entry: string },
  name: string,
  stateDir: string,
): Promise<ProbeNode> {
  const [
    { startSwtpm },
    { TpmClient },
    { measureBoot, swtpmLauncherTpm },
    { ClusterFile },
    { CloudControl },
    { VtpmIssuer },
    { localInstanceInfo },
    { createKubeletCsr },
  ] = await Promise.all([
    import('../../lib/tpm/swtpm.js'),
    import('../../lib/tpm/client.js'),
    import('../../providers/local/launcher.js'),
    import('../../providers/local/cluster-file.js'),
    import('../../providers/local/cloud.js'),
    import('../../lib/attestation/vtpm-issuer.js'),
    import('../../lib/attestation/variants/local-vtpm.js'),
    import('../../bootstrapper/kubelet-csr.js'),
  ]);
  const swtpm = await startSwtpm({ stateDir });
  let tpm: import('../../lib/tpm/client.js').TpmClient | undefined;
  try {
    await measureBoot(
      { nodeBinary: process.execPath, ...image },
      await swtpmLauncherTpm({ serverSocket: swtpm.serverSocket, ctrlSocket: swtpm.ctrlSocket }),
    );
    tpm = await TpmClient.connect(swtpm.serverSocket);
    const record = (await ClusterFile.load(clusterPaths(ws)))!.record;
    const control = new CloudControl(
      `http://${record.prefix}.1:${record.metadataPort}`,
      (await fs.readFile(clusterPaths(ws).controlToken, 'utf8')).trim(),
    );
    const address = `${record.prefix}.250`;
    await control.registerNode(name, {
      role: 'worker',
      group: 'worker_default',
      address,
      akPublic: Buffer.from((await tpm.attestationKey()).publicArea).toString('base64'),
    });
    const issuer = new VtpmIssuer({ variant: 'local-vtpm', tpm, instanceInfo: localInstanceInfo(name) });
    // The kubelet certificate may name only the address the provider registered for the node.
    const { csr } = await createKubeletCsr(name, address);
    const connected = tpm;
    return {
      join: (address) =>
        attemptJoin(address, issuer, {
          diskUuid: '5e1f0c2a-7b3d-4e8f-9a6b-1c2d3e4f5a6b',
          certificateRequest: Buffer.from(csr),
          isControlPlane: false,
          nodeName: name,
          hostPublicKey: Buffer.alloc(0),
        }),
      async close() {
        await control.unregisterNode(name).catch(() => undefined);
        connected.close();
        await swtpm.stop();
      },
    };
  } catch (err) {
    tpm?.close();
    await swtpm.stop();
    throw err;
  }
}

/** A workspace for tests of versioned local images: the built CLI's copy, and a user config folder of its own. */
export interface ImageWorkspace {
  tmp: string;
  copy: CliCopy;
  ws: string;
  /** XDG_CONFIG_HOME of the test's user config folder (the images and their key). */
  env: NodeJS.ProcessEnv;
  images: LocalImageStore;
  cli(args: string[]): Promise<CliResult>;
  /** Runs the CLI and fails the test unless it exits 0; its stdout. */
  ok(args: string[]): Promise<string>;
  /** Points the config at `version` with its signed measurements, as a user does. */
  useImage(version: string): Promise<void>;
}

export async function imageWorkspace(prefix: string): Promise<ImageWorkspace> {
  const tmp = await tempDir(prefix);
  const copy = await copyBuiltCli(tmp);
  const ws = path.join(tmp, 'ws');
  await fs.mkdir(ws);
  const env = { XDG_CONFIG_HOME: path.join(tmp, 'config') };
  const cli = (args: string[]) => run(copy, ws, args, env);
  const ok = async (args: string[]) => {
    const res = await cli(args);
    assert.equal(res.code, 0, `${args.join(' ')}:\n${res.stdout}\n${res.stderr}`);
    return res.stdout;
  };
  const useImage = async (version: string) => {
    await editConfig(ws, { image: version });
    await ok(['config', 'fetch-measurements']);
  };
  return {
    tmp,
    copy,
    ws,
    env,
    images: new LocalImageStore({ userConfigDir: path.join(tmp, 'config', 'constellation') }),
    cli,
    ok,
    useImage,
  };
}
