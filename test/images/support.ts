/** Helpers for the image tests: signing keys, signed measurement files, a fake build folder, an HTTPS file server. */
import type { KeyObject } from 'node:crypto';
import { promises as fs } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Measurements } from '../../lib/attestation/types.js';
import {
  generateSigningKeyPair,
  privateKeyFromPem,
  trustedKeyFromPem,
  type TrustedKey,
} from '../../lib/signing-keys.js';
import { signMeasurementsFile, type SignedMeasurements } from '../../lib/images/signed-measurements.js';
import { parseDocument } from 'yaml';
import { CONFIG_FILE } from '../../lib/workspace/files.js';
import { makeTestTls } from '../fakes/azure/test-ca.js';

export function tempDir(prefix = 'cl-images-'): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), prefix));
}

export interface TestSigner {
  privateKey: KeyObject;
  publicKeyPem: string;
  trusted: TrustedKey;
}

export function testSigner(name = 'the test key'): TestSigner {
  const pair = generateSigningKeyPair();
  return {
    privateKey: privateKeyFromPem(pair.privateKeyPem, 'test key'),
    publicKeyPem: pair.publicKeyPem,
    trusted: trustedKeyFromPem(pair.publicKeyPem, name),
  };
}

const hex = (byte: string) => byte.repeat(32);

/** Image-shaped measurements whose PCR 4, 9 and 11 carry `tag` (a hex byte), so images differ. */
export function measurementsOf(tag: string): Measurements {
  return {
    '4': { expected: hex(tag), warnOnly: false },
    '8': { expected: hex('00'), warnOnly: false },
    '9': { expected: hex(tag), warnOnly: false },
    '11': { expected: hex(tag), warnOnly: false },
    '12': { expected: hex('00'), warnOnly: false },
    '13': { expected: hex('00'), warnOnly: false },
    '15': { expected: hex('00'), warnOnly: true },
  };
}

/** Writes <dir>/<name> and <name>.sig: a measurements file signed by `signer`. */
export async function writeSignedFile(
  dir: string,
  name: string,
  signed: SignedMeasurements,
  signer: TestSigner,
): Promise<{ file: string; signature: string }> {
  const { file, signature } = signMeasurementsFile(signed, signer.privateKey);
  await fs.mkdir(dir, { recursive: true });
  const filePath = path.join(dir, name);
  await fs.writeFile(filePath, file);
  await fs.writeFile(`${filePath}.sig`, signature);
  return { file: filePath, signature: `${filePath}.sig` };
}

/**
 * A folder laid out as the repository after `npm run build`, small: dist/node-program/ (the bundled node program's
 * folder: its entry, a chunk and a data file in a subfolder), and a node_modules/ the image must not take.
 */
export async function fakeBuild(dir: string, marker = 'build 1'): Promise<string> {
  const program = path.join(dir, 'dist', 'node-program');
  await fs.mkdir(path.join(program, 'etcd3'), { recursive: true });
  await fs.mkdir(path.join(dir, 'node_modules', 'dep'), { recursive: true });
  await fs.writeFile(path.join(program, 'main.cjs'), `// ${marker}\n`);
  await fs.writeFile(path.join(program, 'chunk-ABC.cjs'), 'exports.x = 1;\n');
  await fs.writeFile(path.join(program, 'etcd3', 'rpc.proto'), 'syntax = "proto3";\n');
  await fs.writeFile(path.join(dir, 'package.json'), '{"type":"module"}\n');
  await fs.writeFile(path.join(dir, 'node_modules', 'dep', 'index.js'), 'module.exports = 1;\n');
  return dir;
}

export interface HttpsFileServer {
  /** Base URL, ending in '/'. */
  url: string;
  /** PEM of the CA its certificate chains to. */
  ca: string;
  /** Paths requested, in order. */
  requests: string[];
  close(): Promise<void>;
}

/**
 * Serves the files under `root` over HTTPS on 127.0.0.1 (a throwaway CA). `/redirect/<path>` answers 302 to
 * `/<path>`, `/to-http/<path>` 302 to plain http.
 */
export async function httpsFileServer(root: string): Promise<HttpsFileServer> {
  const tls = makeTestTls();
  const requests: string[] = [];
  const server = https.createServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://127.0.0.1');
    requests.push(url.pathname);
    if (url.pathname.startsWith('/redirect/')) {
      res.writeHead(302, { location: url.pathname.slice('/redirect'.length) }).end();
      return;
    }
    if (url.pathname === '/slow') {
      // One byte every 100 ms, forever: a server that never finishes but is never idle.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const trickle = setInterval(() => res.write('x'), 100);
      res.on('close', () => clearInterval(trickle));
      return;
    }
    if (url.pathname.startsWith('/to-http/')) {
      res.writeHead(302, { location: `http://127.0.0.1:1${url.pathname.slice('/to-http'.length)}` }).end();
      return;
    }
    const file = path.join(
      root,
      ...decodeURIComponent(url.pathname)
        .split('/')
        .filter((p) => p && p !== '..'),
    );
    fs.readFile(file).then(
      (body) => res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body),
      () => res.writeHead(404).end('not found'),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}/`,
    ca: tls.caPem,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Sets top-level keys of the workspace's config, as a user editing it would. */
export async function setConfigKeys(ws: string, keys: Record<string, string>): Promise<void> {
  const file = path.join(ws, CONFIG_FILE);
  const doc = parseDocument(await fs.readFile(file, 'utf8'));
  for (const [key, value] of Object.entries(keys)) doc.set(key, value);
  await fs.writeFile(file, doc.toString({ lineWidth: 0 }));
}
