import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TESTDATA } from '../../support/testdata.js';
import { AttestationError } from '../../../lib/attestation/types.js';
import { azureSevSnpTrust } from '../../../lib/attestation/variants/azure-sev-snp.js';
import { awsSevSnpTrust } from '../../../lib/attestation/variants/aws-sev-snp.js';
import { gcpSevSnpTrust } from '../../../lib/attestation/variants/gcp-sev-snp.js';
import { kdsVcekUrl } from '../../../lib/attestation/snp/kds.js';
import {
  makeEndorsementKey,
  makeSnpReport,
  makeSnpTestCa,
  type EndorsementKey,
  type SnpTestCa,
} from '../snp/fixtures.js';
import { akFromModulus, b64, documentWith, makeAk, rejectsWith, type TestAk } from './cloud-helpers.js';

const AZURE = path.join(TESTDATA, 'attestation/azure-sev-snp');
const measurements = { '4': { expected: '00'.repeat(32), warnOnly: false } };
const tcbConfig = { bootloaderVersion: 2, teeVersion: 0, snpVersion: 6, microcodeVersion: 93 };
const now = () => new Date('2025-01-01T00:00:00Z');

describe('azure-sev-snp AK trust', () => {
  describe('with real Azure evidence', () => {
    const report = readFileSync(path.join(AZURE, 'attestation.bin'));
    const runtimeData = readFileSync(path.join(AZURE, 'runtimedata.bin'));
    const vcekPem = readFileSync(path.join(AZURE, 'vcek.pem'), 'utf8');
    const vcekDer = readFileSync(path.join(AZURE, 'vcek.cert'));
    const certChain = readFileSync(path.join(AZURE, 'certchain.pem'), 'utf8');
    // The AK the paravisor put into the runtime data, as the vTPM would present it.
    const hclKey = (JSON.parse(runtimeData.toString()) as { keys: { n: string }[] }).keys[0];
    const akPublic = akFromModulus(Buffer.from(hclKey.n, 'base64url'));
    const info = { attestationReport: b64(report), runtimeData: b64(runtimeData), vcek: vcekPem, certChain };
    const trust = azureSevSnpTrust({ measurements, ...tcbConfig }, { now });

    it('trusts the AK held in the runtime data the report binds', async () => {
      await trust(documentWith('azure-sev-snp', info), akPublic);
    });

    it('rejects a changed runtime data', async () => {
      const changed = Buffer.from(runtimeData.toString().replace('"tpm-enabled":true', '"tpm-enabled":false'));
      await rejectsWith(
        trust(documentWith('azure-sev-snp', { ...info, runtimeData: b64(changed) }), akPublic),
        /does not bind the paravisor runtime data/,
      );
    });

    it('rejects another AK', async () => {
      await rejectsWith(
        trust(documentWith('azure-sev-snp', info), makeAk().akPublic),
        /not the one in the paravisor runtime data/,
      );
    });

    it("rejects a report below the config's minimum TCB", async () => {
      const strict = azureSevSnpTrust({ measurements, ...tcbConfig, snpVersion: 7 }, { now });
      await rejectsWith(
        strict(documentWith('azure-sev-snp', info), akPublic),
        /launch TCB is below the minimum: snp 6 < 7/,
      );
    });

    it("fetches a missing VCEK from AMD's KDS through the injected fetcher, once", async () => {
      const urls: string[] = [];
      const fetch = async (url: string) => {
        urls.push(url);
        return new Uint8Array(vcekDer);
      };
      const t = azureSevSnpTrust({ measurements, ...tcbConfig }, { now, fetch });
      const doc = documentWith('azure-sev-snp', {
        attestationReport: info.attestationReport,
        runtimeData: info.runtimeData,
      });
      await t(doc, akPublic);
      await t(doc, akPublic);
      assert.equal(urls.length, 1);
      assert.match(
        urls[0],
        /^https:\/\/kdsintf\.amd\.com\/vcek\/v1\/Milan\/9e44aaef[0-9a-f]{120}\?blSPL=2&teeSPL=0&snpSPL=6&ucodeSPL=93$/,
      );
    });

    it('says so when the VCEK is missing and cannot be fetched', async () => {
      const doc = documentWith('azure-sev-snp', {
        attestationReport: info.attestationReport,
        runtimeData: info.runtimeData,
      });
      await rejectsWith(trust(doc, akPublic), /no VCEK/);
    });

    it('enforces the firmware signer digests when configured', async () => {
      const config = {
        measurements,
        ...tcbConfig,
        firmwareSignerConfig: { acceptedKeyDigests: ['00'.repeat(48)], enforcementPolicy: 'Equal' },
      };
      await rejectsWith(
        azureSevSnpTrust(config, { now })(documentWith('azure-sev-snp', info), akPublic),
        /not in firmwareSignerConfig.acceptedKeyDigests/,
      );
      const warnings: string[] = [];
      const warnOnly = {
        ...config,
        firmwareSignerConfig: { ...config.firmwareSignerConfig, enforcementPolicy: 'WarnOnly' },
      };
      await azureSevSnpTrust(warnOnly, { now, warn: (m) => warnings.push(m) })(
        documentWith('azure-sev-snp', info),
        akPublic,
      );
      assert.equal(warnings.length, 1);
    });

    it('names a malformed instanceInfo field', async () => {
      await rejectsWith(
        trust(documentWith('azure-sev-snp', { runtimeData: info.runtimeData }), akPublic),
        /instanceInfo\.attestationReport/,
      );
      await assert.rejects(
        trust({ ...documentWith('azure-sev-snp', {}), instanceInfo: '%%%' }, akPublic),
        AttestationError,
      );
    });
  });
});

