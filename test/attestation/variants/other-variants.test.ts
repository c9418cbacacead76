import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { azureTdxTrust } from '../../../lib/attestation/variants/azure-tdx.js';
import { azureTrustedLaunchTrust } from '../../../lib/attestation/variants/azure-trustedlaunch.js';
import { gcpSevEsTrust } from '../../../lib/attestation/variants/gcp-sev-es.js';
import { awsNitroTpmTrust } from '../../../lib/attestation/variants/aws-nitro-tpm.js';
import { makeCert } from '../snp/test-ca.js';
import { makeTdxQuote, makeTdxTestCa, type TdxTestCa } from '../tdx/fixtures.js';
import { b64, documentWith, makeAk, rejectsWith, type TestAk } from './cloud-helpers.js';

const measurements = { '4': { expected: '00'.repeat(32), warnOnly: false } };
const now = () => new Date('2025-01-01T00:00:00Z');

function runtimeDataFor(ak: TestAk): Buffer {
  return Buffer.from(
    JSON.stringify({
      keys: [{ kid: 'HCLAkPub', key_ops: ['sign'], kty: 'RSA', e: ak.jwk.e, n: ak.jwk.n }],
      'vm-configuration': { 'tpm-enabled': true },
    }),
  );
}

describe('azure-tdx AK trust', () => {
  let ca: TdxTestCa;
  let ak: TestAk;
  const config = {
    measurements,
    qeSVN: 8,
    pceSVN: 13,
    teeTCBSVN: '03000500000000000000000000000000',
    mrSeam: '5e'.repeat(48),
  };
  before(() => {
    ca = makeTdxTestCa();
    ak = makeAk();
  });
  const quoteBinding = (runtimeData: Uint8Array) => createHash('sha256').update(runtimeData).digest();

  it('trusts the AK in the runtime data the TDX quote binds', async () => {
    const runtimeData = runtimeDataFor(ak);
    const quote = makeTdxQuote(ca, { reportData: quoteBinding(runtimeData) });
    await azureTdxTrust(config, { now, intelRoots: [ca.rootPem] })(
      documentWith('azure-tdx', { attestationReport: b64(quote), runtimeData: b64(runtimeData) }),
      ak.akPublic,
    );
  });

  it('rejects a changed runtime data, another AK, and a quote chained to another root', async () => {
    const runtimeData = runtimeDataFor(ak);
    const quote = makeTdxQuote(ca, { reportData: quoteBinding(runtimeData) });
    const trust = azureTdxTrust(config, { now, intelRoots: [ca.rootPem] });
    const changed = Buffer.from(runtimeData.toString().replace('"tpm-enabled":true', '"tpm-enabled":false'));
    await rejectsWith(
      trust(documentWith('azure-tdx', { attestationReport: b64(quote), runtimeData: b64(changed) }), ak.akPublic),
      /does not bind the paravisor runtime data/,
    );
    await rejectsWith(
      trust(
        documentWith('azure-tdx', { attestationReport: b64(quote), runtimeData: b64(runtimeData) }),
        makeAk().akPublic,
      ),
      /HCLAkPub/,
    );
    await rejectsWith(
      azureTdxTrust(config, { now })(
        documentWith('azure-tdx', { attestationReport: b64(quote), runtimeData: b64(runtimeData) }),
        ak.akPublic,
      ),
      /not Intel's SGX Root CA/,
    );
  });

  it("enforces the config's MRSEAM and SVN minimums, and only warns about an all-zero MRSEAM", async () => {
    const runtimeData = runtimeDataFor(ak);
    const doc = documentWith('azure-tdx', {
      attestationReport: b64(makeTdxQuote(ca, { reportData: quoteBinding(runtimeData) })),
      runtimeData: b64(runtimeData),
    });
    await rejectsWith(
      azureTdxTrust({ ...config, mrSeam: 'aa'.repeat(48) }, { now, intelRoots: [ca.rootPem] })(doc, ak.akPublic),
      /MRSEAM/,
    );
    await rejectsWith(
      azureTdxTrust({ ...config, qeSVN: 9 }, { now, intelRoots: [ca.rootPem] })(doc, ak.akPublic),
      /QE SVN 8 is below the minimum 9/,
    );
    const warnings: string[] = [];
    await azureTdxTrust(
      { ...config, mrSeam: '00'.repeat(48) },
      { now, intelRoots: [ca.rootPem], warn: (m) => warnings.push(m) },
    )(doc, ak.akPublic);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /mrSeam is all zeros/);
  });
});

