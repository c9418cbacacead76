/**
 * The fuzz targets (issue 13, item 9): every parser of bytes an attacker controls, each with the inputs to
 * try (fast-check arbitraries: mutations of real evidence, plus random bytes or values) and the errors it is
 * documented to throw. A target passes an input when it returns, or throws one of those (a UserError, with
 * its subclasses AttestationError, TpmFormatError, ConfigError...; lib/der's DerError where named), within
 * SLOW_INPUT_MS. Anything else (a TypeError, a RangeError, a plain Error, a hang) is a finding.
 *
 * fuzz.test.ts runs every target briefly in `npm test`; scripts/fuzz.ts (`npm run fuzz`) runs them longer,
 * each in a worker thread with a memory limit and a watchdog.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import fc from 'fast-check';
import { decodeMessage, joinServerAdapter, initServerAdapter, recoverServerAdapter } from '../../lib/atls/services.js';
import { parseAttestationDocument } from '../../lib/atls/document.js';
import { generateEphemeralKeyPair, seal, unseal } from '../../lib/atls/index.js';
import { readCertificate } from '../../lib/attestation/certificate.js';
import { parseEventLog, replayEventLog } from '../../lib/attestation/eventlog.js';
import { createValidator, KNOWN_VARIANTS } from '../../lib/attestation/registry.js';
import { certificatesDer, verifyChain } from '../../lib/attestation/snp/certs.js';
import { parseSnpReport } from '../../lib/attestation/snp/report.js';
import { SnpVerifier } from '../../lib/attestation/snp/verify.js';
import { parseTdxQuote } from '../../lib/attestation/tdx/quote.js';
import { TdxVerifier } from '../../lib/attestation/tdx/verify.js';
import { verifyTpmQuote } from '../../lib/attestation/tpm-quote.js';
import type { AttestationDocument, Validator } from '../../lib/attestation/types.js';
import { parseConfig } from '../../lib/config/parse.js';
import { defaultConfig } from '../../lib/config/defaults.js';
import { renderConfig } from '../../lib/config/render.js';
import { certificateFields, children, DerError, readElement, type Element } from '../../lib/der.js';
import { UserError } from '../../lib/errors.js';
import { readCertificateRequest } from '../../lib/pki/certificates.js';
import { TpmReader } from '../../lib/tpm/marshal.js';
import {
  parseTpmAttest,
  parseTpmPublic,
  parseTpmSignature,
  publicKeyFromTpmPublic,
  readPcrSelections,
  tpmName,
} from '../../lib/tpm/structures.js';
import { predictBootMeasurements, ukiSectionDigests } from '../../lib/node-image/measure.js';
import { parseMasterSecret } from '../../lib/workspace/master-secret.js';
import { emptyState, parseState, stateToYaml } from '../../lib/workspace/state.js';
import { CloudRegistry, createMetadataServer } from '../../providers/local/metadata-server.js';
import { InitRequest, InitSecrets } from '../../proto/gen/constellation/init.js';
import { JoinRequest, JoinTicket, RejoinTicket, SignedTicket } from '../../proto/gen/constellation/join.js';
import { RecoverRequest, RecoverSecrets } from '../../proto/gen/constellation/recover.js';
import { JoinTicketIssuer } from '../../joinservice/ticket-issuer.js';
import { BootstrapTokenIssuer, MemoryTokenSink } from '../../joinservice/bootstrap-token.js';
import { gce } from '../attestation/gce-fixture.js';
import { makeSnpTestCa } from '../attestation/snp/fixtures.js';
import { makeTdxQuote, makeTdxTestCa } from '../attestation/tdx/fixtures.js';
import { kubeletCsr } from '../joinservice/support/join-client.js';
import { imagePcrs, measurementsFor, SoftwareVtpm, TestAkRegistry } from '../joinservice/support/software-vtpm.js';
import { TESTDATA } from '../support/testdata.js';

/** One input taking longer than this is a finding (inputs stay under 64 KiB; linear parsers take microseconds). */
export const SLOW_INPUT_MS = 1000;

