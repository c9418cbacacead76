/**
 * The attested-exchange cases of issue 3 (success, enforced and warnOnly PCR mismatches, replay, another
 * purpose, tampered quote / signature / PCR value / userData / public key, unregistered AK), run against an
 * AttestationKit: the software stand-in or a real swtpm-backed issuer and validator. In every failing case
 * the test asserts from the recorded wire that the verifier sent no sealed secret.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  AttestationError,
  type AttestationDocument,
  type Issuer,
  type Measurements,
  type VtpmAttestation,
} from '../../../lib/attestation/types.js';
import { generateEphemeralKeyPair, PeerFailureError } from '../../../lib/atls/index.js';
import type { InitResponse } from '../../../proto/gen/constellation/init.js';
import type { JoinRequest } from '../../../proto/gen/constellation/join.js';
import type { AttestationKit } from './kits.js';
import { KUBECONFIG, MASTER_KEY, DISK_KEY, runInit, runJoin, type Outcome } from './scenarios.js';

const WRONG = 'ff'.repeat(32);

function matching(kit: AttestationKit): Measurements {
  return Object.fromEntries(kit.measured.map((i) => [String(i), { expected: kit.pcrs[String(i)], warnOnly: false }]));
}

/** An issuer that alters each document it makes (a compromised or broken node). */
function tampering(
  issuer: Issuer,
  alter: (doc: AttestationDocument & { attestation: VtpmAttestation }) => void,
): Issuer {
  return {
    variant: issuer.variant,
    async issue(userData, nonce) {
      const doc = structuredClone(await issuer.issue(userData, nonce)) as AttestationDocument & {
        attestation: VtpmAttestation;
      };
      alter(doc);
      return doc;
    },
  };
}

function flipByte(b64: string, at: number): string {
  const bytes = Buffer.from(b64, 'base64');
  bytes[at < 0 ? bytes.length + at : at] ^= 0x01;
  return bytes.toString('base64');
}

function assertInitRejected(outcome: Outcome<unknown, unknown>, message: RegExp): void {
  assert.ok(
    outcome.verifier.error instanceof AttestationError,
    `expected an AttestationError, got ${String(outcome.verifier.error)}`,
  );
  assert.match((outcome.verifier.error as Error).message, message);
  assert.ok(
    !outcome.wire.cases().includes('client:sealedSecrets'),
    `the CLI sent a secret: ${outcome.wire.cases().join(', ')}`,
  );
  assert.deepEqual(
    outcome.wire.cases().filter((c) => c.startsWith('client:')),
    ['client:challenge'],
  );
  assert.equal(outcome.attested.value, undefined, 'the node received secrets');
  assert.ok(outcome.attested.error instanceof Error);
}

