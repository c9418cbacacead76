/**
 * The Azure node platform (docs/design.md#attestation, docs/design.md#nodes): a confidential (or trusted-launch) VM whose paravisor (HCL) owns the
 * vTPM at /dev/tpmrm0; the state disk is the data disk at LUN 0 (/dev/disk/azure/scsi1/lun0); node metadata from
 * IMDS and Azure Resource Manager. The AK is the paravisor's persistent key (0x81000003), never one of ours:
 *   azure-sev-snp        instanceInfo is the HCL report from NV index 0x01400001: the SNP report and the runtime
 *                        data (holding the AK) whose SHA-256 the report binds; plus the VCEK and ASK/ARK that
 *                        IMDS's THIM service hands out (as upstream does), so verifiers need not ask AMD's KDS;
 *   azure-tdx            the same HCL report holds a TD report, which IMDS turns into a quote (POST /acc/tdquote);
 *   azure-trustedlaunch  the AK certificate from NV index 0x01c101d0.
 * Every variant's instanceInfo also carries the VM's resource id and vmId from IMDS (`identity`), with IMDS's attested
 * document (signed by Microsoft, asked for with a nonce derived from the AK) vouching for the vmId; a join service on
 * this node verifies it and resolves the VM in ARM (./instance-identity.ts) to tell a control plane from a worker.
 * At start the node reports Ready to Azure's wire server (./wire-server.ts): no guest agent runs.
 */
import {
  AZURE_AK_CERT_INDEX,
  AZURE_AK_HANDLE,
  AZURE_HCL_REPORT_INDEX,
  parseHclReport,
} from '../../lib/attestation/cloud-evidence.js';
import { azureImdsNonce } from '../../lib/attestation/azure-attested-document.js';
import { VtpmIssuer } from '../../lib/attestation/vtpm-issuer.js';
import { UserError } from '../../lib/errors.js';
import type { TpmClient } from '../../lib/tpm/client.js';
import { cloudPlatformBase, jsonBytes, kdsDeps } from '../common/node-platform.js';
import type { NodePlatform, NodePlatformOptions } from '../contract.js';
import { nodeCredentialOptions } from './managed-identity.js';
import { AzureNodeMetadata } from './metadata.js';
import { IMDS_ENDPOINT, parseAzureOptions } from './options.js';
import { reportReady } from './wire-server.js';

export const AZURE_STATE_DISK = '/dev/disk/azure/scsi1/lun0';
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

/** IMDS's quote service for TD reports (Azure TDX VMs). */
export async function azureTdQuote(imdsEndpoint: string, tdReport: Uint8Array): Promise<Uint8Array> {
  const response = await fetch(`${imdsEndpoint}/acc/tdquote`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ report: Buffer.from(tdReport).toString('base64url') }),
    signal: AbortSignal.timeout(30_000),
  });
  if (!response.ok)
    throw new UserError(`Azure IMDS refused to quote the TD report: ${response.status} ${response.statusText}.`);
  const { quote } = (await response.json()) as { quote?: string };
  if (!quote) throw new UserError('Azure IMDS answered no quote for the TD report.');
  return new Uint8Array(Buffer.from(quote, 'base64url'));
}

/** The VCEK and its chain from IMDS's THIM service; undefined when it does not answer (verifiers then ask AMD's KDS). */
export async function azureThimCertificates(
  imdsEndpoint: string,
): Promise<{ vcek: string; certChain: string } | undefined> {
  try {
    const response = await fetch(`${imdsEndpoint}/metadata/THIM/amd/certification`, {
      headers: { Metadata: 'true' },
      signal: AbortSignal.timeout(10_000),
    });
    if (!response.ok) return undefined;
    const { vcekCert, certificateChain } = (await response.json()) as { vcekCert?: string; certificateChain?: string };
    return vcekCert && certificateChain ? { vcek: vcekCert, certChain: certificateChain } : undefined;
  } catch {
    return undefined;
  }
}

/** A DER certificate read from an NV index that may be padded after it. */
function derPrefix(bytes: Uint8Array): Uint8Array {
  const b = Buffer.from(bytes);
  if (b[0] !== 0x30) throw new UserError("The vTPM's AK certificate NV index holds no DER certificate.");
  const first = b[1];
  const len = first < 0x80 ? first : b.subarray(2, 2 + (first & 0x7f)).reduce((acc, x) => acc * 256 + x, 0);
  const header = first < 0x80 ? 2 : 2 + (first & 0x7f);
  return new Uint8Array(b.subarray(0, header + len));
}

export async function azureNodePlatform(options: NodePlatformOptions): Promise<NodePlatform> {
  const providerOptions = parseAzureOptions(options.providerOptions);
  const metadata = new AzureNodeMetadata(providerOptions);
  const base = cloudPlatformBase('azure', options, { metadata, stateDisk: AZURE_STATE_DISK });
  const variant = base.variant;
  const instanceInfo = (tpm: TpmClient) => async (akPublic: Uint8Array) => {
    // The VM as IMDS names it, covered by the quote, and IMDS's signed document vouching for its vmId, asked for with
    // this AK's nonce: a join service names the instance from them (./instance-identity.ts).
    const identity = {
      ...(await metadata.vmIdentity()),
      attested: await metadata.attestedDocument(azureImdsNonce(akPublic)),
    };
    if (variant === 'azure-trustedlaunch')
      return jsonBytes({ akCert: b64(derPrefix(await tpm.nvRead(AZURE_AK_CERT_INDEX))), identity });
    const hcl = parseHclReport(await tpm.nvRead(AZURE_HCL_REPORT_INDEX));
    const expected = variant === 'azure-sev-snp' ? 'snp' : 'tdx';
    if (hcl.kind !== expected)
      throw new UserError(`The vTPM's HCL report holds a ${hcl.kind} report, but the node attests as ${variant}.`);
    const imds = providerOptions.imdsEndpoint ?? IMDS_ENDPOINT;
    if (hcl.kind === 'tdx')
      return jsonBytes({
        attestationReport: b64(await azureTdQuote(imds, hcl.teeReport)),
        runtimeData: b64(hcl.runtimeData),
        identity,
      });
    return jsonBytes({
      attestationReport: b64(hcl.teeReport),
      runtimeData: b64(hcl.runtimeData),
      ...(await azureThimCertificates(imds)),
      identity,
    });
  };
  let ready: Promise<void> | undefined;
  return {
    ...base,
    // The node program's first question to its platform: the VM booted, so it tells Azure it is Ready (./wire-server.ts).
    async identity() {
      const identity = await base.identity();
      await (ready ??= reportReady(providerOptions.wireServerEndpoint));
      return identity;
    },
    async issuer(tpm) {
      tpm.useAttestationKey({ kind: 'persistent', handle: AZURE_AK_HANDLE });
      return new VtpmIssuer({ variant, tpm, instanceInfo: instanceInfo(tpm) });
    },
    async validatorDeps() {
      const { azureInstanceIdentity } = await import('./instance-identity.js');
      return {
        ...kdsDeps(base.nodeDir),
        azureInstanceIdentity: azureInstanceIdentity(nodeCredentialOptions(providerOptions), () => metadata.cluster()),
      };
    },
    cloudController: () => metadata.cloudControllerValues(),
  };
}