export interface FuzzTarget<T = unknown> {
  name: string;
  /** What the target parses, for the report. */
  parses: string;
  inputs: fc.Arbitrary<T>;
  /** Parses one input; returns or throws. */
  run(input: T): unknown | Promise<unknown>;
  /** The errors the parser is documented to throw. */
  expected(err: unknown): boolean;
  /** Releases what the target opened (a server, sockets). */
  close?(): Promise<void>;
}

/** Keeps each target's input type while the list holds them all. */
function target<T>(t: FuzzTarget<T>): FuzzTarget {
  return t as FuzzTarget;
}

const userError = (err: unknown) => err instanceof UserError;
const userOrDerError = (err: unknown) => err instanceof UserError || err instanceof DerError;

// ---------------------------------------------------------------- inputs

type Mutation = {
  op: 'flip' | 'set' | 'insert' | 'delete' | 'truncate' | 'repeat' | 'zero';
  at: number;
  value: number;
  length: number;
};

const mutation: fc.Arbitrary<Mutation> = fc.record({
  op: fc.constantFrom('flip', 'set', 'insert', 'delete', 'truncate', 'repeat', 'zero'),
  at: fc.nat(),
  value: fc.integer({ min: 0, max: 255 }),
  length: fc.integer({ min: 1, max: 256 }),
});

/** `seed` changed by each mutation in turn (offsets wrap around its length). */
export function mutate(seed: Uint8Array, mutations: Mutation[]): Uint8Array {
  let bytes = Buffer.from(seed);
  for (const m of mutations) {
    const at = bytes.length === 0 ? 0 : m.at % bytes.length;
    switch (m.op) {
      case 'flip':
        if (bytes.length > 0) bytes[at] ^= 1 << (m.value & 7);
        break;
      case 'set':
        if (bytes.length > 0) bytes[at] = m.value;
        break;
      case 'insert':
        bytes = Buffer.concat([bytes.subarray(0, at), Buffer.alloc(m.length, m.value), bytes.subarray(at)]);
        break;
      case 'delete':
        bytes = Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + m.length)]);
        break;
      case 'truncate':
        bytes = bytes.subarray(0, at);
        break;
      case 'repeat':
        bytes = Buffer.concat([
          bytes.subarray(0, at),
          Buffer.concat(Array(Math.min(m.length, 64)).fill(bytes.subarray(at, at + 16))),
          bytes.subarray(at),
        ]);
        break;
      case 'zero':
        bytes = Buffer.concat([
          bytes.subarray(0, at),
          Buffer.alloc(Math.min(m.length, bytes.length - at)),
          bytes.subarray(at + m.length),
        ]);
        break;
    }
  }
  return new Uint8Array(bytes);
}

/** Mutations of the seeds (mostly) and random bytes. */
export function bytesLike(seeds: Uint8Array[], maxRandom = 4096): fc.Arbitrary<Uint8Array> {
  const mutated = fc
    .tuple(fc.constantFrom(...seeds), fc.array(mutation, { minLength: 1, maxLength: 6 }))
    .map(([seed, ms]) => mutate(seed, ms));
  return fc.oneof(
    { arbitrary: mutated, weight: 4 },
    { arbitrary: fc.uint8Array({ maxLength: maxRandom }), weight: 1 },
    { arbitrary: fc.constantFrom(...seeds), weight: 1 },
  );
}

/** Mutations of seed texts at the byte level, read back as UTF-8, and random strings. */
function textLike(seeds: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    {
      arbitrary: bytesLike(
        seeds.map((s) => new Uint8Array(Buffer.from(s))),
        2048,
      ).map((b) => Buffer.from(b).toString('utf8')),
      weight: 4,
    },
    { arbitrary: fc.string({ maxLength: 512, unit: 'binary' }), weight: 1 },
  );
}

/** A JSON value that replaces part of a document: anything JSON can say, including the keys that broke zod. */
const jsonValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(null, {}, [], '', 0, -1, 1e308, { constructor: null }, { __proto__: null }, { toString: 1 }),
);