describe('SNP variants with a test CA', () => {
  let ca: SnpTestCa;
  let vcek: EndorsementKey;
  let vlek: EndorsementKey;
  let ak: TestAk;
  const akDigest = (a: TestAk) =>
    new Uint8Array(
      createHash('sha512')
        .update(a.key.export({ type: 'spki', format: 'der' }))
        .digest(),
    );
  before(() => {
    ca = makeSnpTestCa('Milan');
    vcek = makeEndorsementKey(ca);
    vlek = makeEndorsementKey(ca, { kind: 'vlek' });
    ak = makeAk();
  });

  describe('aws-sev-snp', () => {
    const config = { measurements, bootloaderVersion: 3, teeVersion: 0, snpVersion: 8, microcodeVersion: 115 };

    it('trusts the AK whose SHA-512 the VLEK-signed report carries', async () => {
      const report = makeSnpReport({ signingKey: 'vlek', reportData: akDigest(ak) }, vlek);
      const trust = awsSevSnpTrust(config, { now, amdRoots: ca.roots });
      await trust(
        documentWith('aws-sev-snp', { attestationReport: b64(report), vlek: vlek.cert.pem, certChain: ca.vlekChain }),
        ak.akPublic,
      );
    });

    it('rejects another AK, and a report of another VM', async () => {
      const report = makeSnpReport({ signingKey: 'vlek', reportData: akDigest(ak) }, vlek);
      const trust = awsSevSnpTrust(config, { now, amdRoots: ca.roots });
      const doc = documentWith('aws-sev-snp', {
        attestationReport: b64(report),
        vlek: vlek.cert.pem,
        certChain: ca.vlekChain,
      });
      await rejectsWith(trust(doc, makeAk().akPublic), /REPORT_DATA does not bind the expected data/);
    });

    it("rejects a VLEK report without its VLEK, and AMD's real roots for a test chain", async () => {
      const report = makeSnpReport({ signingKey: 'vlek', reportData: akDigest(ak) }, vlek);
      await rejectsWith(
        awsSevSnpTrust(config, { now, amdRoots: ca.roots })(
          documentWith('aws-sev-snp', { attestationReport: b64(report) }),
          ak.akPublic,
        ),
        /no VLEK certificate/,
      );
      const doc = documentWith('aws-sev-snp', {
        attestationReport: b64(report),
        vlek: vlek.cert.pem,
        certChain: ca.vlekChain,
      });
      await rejectsWith(awsSevSnpTrust(config, { now })(doc, ak.akPublic), /not AMD's ARK/);
    });

    it('rejects a debug VM and a VMPL other than 0', async () => {
      const trust = awsSevSnpTrust(config, { now, amdRoots: ca.roots });
      for (const [fields, re] of [
        [{ policy: 0x30000n | (1n << 19n) }, /allows debugging/],
        [{ vmpl: 1 }, /VMPL 1/],
      ] as const) {
        const report = makeSnpReport({ signingKey: 'vlek', reportData: akDigest(ak), ...fields }, vlek);
        await rejectsWith(
          trust(
            documentWith('aws-sev-snp', {
              attestationReport: b64(report),
              vlek: vlek.cert.pem,
              certChain: ca.vlekChain,
            }),
            ak.akPublic,
          ),
          re,
        );
      }
    });
  });

  describe('gcp-sev-snp', () => {
    const config = { measurements, bootloaderVersion: 3, teeVersion: 0, snpVersion: 8, microcodeVersion: 115 };
    const instance = { projectId: 'p', zone: 'europe-west3-a', instanceName: 'node-1' };

    it('trusts the AK GCP registered and the VCEK-signed report binds', async () => {
      const report = makeSnpReport({ reportData: akDigest(ak) }, vcek);
      const seen: unknown[] = [];
      const trust = gcpSevSnpTrust(config, {
        now,
        amdRoots: ca.roots,
        gcpShieldedIdentity: async (i: unknown) => {
          seen.push(i);
          return { akPublic: ak.akPublic };
        },
      });
      await trust(
        documentWith('gcp-sev-snp', {
          ...instance,
          attestationReport: b64(report),
          vcek: vcek.cert.pem,
          certChain: ca.vcekChain,
        }),
        ak.akPublic,
      );
      assert.deepEqual(seen, [instance]);
    });

    it('trusts the AK when GCP returns only its public key (SubjectPublicKeyInfo), and rejects another one', async () => {
      const report = makeSnpReport({ reportData: akDigest(ak) }, vcek);
      const doc = documentWith('gcp-sev-snp', {
        ...instance,
        attestationReport: b64(report),
        vcek: vcek.cert.pem,
        certChain: ca.vcekChain,
      });
      const spki = (key: TestAk) => new Uint8Array(key.key.export({ type: 'spki', format: 'der' }));
      await gcpSevSnpTrust(config, {
        now,
        amdRoots: ca.roots,
        gcpShieldedIdentity: async () => ({ akSpkiDer: spki(ak) }),
      })(doc, ak.akPublic);
      await rejectsWith(
        gcpSevSnpTrust(config, {
          now,
          amdRoots: ca.roots,
          gcpShieldedIdentity: async () => ({ akSpkiDer: spki(makeAk()) }),
        })(doc, ak.akPublic),
        /not the one GCP registered/,
      );
    });

    it('rejects when GCP registered another AK, even with a valid report', async () => {
      const report = makeSnpReport({ reportData: akDigest(ak) }, vcek);
      const trust = gcpSevSnpTrust(config, {
        now,
        amdRoots: ca.roots,
        gcpShieldedIdentity: async () => ({ akPublic: makeAk().akPublic }),
      });
      await rejectsWith(
        trust(
          documentWith('gcp-sev-snp', {
            ...instance,
            attestationReport: b64(report),
            vcek: vcek.cert.pem,
            certChain: ca.vcekChain,
          }),
          ak.akPublic,
        ),
        /not the one GCP registered/,
      );
    });

    it('rejects a report that binds another AK', async () => {
      const report = makeSnpReport({ reportData: akDigest(makeAk()) }, vcek);
      const trust = gcpSevSnpTrust(config, {
        now,
        amdRoots: ca.roots,
        gcpShieldedIdentity: async () => ({ akPublic: ak.akPublic }),
      });
      await rejectsWith(
        trust(
          documentWith('gcp-sev-snp', {
            ...instance,
            attestationReport: b64(report),
            vcek: vcek.cert.pem,
            certChain: ca.vcekChain,
          }),
          ak.akPublic,
        ),
        /REPORT_DATA/,
      );
    });
  });

  it('builds KDS URLs for Milan and Turin as AMD documents them', () => {
    const chip = Uint8Array.from({ length: 64 }, (_, i) => i);
    const tcb = { fmc: 1, bootloader: 2, tee: 3, snp: 4, microcode: 5 };
    assert.equal(
      kdsVcekUrl('Milan', chip, tcb),
      `https://kdsintf.amd.com/vcek/v1/Milan/${Buffer.from(chip).toString('hex')}?blSPL=2&teeSPL=3&snpSPL=4&ucodeSPL=5`,
    );
    assert.equal(
      kdsVcekUrl('Turin', chip, tcb),
      'https://kdsintf.amd.com/vcek/v1/Turin/0001020304050607?fmcSPL=1&blSPL=2&teeSPL=3&snpSPL=4&ucodeSPL=5',
    );
  });
});