describe('gcp-sev-es AK trust', () => {
  const instance = { projectId: 'p', zone: 'us-central1-a', instanceName: 'node-0' };
  let ak: TestAk;
  before(() => {
    ak = makeAk();
  });

  it('trusts the AK that GCP returns for the instance, as TPMT_PUBLIC or as a certificate', async () => {
    await gcpSevEsTrust({ measurements }, { gcpShieldedIdentity: async () => ({ akPublic: ak.akPublic }) })(
      documentWith('gcp-sev-es', instance),
      ak.akPublic,
    );
    const ca = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const cert = makeCert({
      subject: 'node-0',
      issuer: 'Test Google CA',
      publicKey: ak.key,
      signingKey: ca.privateKey,
      signature: 'ecdsa-sha256',
    });
    await gcpSevEsTrust({ measurements }, { gcpShieldedIdentity: async () => ({ akCertDer: cert.der }) })(
      documentWith('gcp-sev-es', instance),
      ak.akPublic,
    );
  });

  it('trusts the AK that GCP returns only as a public key (signingKey.ekPub as SubjectPublicKeyInfo DER)', async () => {
    const spki = (key: TestAk) => new Uint8Array(key.key.export({ type: 'spki', format: 'der' }));
    const doc = documentWith('gcp-sev-es', instance);
    await gcpSevEsTrust({ measurements }, { gcpShieldedIdentity: async () => ({ akSpkiDer: spki(ak) }) })(
      doc,
      ak.akPublic,
    );
    await rejectsWith(
      gcpSevEsTrust({ measurements }, { gcpShieldedIdentity: async () => ({ akSpkiDer: spki(makeAk()) }) })(
        doc,
        ak.akPublic,
      ),
      /not the one GCP registered for instance node-0/,
    );
    await rejectsWith(
      gcpSevEsTrust({ measurements }, { gcpShieldedIdentity: async () => ({ akSpkiDer: spki(ak).subarray(3) }) })(
        doc,
        ak.akPublic,
      ),
      /GCP's AK public key is malformed/,
    );
  });

  it('rejects another AK, a missing client, a failing lookup and an empty answer', async () => {
    const doc = documentWith('gcp-sev-es', instance);
    await rejectsWith(
      gcpSevEsTrust({ measurements }, { gcpShieldedIdentity: async () => ({ akPublic: makeAk().akPublic }) })(
        doc,
        ak.akPublic,
      ),
      /not the one GCP registered/,
    );
    await rejectsWith(gcpSevEsTrust({ measurements }, {})(doc, ak.akPublic), /no GCP client/);
    await rejectsWith(
      gcpSevEsTrust({ measurements }, { gcpShieldedIdentity: async () => Promise.reject(new Error('403 Forbidden')) })(
        doc,
        ak.akPublic,
      ),
      /403 Forbidden/,
    );
    await rejectsWith(
      gcpSevEsTrust({ measurements }, { gcpShieldedIdentity: async () => ({}) })(doc, ak.akPublic),
      /no attestation key/,
    );
    await rejectsWith(
      gcpSevEsTrust({ measurements }, { gcpShieldedIdentity: async () => ({ akPublic: ak.akPublic }) })(
        documentWith('gcp-sev-es', { zone: 'z' }),
        ak.akPublic,
      ),
      /instanceInfo\.projectId/,
    );
  });
});