/** Every path into a JSON value (objects and arrays), so a mutation can replace any part. */
function paths(value: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
  if (typeof value !== 'object' || value === null) return [prefix];
  const entries: Array<[string | number, unknown]> = Array.isArray(value)
    ? value.map((v, i) => [i, v])
    : Object.entries(value);
  return [prefix, ...entries.flatMap(([k, v]) => paths(v, [...prefix, k]))];
}

function replaceAt(value: unknown, at: Array<string | number>, replacement: unknown): unknown {
  if (at.length === 0) return replacement;
  const copy = (Array.isArray(value) ? [...value] : { ...(value as object) }) as Record<string | number, unknown>;
  copy[at[0]] = replaceAt(copy[at[0]], at.slice(1), replacement);
  return copy;
}

/** A JSON document with one of its parts replaced, as text (the attestation document's wire form), or bytes mutated. */
function jsonLike(seeds: unknown[]): fc.Arbitrary<Uint8Array> {
  const structural = fc.tuple(fc.constantFrom(...seeds), fc.nat(), jsonValue).map(([seed, pick, replacement]) => {
    const all = paths(seed);
    return new Uint8Array(Buffer.from(JSON.stringify(replaceAt(seed, all[pick % all.length], replacement))));
  });
  return fc.oneof(
    { arbitrary: structural, weight: 3 },
    {
      arbitrary: bytesLike(
        seeds.map((s) => new Uint8Array(Buffer.from(JSON.stringify(s)))),
        2048,
      ),
      weight: 2,
    },
  );
}

// ---------------------------------------------------------------- seeds

const azure = (file: string) => new Uint8Array(readFileSync(path.join(TESTDATA, 'attestation/azure-sev-snp', file)));

/** Walks every element of a DER structure, as the PKI and SNP code do. */
function walk(element: Element, depth = 0): void {
  if (depth > 64 || (element.tag & 0x20) === 0) return;
  for (const child of children(element)) walk(child, depth + 1);
}

