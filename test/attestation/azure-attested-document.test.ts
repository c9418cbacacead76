/**
 * Azure IMDS's attested document (lib/attestation/azure-attested-document.ts): a genuine document, signed by a
 * metadata.azure.com certificate chaining to the trusted root, is accepted; one re-signed by another CA, tampered
 * with after signing, asked for with another nonce or naming another VM is refused, each with a message saying why.
 * The fake IMDS's document is fetched as the node fetches it (with the intermediate from the signer's AIA URL).
 * The shipped roots are the ones Azure's CA page lists, by thumbprint.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import {
  azureImdsNonce,
  verifyAzureAttestedDocument,
  type AzureAttestedDocumentEvidence,
} from '../../lib/attestation/azure-attested-document.js';
import { AttestationError } from '../../lib/attestation/types.js';
import { AZURE_IMDS_ROOTS } from '../../lib/attestation/variants/azure-imds-roots.js';
import { AzureNodeMetadata } from '../../providers/azure/metadata.js';
import {
  attestedContent,
  imdsTestIntermediateDer,
  imdsTestRoots,
  makeImdsSigner,
  makeUntrustedImdsSigner,
  signAttestedContent,
} from '../fakes/azure/imds-pki.js';
import { startFakeImds, type FakeImds } from '../fakes/azure/imds-server.js';

const VM_ID = '6f1a2b3c-0000-4000-8000-00000000beef';
const SUBSCRIPTION = '11111111-2222-3333-4444-555555555555';
const AK = new Uint8Array(Buffer.from('a stand-in TPMT_PUBLIC of the node’s AK'));
const NONCE = azureImdsNonce(AK);
const intermediatePem = new X509Certificate(Buffer.from(imdsTestIntermediateDer())).toString();

function refused(evidence: AzureAttestedDocumentEvidence, pattern: RegExp, expected = { nonce: NONCE, vmId: VM_ID }) {
  assert.throws(
    () => verifyAzureAttestedDocument(evidence, expected, imdsTestRoots()),
    (err: unknown) => err instanceof AttestationError && pattern.test(err.message),
  );
}

describe("Azure IMDS's attested document", function () {
  this.timeout(20_000);
  let imds: FakeImds | undefined;
  after(async () => {
    await imds?.stop();
  });

  it('the nonce is 10 digits, fixed per attestation key', () => {
    assert.match(NONCE, /^\d{10}$/);
    assert.equal(azureImdsNonce(AK), NONCE);
    assert.notEqual(azureImdsNonce(new Uint8Array([1, 2, 3])), NONCE);
  });

  it('accepts a genuine document (fetched from the fake IMDS as a node does) and returns what it names', async () => {
    imds = await startFakeImds({
      name: 'vm-0',
      computerName: 'vm-0',
      resourceId: `/subscriptions/${SUBSCRIPTION}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/s/virtualMachines/0`,
      subscriptionId: SUBSCRIPTION,
      resourceGroupName: 'rg',
      tags: {},
      privateIp: '10.0.0.4',
      vmId: VM_ID,
    });
    const evidence = await new AzureNodeMetadata({ imdsEndpoint: imds.url }).attestedDocument(NONCE);
    assert.equal(evidence.intermediates?.length, 1, 'the intermediate from the AIA URL');
    const content = verifyAzureAttestedDocument(evidence, { nonce: NONCE, vmId: VM_ID }, imdsTestRoots());
    assert.equal(content.vmId, VM_ID);
    assert.equal(content.subscriptionId, SUBSCRIPTION);
    assert.ok(Math.abs(content.createdOn.getTime() - Date.now()) < 60_000);
    // Without the intermediate the chain is broken; and the production roots do not trust the test CA.
    refused({ signature: evidence.signature }, /does not chain to a trusted root/);
    assert.throws(
      () => verifyAzureAttestedDocument(evidence, { nonce: NONCE, vmId: VM_ID }, AZURE_IMDS_ROOTS),
      /does not chain to a trusted root/,
    );
  });

  it('refuses a re-signed, tampered, wrong-nonce or wrong-vmId document, saying which', async () => {
    const signer = await makeImdsSigner();
    const content = attestedContent({ nonce: NONCE, vmId: VM_ID, subscriptionId: SUBSCRIPTION });
    const genuine = { signature: signAttestedContent(content, signer), intermediates: [intermediatePem] };
    verifyAzureAttestedDocument(genuine, { nonce: NONCE, vmId: VM_ID }, imdsTestRoots());

    // Re-signed: the same content, signed by a metadata.azure.com certificate of another CA.
    const resigned = signAttestedContent(content, await makeUntrustedImdsSigner());
    refused({ signature: resigned, intermediates: [intermediatePem] }, /does not chain to a trusted root/);

    // Tampered: another VM's id put into the signed content after signing (same length).
    const der = Buffer.from(genuine.signature, 'base64');
    const at = der.indexOf(Buffer.from(VM_ID));
    assert.ok(at > 0);
    const tampered = Buffer.from(der);
    tampered.write(VM_ID.replace('beef', 'dead'), at);
    refused({ ...genuine, signature: tampered.toString('base64') }, /message digest differs/);
    // The signature itself altered: not the signer's.
    const badSig = Buffer.from(der);
    badSig[badSig.length - 5] ^= 0xff;
    refused({ ...genuine, signature: badSig.toString('base64') }, /signature is not one of the metadata\.azure\.com/);

    // Asked for with another nonce (another AK's), or naming another VM than the attestation claims.
    const otherNonce = signAttestedContent(
      attestedContent({ nonce: azureImdsNonce(new Uint8Array([9])), vmId: VM_ID, subscriptionId: SUBSCRIPTION }),
      signer,
    );
    refused(
      { ...genuine, signature: otherNonce },
      /names nonce .* not the one derived from this node's attestation key/,
    );
    refused(genuine, /names VM 6f1a2b3c-0000-4000-8000-00000000beef, not 00000000-/, {
      nonce: NONCE,
      vmId: '00000000-0000-4000-8000-00000000dead',
    });

    // A certificate for another name, and bytes that are no PKCS#7 at all.
    const otherName = signAttestedContent(content, await makeImdsSigner(undefined, 'evil.example.com'));
    refused({ ...genuine, signature: otherName }, /no certificate for metadata\.azure\.com/);
    refused({ signature: Buffer.from('not a pkcs7').toString('base64') }, /not a PKCS#7 SignedData/);
  });

  it("ships Azure's documented roots (DigiCert Global Root G2, Microsoft RSA Root CA 2017), by thumbprint", () => {
    const thumbprints = AZURE_IMDS_ROOTS.map((pem) => new X509Certificate(pem).fingerprint.replace(/:/g, ''));
    assert.deepEqual(thumbprints, [
      'DF3C24F9BFD666761B268073FE06D1CC8D4F82A4',
      '73A5E64A3BFF8316FF0EDCCC618A906E4EAE4D74',
    ]);
  });
});
