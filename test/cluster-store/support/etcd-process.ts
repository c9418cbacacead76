/**
 * A real single-member etcd (Debian's etcd-server, installed by scripts/ensure-system-deps.sh) for tests of the
 * etcd cluster store: on a random 127.x.y.z address, with server and client certificates of a cluster PKI's etcd
 * CA (lib/pki) and mutual TLS, data in a temp dir. stop() ends the process (the store then has no member to
 * answer); start() runs it again from its data. close() stops it and removes the temp dir.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ETCD_CLIENT_PORT, ETCD_PEER_PORT, etcdClient, type EtcdConnection } from '../../../lib/cluster-store/etcd.js';
import {
  issueEtcdClientCertificate,
  issueEtcdMemberCertificates,
  type ClusterPki,
} from '../../../lib/pki/cluster-pki.js';
import { pollUntil } from '../../../lib/poll.js';

const START_TIMEOUT_MS = 20_000;

export class EtcdProcess {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();

  private constructor(
    readonly dir: string,
    readonly ip: string,
    /** How the test's clients reach the member (a client certificate of the etcd CA). */
    readonly connection: EtcdConnection,
  ) {}

  static async start(pki: ClusterPki): Promise<EtcdProcess> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'etcd-store-'));
    const ip = `127.${randomInt(100, 250)}.${randomInt(0, 256)}.${randomInt(2, 250)}`;
    const clock = () => new Date();
    const { server } = issueEtcdMemberCertificates(pki, { name: 'test', ips: [ip], clock });
    const client = issueEtcdClientCertificate(pki, { commonName: 'contract-test', clock });
    await fs.writeFile(path.join(dir, 'ca.crt'), pki.files['etcd/ca.crt']);
    await fs.writeFile(path.join(dir, 'server.crt'), server.cert);
    await fs.writeFile(path.join(dir, 'server.key'), server.key, { mode: 0o600 });
    const etcd = new EtcdProcess(dir, ip, {
      endpoints: [`https://${ip}:${ETCD_CLIENT_PORT}`],
      caCert: pki.files['etcd/ca.crt'],
      clientCert: client.cert,
      clientKey: client.key,
    });
    try {
      await etcd.start();
    } catch (err) {
      await etcd.close();
      throw err;
    }
    return etcd;
  }

  /** Starts the member (from its data after the first time) and waits until it answers a quorum read. */
  async start(): Promise<void> {
    if (this.child) return;
    const file = (name: string) => path.join(this.dir, name);
    const clientUrl = `https://${this.ip}:${ETCD_CLIENT_PORT}`;
    const peerUrl = `http://${this.ip}:${ETCD_PEER_PORT}`;
    const log = await fs.open(file('etcd.log'), 'a');
    try {
      const child = spawn(
        'etcd',
        [
          '--name=test',
          `--data-dir=${file('data')}`,
          `--listen-client-urls=${clientUrl}`,
          `--advertise-client-urls=${clientUrl}`,
          `--listen-peer-urls=${peerUrl}`,
          `--initial-advertise-peer-urls=${peerUrl}`,
          `--initial-cluster=test=${peerUrl}`,
          `--trusted-ca-file=${file('ca.crt')}`,
          `--cert-file=${file('server.crt')}`,
          `--key-file=${file('server.key')}`,
          '--client-cert-auth',
          '--logger=zap',
          '--log-level=warn',
        ],
        { stdio: ['ignore', log.fd, log.fd] },
      );
      this.child = child;
      this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
    } finally {
      await log.close();
    }
    await this.waitHealthy();
  }

  /** Ends the member (SIGTERM, then SIGKILL) and waits for it. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(kill);
  }

  async close(): Promise<void> {
    await this.stop();
    await fs.rm(this.dir, { recursive: true, force: true });
  }

  private async waitHealthy(): Promise<void> {
    const client = await etcdClient({ ...this.connection, timeoutMs: 1000 });
    let last: unknown;
    try {
      await pollUntil(
        async () => {
          const child = this.child;
          if (!child || child.exitCode !== null || child.signalCode !== null)
            throw new Error(
              `etcd exited while starting; see ${path.join(this.dir, 'etcd.log')}: ${await fs.readFile(path.join(this.dir, 'etcd.log'), 'utf8')}`,
            );
          return client
            .get('health')
            .exec()
            .then(
              () => true,
              (err: unknown) => void (last = err),
            );
        },
        {
          timeoutMs: START_TIMEOUT_MS,
          intervalMs: 50,
          onTimeout: () => {
            throw new Error(`etcd did not answer within ${START_TIMEOUT_MS / 1000} s: ${(last as Error).message}`);
          },
        },
      );
    } finally {
      client.close();
    }
  }
}