/** Everything the targets need that takes a while to make, made once per process. */
export async function makeTargets(): Promise<FuzzTarget[]> {
  const vcekDer = azure('vcek.cert');
  const certchain = readFileSync(path.join(TESTDATA, 'attestation/azure-sev-snp/certchain.pem'), 'utf8');
  const report = azure('attestation.bin').subarray(0, 1184);
  const chainDers = certificatesDer(certchain);
  const csr = new Uint8Array(await kubeletCsr(['10.0.0.7']));
  const snpCa = makeSnpTestCa();
  const tdxCa = makeTdxTestCa();
  const tdxQuote = makeTdxQuote(tdxCa);
  const tdxVerifier = new TdxVerifier({ roots: [tdxCa.rootPem] });
  const snpVerifier = new SnpVerifier();
  const snpNow = new Date('2024-06-01T00:00:00Z');

  const pcrs = imagePcrs();
  const vtpm = new SoftwareVtpm('worker-0', pcrs);
  const registry = new TestAkRegistry();
  registry.register('worker-0', vtpm.akPublic);
  const nonce = new Uint8Array(32).fill(7);
  const document = await vtpm.issue(new Uint8Array(32).fill(1), nonce);
  const localValidator = await createValidator(
    'local-vtpm',
    { measurements: measurementsFor(pcrs) },
    { akRegistry: registry },
  );
  const cloudDeps = {
    now: () => snpNow,
    fetch: async () => {
      throw new UserError('offline: the fuzzer fetches nothing');
    },
    akRegistry: registry,
  };
  const validators: Array<[string, Validator]> = [];
  for (const variant of KNOWN_VARIANTS)
    validators.push([variant, await createValidator(variant, { measurements: measurementsFor(pcrs) }, cloudDeps)]);
  const documents: AttestationDocument[] = KNOWN_VARIANTS.map((variant) => ({ ...document, variant }));

  const ephemeral = generateEphemeralKeyPair();
  const binding = { purpose: 'join' as const, nonce };
  const jwe = seal(new Uint8Array(64).fill(3), ephemeral.publicKey, binding);

  const gceQuote = gce.quote(11);
  const configTexts = ['local', 'aws', 'azure', 'gcp'].map((provider) => renderConfig(defaultConfig(provider)));
  const stateText = stateToYaml({
    ...emptyState(),
    infrastructure: { ...emptyState().infrastructure, uid: 'abc', initSecret: 'aa' },
  });

  const service = lazyMetadataServer();
  const tickets = new JoinTicketIssuer({
    tokens: new BootstrapTokenIssuer({ sink: new MemoryTokenSink() }),
    clock: () => new Date(),
  });

  const protoSeeds = {
    init: [
      InitRequest.encode({
        kind: {
          $case: 'challenge',
          value: { nonce: Buffer.from(nonce), verifierPublicKey: Buffer.from(ephemeral.publicKey) },
        },
      }).finish(),
    ],
    join: [
      JoinRequest.encode({
        kind: {
          $case: 'hello',
          value: {
            diskUuid: '00000000-0000-4000-8000-000000000001',
            certificateRequest: Buffer.from(csr),
            isControlPlane: false,
            nodeName: 'worker-0',
            hostPublicKey: Buffer.alloc(0),
          },
        },
      }).finish(),
    ],
    recover: [RecoverRequest.encode({ kind: { $case: 'sealedSecrets', value: { jwe } } }).finish()],
    secrets: [
      InitSecrets.encode({
        masterKey: Buffer.alloc(32, 1),
        masterSalt: Buffer.alloc(32, 2),
        measurementSalt: Buffer.alloc(32, 3),
        initSecret: Buffer.alloc(8, 4),
        kubernetesVersion: 'v1.31.1',
        clusterName: 'c',
        apiServerCertSans: [],
        serviceCidr: '',
        attestationConfig: Buffer.from('{}'),
      } as never).finish(),
    ],
  };

  const targets: FuzzTarget[] = [
    target({
      name: 'der',
      parses: 'DER elements and certificate fields (lib/der.ts)',
      inputs: bytesLike([vcekDer, ...chainDers, csr]),
      run: (bytes) => {
        const element = readElement(bytes);
        walk(element);
        return certificateFields(element);
      },
      expected: userOrDerError,
    }),
    target({
      name: 'csr',
      parses: 'PKCS#10 certificate requests (lib/pki/certificates.ts)',
      inputs: bytesLike([csr]),
      run: (bytes) => readCertificateRequest(bytes),
      expected: userOrDerError,
    }),
    target({
      name: 'certificate',
      parses: 'X.509 certificates of evidence (lib/attestation/certificate.ts, snp/certs.ts chain and AMD extensions)',
      inputs: bytesLike([vcekDer, ...chainDers, snpCa.ask.der, snpCa.ark.der]),
      run: (bytes) => {
        readCertificate(bytes, 'the certificate');
        return verifyChain(bytes, chainDers, {});
      },
      expected: userOrDerError,
    }),
    target({
      name: 'pem',
      parses: 'PEM certificate chains (snp/certs.ts certificatesDer)',
      inputs: textLike([certchain, snpCa.vcekChain, tdxCa.pckChain]),
      run: (text) => certificatesDer(text),
      expected: () => false,
    }),
    target({
      name: 'snp-report',
      parses: 'SEV-SNP reports, parsed and verified with the real Azure VCEK (snp/report.ts, snp/verify.ts)',
      inputs: bytesLike([report]),
      run: (bytes) => {
        parseSnpReport(bytes);
        return snpVerifier.verify(bytes, { signingCert: vcekDer, certChain: certchain, now: snpNow });
      },
      expected: userError,
    }),
    target({
      name: 'tdx-quote',
      parses: 'TDX quotes v4 with QE report and PCK chain (tdx/quote.ts, tdx/verify.ts)',
      inputs: bytesLike([tdxQuote]),
      run: (bytes) => {
        parseTdxQuote(bytes);
        return tdxVerifier.verify(bytes);
      },
      expected: userError,
    }),
    target({
      name: 'tpm-structures',
      parses: 'TPMT_PUBLIC, TPMS_ATTEST, TPMT_SIGNATURE, TPML_PCR_SELECTION (lib/tpm/structures.ts)',
      inputs: fc.tuple(
        fc.nat({ max: 3 }),
        bytesLike([gce.akPublic, vtpm.akPublic, gceQuote.quote, gceQuote.signature]),
      ),
      run: ([which, bytes]) => {
        switch (which) {
          case 0: {
            const pub = parseTpmPublic(bytes);
            tpmName(bytes);
            return publicKeyFromTpmPublic(pub);
          }
          case 1:
            return parseTpmAttest(bytes);
          case 2:
            return parseTpmSignature(bytes);
          default:
            return readPcrSelections(new TpmReader(bytes));
        }
      },
      expected: userError,
    }),
    target({
      name: 'tpm-quote',
      parses: 'a quote with its AK, signature and PCR values (attestation/tpm-quote.ts)',
      inputs: fc.tuple(bytesLike([gce.akPublic]), bytesLike([gceQuote.quote]), bytesLike([gceQuote.signature])),
      run: ([akPublic, quote, signature]) =>
        verifyTpmQuote({
          akPublic,
          quote,
          signature,
          pcrs: gceQuote.pcrs,
          hashAlg: 11,
          qualifyingData: new Uint8Array(0),
        }),
      expected: userError,
    }),
    target({
      name: 'event-log',
      parses: 'TCG crypto-agile event logs, parsed and replayed (attestation/eventlog.ts)',
      inputs: bytesLike([gce.eventLog], 8192),
      run: (bytes) => replayEventLog(parseEventLog(bytes)),
      expected: userError,
    }),
    target({
      name: 'node-image',
      parses: 'PE images, UKIs and GPT disks with a FAT ESP, as image measure reads them (node-image/measure.ts)',
      inputs: bytesLike([new Uint8Array(readFileSync(path.join(TESTDATA, 'measured-boot/uki.efi')))], 8192),
      run: (bytes) => {
        const buf = Buffer.from(bytes);
        try {
          ukiSectionDigests(buf);
        } catch (err) {
          if (!(err instanceof UserError)) throw err;
        }
        return predictBootMeasurements(buf);
      },
      expected: userError,
    }),
    target({
      name: 'sealed',
      parses: 'compact JWE sealed payloads (atls/seal.ts unseal)',
      inputs: textLike([jwe]),
      run: (text) => unseal(text, ephemeral.privateKey, binding),
      expected: userError,
    }),
    target({
      name: 'attestation-document',
      parses: "attestation documents (atls/document.ts) through every variant's validator",
      inputs: fc.tuple(fc.nat({ max: documents.length - 1 }), jsonLike(documents)),
      run: async ([which, bytes]) => {
        const [, validator] = validators[which];
        return validator.validate(parseAttestationDocument(bytes), nonce);
      },
      expected: userError,
    }),
    target({
      name: 'local-vtpm-document',
      parses: "local-vtpm documents (the join service's validator, AK registry included)",
      inputs: jsonLike([document]),
      run: async (bytes) => localValidator.validate(parseAttestationDocument(bytes), nonce),
      expected: userError,
    }),
    target({
      name: 'config-yaml',
      parses: 'constellation-conf.yaml (lib/config/parse.ts)',
      inputs: textLike(configTexts),
      run: (text) => parseConfig(text),
      expected: userError,
    }),
    target({
      name: 'state-yaml',
      parses: 'constellation-state.yaml and the master secret (lib/workspace)',
      inputs: fc.tuple(
        fc.boolean(),
        textLike([
          stateText,
          '{"key":"AAAAAAAAAAAAAAAAAAAAAA==","salt":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}',
        ]),
      ),
      run: ([state, text]) => (state ? parseState(text) : parseMasterSecret(text)),
      expected: userError,
    }),
    target({
      name: 'metadata-requests',
      parses: 'HTTP requests to the local metadata server (providers/local/metadata-server.ts)',
      inputs: fc.record({
        method: fc.constantFrom('GET', 'PUT', 'DELETE', 'POST'),
        path: fc.oneof(
          fc.constantFrom(
            '/v1/self',
            '/v1/peers',
            '/v1/ak/worker-0',
            '/v1/control/nodes/x',
            '/v1/control/cluster',
            '/v1/ak/%',
            '/v1/ak/%E0%A4%A',
            '/v1/%ZZ/x',
          ),
          fc
            .array(
              fc.oneof(
                fc.constantFrom('v1', 'ak', 'control', 'nodes', '%', '%ff', '%C0%AF', '..', '%00'),
                fc.string({ maxLength: 8 }).map(encodeURI),
              ),
              { maxLength: 5 },
            )
            .map((p) => `/${p.join('/')}`),
        ),
        token: fc.boolean(),
        body: textLike([
          '{"role":"worker","group":"w","address":"127.0.0.1","akPublic":"AA=="}',
          '{"initSecretHash":"x","joinServiceKey":"AA=="}',
        ]),
      }),
      run: async (request) => (await service.get()).request(request),
      expected: () => false,
      close: () => service.close(),
    }),
    target({
      name: 'grpc-messages',
      parses:
        'gRPC request messages and sealed payloads as the handlers decode them (proto/gen via atls/services.ts decodeMessage), and the join request check',
      inputs: fc.tuple(
        fc.nat({ max: 7 }),
        bytesLike([...protoSeeds.init, ...protoSeeds.join, ...protoSeeds.recover, ...protoSeeds.secrets], 2048),
      ),
      run: ([which, bytes]) => {
        switch (which) {
          case 0:
            return initServerAdapter.unwrap(decodeMessage(InitRequest, bytes, 'The request'));
          case 1: {
            const request = decodeMessage(JoinRequest, bytes, 'The request');
            joinServerAdapter.unwrap(request);
            if (request.kind?.$case === 'hello') tickets.checkHello(request.kind.value, 'join');
            return request;
          }
          case 2:
            return recoverServerAdapter.unwrap(decodeMessage(RecoverRequest, bytes, 'The request'));
          case 3:
            return decodeMessage(InitSecrets, bytes, 'The init secrets');
          case 4:
            return decodeMessage(JoinTicket, bytes, 'The join ticket');
          case 5:
            return decodeMessage(RejoinTicket, bytes, 'The rejoin ticket');
          case 6:
            return decodeMessage(SignedTicket, bytes, 'The join ticket');
          default:
            return decodeMessage(RecoverSecrets, bytes, 'The recovery secrets');
        }
      },
      expected: userError,
    }),
  ];
  return targets;
}