export function exchangeSuite(openKit: () => Promise<AttestationKit>): void {
  let kit: AttestationKit;
  before(async function () {
    kit = await openKit();
  });
  after(async function () {
    await kit?.close();
  });

  describe('init (verifier is the gRPC client)', () => {
    it('seals the secrets to an attested node and opens the sealed result', async () => {
      const outcome = await runInit({ issuer: kit.issuer, validator: kit.validator(matching(kit)) });
      assert.equal(outcome.verifier.error, undefined, String(outcome.verifier.error));
      assert.equal(outcome.attested.error, undefined, String(outcome.attested.error));
      assert.deepEqual(outcome.attested.value?.masterKey, MASTER_KEY);
      assert.deepEqual(outcome.verifier.value?.kubeconfig, KUBECONFIG);
      assert.deepEqual(outcome.verifier.validation?.warnings, []);
      assert.deepEqual(outcome.wire.cases(), [
        'client:challenge',
        'server:evidence',
        'client:sealedSecrets',
        'server:progress',
        'server:sealedResult',
      ]);
      const jwe = (outcome.wire.log[2].message as { kind: { value: { jwe: string } } }).kind.value.jwe;
      assert.doesNotMatch(jwe, new RegExp(MASTER_KEY.toString('base64url')));
      assert.equal(jwe.split('.').length, 5, 'a compact JWE has five parts');
    });

    it('rejects a node whose enforced PCR differs, naming the PCR and both values', async () => {
      const index = kit.measured[0];
      const outcome = await runInit({
        issuer: kit.issuer,
        validator: kit.validator({ ...matching(kit), [index]: { expected: WRONG, warnOnly: false } }),
      });
      assertInitRejected(outcome, new RegExp(`PCR ${index}\\b`));
      const message = (outcome.verifier.error as Error).message;
      assert.ok(message.includes(WRONG) && message.includes(kit.pcrs[String(index)]), message);
      assert.ok((outcome.verifier.error as AttestationError).comparisons?.some((c) => c.index === index && !c.match));
    });

    it('accepts a warnOnly PCR mismatch and reports a warning', async () => {
      const index = kit.measured[0];
      const outcome = await runInit({
        issuer: kit.issuer,
        validator: kit.validator({ ...matching(kit), [index]: { expected: WRONG, warnOnly: true } }),
      });
      assert.equal(outcome.verifier.error, undefined, String(outcome.verifier.error));
      assert.deepEqual(outcome.attested.value?.masterKey, MASTER_KEY);
      assert.equal(outcome.verifier.validation?.warnings.length, 1);
      assert.match(outcome.verifier.validation!.warnings[0], new RegExp(`PCR ${index}\\b`));
    });

    it('rejects evidence replayed from an earlier exchange (old nonce)', async () => {
      const first = await runInit({ issuer: kit.issuer, validator: kit.validator(matching(kit)) });
      const recorded = first.wire.log.find((e) => (e.message as InitResponse).kind?.$case === 'evidence')!.message;
      const outcome = await runInit({
        issuer: kit.issuer,
        validator: kit.validator(matching(kit)),
        wire: { fromServer: (m) => ((m as InitResponse).kind?.$case === 'evidence' ? recorded : m) },
      });
      assertInitRejected(outcome, /nonce|qualifying/i);
    });

    it('rejects a document made for another purpose', async () => {
      const outcome = await runInit({
        issuer: kit.issuer,
        validator: kit.validator(matching(kit)),
        nodePurpose: 'join',
      });
      assertInitRejected(outcome, /not bound to this init exchange/);
    });

    const tampered: Array<
      [string, (doc: AttestationDocument & { attestation: VtpmAttestation }, kit: AttestationKit) => void, RegExp]
    > = [
      [
        'quote',
        (doc) => (doc.attestation.quotes[0].quote = flipByte(doc.attestation.quotes[0].quote, -3)),
        /signature|quote/i,
      ],
      [
        'signature',
        (doc) => (doc.attestation.quotes[0].signature = flipByte(doc.attestation.quotes[0].signature, -1)),
        /signature/i,
      ],
      ['PCR value', (doc, k) => (doc.attestation.quotes[0].pcrs[String(k.measured[0])] = WRONG), /PCR|digest/i],
      ['userData', (doc) => (doc.userData = randomBytes(32).toString('base64')), /nonce|userData|qualifying/i],
    ];
    for (const [what, alter, message] of tampered) {
      it(`rejects a document with a tampered ${what}`, async () => {
        const outcome = await runInit({
          issuer: tampering(kit.issuer, (doc) => alter(doc, kit)),
          validator: kit.validator(matching(kit)),
        });
        assertInitRejected(outcome, message);
      });
    }

    it('rejects evidence whose public key a man in the middle replaced with its own', async () => {
      const attacker = generateEphemeralKeyPair();
      const outcome = await runInit({
        issuer: kit.issuer,
        validator: kit.validator(matching(kit)),
        wire: {
          fromServer: (m) => {
            const msg = m as InitResponse;
            if (msg.kind?.$case === 'evidence') msg.kind.value.publicKey = Buffer.from(attacker.publicKey);
            return msg;
          },
        },
      });
      assertInitRejected(outcome, /not bound to this init exchange/);
    });

    it('rejects a document signed by an AK that is not registered', async () => {
      const outcome = await runInit({
        issuer: kit.issuer,
        validator: kit.validator(matching(kit), { trustAk: false }),
      });
      assertInitRejected(outcome, /AK|attestation key|registered/i);
    });
  });

  describe('join (verifier is the gRPC server)', () => {
    it('issues the ticket to an attested node that bound its hello', async () => {
      const outcome = await runJoin({ issuer: kit.issuer, validator: kit.validator(matching(kit)) });
      assert.equal(outcome.verifier.error, undefined, String(outcome.verifier.error));
      assert.deepEqual(outcome.attested.value?.stateDiskKey, DISK_KEY);
      assert.equal(outcome.verifier.value?.nodeName, 'worker-0');
      assert.deepEqual(outcome.wire.cases(), [
        'client:hello',
        'server:challenge',
        'client:evidence',
        'server:sealedTicket',
      ]);
    });

    const failing: Array<[string, (k: AttestationKit) => Parameters<typeof runJoin>[0], RegExp]> = [
      [
        'an enforced PCR differs',
        (k) => ({
          issuer: k.issuer,
          validator: k.validator({ ...matching(k), [k.measured[0]]: { expected: WRONG, warnOnly: false } }),
        }),
        /PCR/,
      ],
      [
        'the document was made for a rejoin',
        (k) => ({ issuer: k.issuer, validator: k.validator(matching(k)), nodePurpose: 'rejoin' }),
        /not bound to this join exchange/,
      ],
      [
        'a man in the middle altered the hello',
        (k) => ({
          issuer: k.issuer,
          validator: k.validator(matching(k)),
          wire: {
            fromClient: (m) => {
              const msg = m as JoinRequest;
              if (msg.kind?.$case === 'hello') msg.kind.value = { ...msg.kind.value, isControlPlane: true };
              return msg;
            },
          },
        }),
        /not bound to this join exchange/,
      ],
    ];
    for (const [what, scenario, message] of failing) {
      it(`sends a Failure and no ticket when ${what}`, async () => {
        const outcome = await runJoin(scenario(kit));
        assert.ok(outcome.verifier.error instanceof AttestationError, String(outcome.verifier.error));
        assert.ok(outcome.attested.error instanceof PeerFailureError, String(outcome.attested.error));
        assert.match((outcome.attested.error as Error).message, message);
        assert.equal(outcome.attested.value, undefined);
        assert.deepEqual(outcome.wire.cases(), [
          'client:hello',
          'server:challenge',
          'client:evidence',
          'server:failure',
        ]);
      });
    }
  });
}