describe('aws-nitro-tpm AK trust', () => {
  const identity = { region: 'eu-central-1', imageId: 'ami-0123', instanceId: 'i-0abc', accountId: '123' };
  let ak: TestAk;
  before(() => {
    ak = makeAk();
  });

  it('accepts an instance whose image supports NitroTPM', async () => {
    const seen: unknown[] = [];
    const trust = awsNitroTpmTrust(
      { measurements },
      { awsDescribeImage: async (input: unknown) => (seen.push(input), { tpmSupport: 'v2.0' }) },
    );
    await trust(documentWith('aws-nitro-tpm', identity), ak.akPublic);
    assert.deepEqual(seen, [{ region: 'eu-central-1', imageId: 'ami-0123' }]);
  });

  it('rejects an image without TPM support, an unknown image and a missing EC2 client', async () => {
    const doc = documentWith('aws-nitro-tpm', identity);
    await rejectsWith(
      awsNitroTpmTrust({ measurements }, { awsDescribeImage: async () => ({}) })(doc, ak.akPublic),
      /not registered with NitroTPM support/,
    );
    await rejectsWith(
      awsNitroTpmTrust({ measurements }, { awsDescribeImage: async () => undefined })(doc, ak.akPublic),
      /does not exist/,
    );
    await rejectsWith(awsNitroTpmTrust({ measurements }, {})(doc, ak.akPublic), /no EC2 client/);
  });
});

describe('azure-trustedlaunch AK trust', () => {
  let ak: TestAk;
  let rootPem: string;
  let info: { akCert: string; intermediates: string[] };
  before(() => {
    ak = makeAk();
    const root = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const inter = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const rootCert = makeCert({
      subject: 'Test vTPM Root',
      issuer: 'Test vTPM Root',
      publicKey: root.publicKey,
      signingKey: root.privateKey,
      signature: 'rsa-sha256',
      ca: true,
    });
    const interCert = makeCert({
      subject: 'Test vTPM CA 01',
      issuer: 'Test vTPM Root',
      publicKey: inter.publicKey,
      signingKey: root.privateKey,
      signature: 'rsa-sha256',
      ca: true,
    });
    const akCert = makeCert({
      subject: 'vm.TrustedVM.Azure',
      issuer: 'Test vTPM CA 01',
      publicKey: ak.key,
      signingKey: inter.privateKey,
      signature: 'rsa-sha256',
      notAfter: new Date('2026-01-01T00:00:00Z'),
    });
    rootPem = rootCert.pem;
    info = { akCert: b64(akCert.der), intermediates: [b64(interCert.der)] };
  });

  it('trusts an AK whose certificate chains to a trusted root', async () => {
    await azureTrustedLaunchTrust({ measurements }, { now, microsoftRoots: [rootPem] })(
      documentWith('azure-trustedlaunch', info),
      ak.akPublic,
    );
  });

  it("rejects another AK, a chain to Microsoft's real roots, a missing intermediate and an expired certificate", async () => {
    const doc = documentWith('azure-trustedlaunch', info);
    await rejectsWith(
      azureTrustedLaunchTrust({ measurements }, { now, microsoftRoots: [rootPem] })(doc, makeAk().akPublic),
      /not for the quote's attestation key/,
    );
    await rejectsWith(
      azureTrustedLaunchTrust({ measurements }, { now })(doc, ak.akPublic),
      /does not chain to a trusted root/,
    );
    await rejectsWith(
      azureTrustedLaunchTrust({ measurements }, { now, microsoftRoots: [rootPem] })(
        documentWith('azure-trustedlaunch', { akCert: info.akCert }),
        ak.akPublic,
      ),
      /does not chain/,
    );
    await rejectsWith(
      azureTrustedLaunchTrust(
        { measurements },
        { now: () => new Date('2027-01-01T00:00:00Z'), microsoftRoots: [rootPem] },
      )(doc, ak.akPublic),
      /not valid at/,
    );
  });
});