type MetadataClient = {
  request(r: { method: string; path: string; token: boolean; body: string }): Promise<number>;
  close(): Promise<void>;
};

/** The metadata server, started on the first request (listing the targets opens no socket), and closed with close(). */
function lazyMetadataServer(): { get(): Promise<MetadataClient>; close(): Promise<void> } {
  let started: Promise<MetadataClient> | undefined;
  return {
    get: () => (started ??= startMetadataServer()),
    close: async () => (started ? (await started).close() : undefined),
  };
}

/** The metadata server on an ephemeral port; `request` fails (a finding) on a 5xx answer. */
async function startMetadataServer(): Promise<MetadataClient> {
  const registry = new CloudRegistry();
  registry.nodes.set('worker-0', {
    name: 'worker-0',
    role: 'worker',
    group: 'w',
    address: '127.0.0.1',
    akPublic: 'AA==',
  });
  const server = createMetadataServer({ registry, gateway: '127.0.0.1', controlToken: 't'.repeat(64) });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  const { port } = server.address() as AddressInfo;
  const agent = new http.Agent({ keepAlive: true });
  return {
    request: ({ method, path: target, token, body }) =>
      new Promise((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            method,
            path: target,
            agent,
            headers: token ? { authorization: `Bearer ${'t'.repeat(64)}` } : {},
          },
          (res) => {
            res.resume();
            res.on('end', () =>
              res.statusCode! >= 500
                ? reject(new Error(`the metadata server answered ${method} ${target} with ${res.statusCode}`))
                : resolve(res.statusCode!),
            );
          },
        );
        req.on('error', (err) => reject(new Error(`${method} ${target}: ${err.message}`)));
        req.end(method === 'GET' ? undefined : body);
      }),
    close: async () => {
      agent.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
