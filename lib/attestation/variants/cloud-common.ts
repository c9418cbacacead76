/**
 * What the cloud variants share: reading a variant's instanceInfo (base64 JSON, validated with zod), the AK
 * of a document as a key, the SNP evidence check (VCEK from the evidence or AMD's KDS, config TCB minimums),
 * Azure's paravisor runtime-data binding (used by azure-sev-snp and azure-tdx), Azure's VM identity
 * (../azure-attested-document.ts) and certificate chains to pinned roots (../certificate.ts, re-exported). Not a
 * variant itself.
 */
import { createHash, type KeyObject } from 'node:crypto';
export { verifyCertChain } from '../certificate.js';
import { z } from 'zod';
import { parseTpmPublic, publicKeyFromTpmPublic, type TpmPublic } from '../../tpm/structures.js';
import { TPM_ALG } from '../../tpm/constants.js';
import {
  AttestationError,
  type AttestationDocument,
  type AttestedInstance,
  type ValidatorDeps,
  type VariantConfig,
} from '../types.js';
import { kdsClientFor, type Fetcher } from '../snp/kds.js';
import { parseSnpReport } from '../snp/report.js';
import { SnpVerifier, type VerifiedSnpReport } from '../snp/verify.js';
import type { AmdRoots } from '../snp/certs.js';
import type { TcbVersion } from '../snp/report.js';
import { decodeBase64Field } from '../vtpm-document.js';
import { parseJson } from '../../json.js';
import { azureImdsNonce, verifyAzureAttestedDocument } from '../azure-attested-document.js';
import { AZURE_IMDS_ROOTS } from './azure-imds-roots.js';

/**
 * Checks that a document's AK is trustworthy for a variant; throws AttestationError otherwise. A variant whose
 * evidence identifies the instance returns it (name, role and addresses as its provider says).
 */
export type AkTrust = (document: AttestationDocument, akPublic: Uint8Array) => Promise<AttestedInstance | void>;

/**
 * The EC2 instance an attested aws-sev-snp node runs on, as its cluster knows it (a join service's node asks EC2):
 * undefined when the instance is not one of this cluster's.
 */
export type AwsInstanceIdentity = (instanceId: string, region: string) => Promise<AttestedInstance | undefined>;

/**
 * The GCE instance an attested gcp-* node runs on (its AK is the one GCP's shielded VM identity returns for it), as
 * its cluster knows it (a join service's node asks Compute): undefined when the instance is not one of this cluster's.
 */
export type GcpInstanceIdentity = (instance: {
  projectId: string;
  zone: string;
  instanceName: string;
}) => Promise<AttestedInstance | undefined>;

/**
 * The Azure VM an attested azure-* node runs on, named by the resource id (and vmId) its IMDS gave the measured node
 * program, as its cluster knows it (a join service's node asks ARM): undefined when it is not one of this cluster's.
 */
export type AzureInstanceIdentity = (vm: { resourceId: string; vmId: string }) => Promise<AttestedInstance | undefined>;

/**
 * instanceInfo.identity of the azure-* variants: the VM as IMDS names it, and IMDS's attested document (signed by
 * Microsoft, ../azure-attested-document.ts) that vouches for the vmId.
 */
export const azureIdentityField = {
  identity: z
    .object({
      resourceId: z.string().min(1),
      vmId: z.string().min(1),
      attested: z.object({ signature: z.string().min(1), intermediates: z.array(z.string()).optional() }).optional(),
    })
    .optional(),
};

/**
 * The VM an azure-* document names, resolved by deps.azureInstanceIdentity (join services); undefined without either.
 * Its vmId counts only when IMDS's attested document, asked for with the nonce of this AK, vouches for it.
 */
export async function azureAttestedInstance(
  info: { identity?: z.infer<typeof azureIdentityField.identity> },
  akPublic: Uint8Array,
  deps: CloudDeps,
): Promise<AttestedInstance | undefined> {
  if (!info.identity || !deps.azureInstanceIdentity) return undefined;
  const { resourceId, vmId, attested } = info.identity;
  if (!attested)
    throw new AttestationError(
      "The attestation names an Azure VM without IMDS's attested document, so nothing vouches for its vmId.",
      undefined,
      { hint: 'The node program fetches it from IMDS (/metadata/attested/document); update the node image.' },
    );
  verifyAzureAttestedDocument(
    attested,
    { nonce: azureImdsNonce(akPublic), vmId },
    deps.azureImdsRoots ?? AZURE_IMDS_ROOTS,
  );
  return deps.azureInstanceIdentity({ resourceId, vmId });
}

/** Test and advanced injection points beyond ValidatorDeps' documented ones. */
export interface CloudDeps extends ValidatorDeps {
  /** Trusted AMD roots per product (default: AMD's, shipped). */
  amdRoots?: AmdRoots;
  /** Trusted Intel roots, PEM (default: Intel's SGX Root CA, shipped). */
  intelRoots?: string[];
  /** Trusted roots of Azure IMDS's attested-document certificates, PEM (default: shipped, ./azure-imds-roots.ts). */
  azureImdsRoots?: readonly string[];
  /** Trusted Microsoft roots for vTPM AK certificates, PEM (default: shipped). */
  microsoftRoots?: string[];
  /** aws-sev-snp: who the instance of an identity document is (join services; without it no instance is named). */
  awsInstanceIdentity?: AwsInstanceIdentity;
  /** gcp-*: who the instance of a verified AK is (join services; without it no instance is named). */
  gcpInstanceIdentity?: GcpInstanceIdentity;
  /** azure-*: who the VM of a document's identity is (join services; without it no instance is named). */
  azureInstanceIdentity?: AzureInstanceIdentity;
}

/** Decodes `document.instanceInfo` (base64 of JSON) and validates it against the variant's schema. */
export function readInstanceInfo<T>(variant: string, document: AttestationDocument, schema: z.ZodType<T>): T {
  let json: unknown;
  try {
    json = parseJson(Buffer.from(decodeBase64Field('instanceInfo', document.instanceInfo)).toString('utf8'));
  } catch (cause) {
    if (cause instanceof AttestationError) throw cause;
    throw new AttestationError(`${variant}: the document's instanceInfo is not base64-encoded JSON`, undefined, {
      cause,
    });
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AttestationError(`${variant}: instanceInfo.${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  return parsed.data;
}

export interface AkKey {
  publicArea: TpmPublic;
  key: KeyObject;
  /** DER SubjectPublicKeyInfo of the AK, as bound by AWS and GCP SNP reports. */
  spki: Uint8Array;
}

export function akKey(variant: string, akPublic: Uint8Array): AkKey {
  try {
    const publicArea = parseTpmPublic(akPublic);
    const key = publicKeyFromTpmPublic(publicArea);
    return { publicArea, key, spki: new Uint8Array(key.export({ type: 'spki', format: 'der' })) };
  } catch (cause) {
    throw new AttestationError(
      `${variant}: the attestation key is not a valid TPMT_PUBLIC (${(cause as Error).message})`,
      undefined,
      { cause },
    );
  }
}

export function sha512(b: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha512').update(b).digest());
}

/** The config's minimum TCB of an SNP variant (keys bootloaderVersion, teeVersion, snpVersion, microcodeVersion). */
function snpMinimumTcb(config: VariantConfig): Partial<TcbVersion> {
  const pick = (key: string) => (typeof config[key] === 'number' ? (config[key] as number) : undefined);
  const out: Partial<TcbVersion> = {};
  const set = (k: keyof TcbVersion, key: string) => {
    const v = pick(key);
    if (v !== undefined) out[k] = v;
  };
  set('bootloader', 'bootloaderVersion');
  set('tee', 'teeVersion');
  set('snp', 'snpVersion');
  set('microcode', 'microcodeVersion');
  return out;
}

/** The instanceInfo fields that carry SNP evidence; each SNP variant's schema adds its own. */
export const snpEvidenceFields = {
  attestationReport: z.string().min(1),
  /** VCEK, PEM; fetched from AMD's KDS when absent. */
  vcek: z.string().optional(),
  /** ASK/ASVK and ARK, PEM; default: AMD's. */
  certChain: z.string().optional(),
};

export interface SnpEvidenceInfo {
  attestationReport: string;
  vcek?: string;
  certChain?: string;
}

export type SnpEvidenceCheck = (
  info: SnpEvidenceInfo,
  options?: { signingCert?: string; reportData?: Uint8Array },
) => Promise<VerifiedSnpReport>;

/**
 * An SNP variant's evidence check: one verifier per validator (it caches verified chains) with the config's TCB
 * minimums. The report is signed by `signingCert` (default: the instanceInfo's VCEK, else the VCEK fetched from
 * AMD through deps.fetch); `reportData`, when given, must be its REPORT_DATA.
 */
export function snpEvidenceCheck(variant: string, config: VariantConfig, deps: CloudDeps): SnpEvidenceCheck {
  const verifier = new SnpVerifier({ roots: deps.amdRoots });
  const minimumTcb = snpMinimumTcb(config);
  return async (info, options = {}) => {
    const report = decodeBase64Field('instanceInfo.attestationReport', info.attestationReport);
    let signingCert: string | Uint8Array | undefined = options.signingCert ?? info.vcek;
    if (signingCert === undefined) {
      const parsed = parseSnpReport(report);
      if (parsed.signingKey === 'vlek')
        throw new AttestationError(
          `${variant}: the report is signed by a VLEK, but the evidence carries no VLEK certificate`,
        );
      const fetch = deps.fetch as Fetcher | undefined;
      if (!fetch)
        throw new AttestationError(
          `${variant}: the evidence carries no VCEK and this verifier has no way to fetch it from AMD`,
        );
      signingCert = await kdsClientFor(fetch).vcek(parsed.product, parsed.chipId, parsed.reportedTcb);
    }
    return verifier.verify(report, {
      signingCert,
      certChain: info.certChain,
      now: deps.now?.(),
      minimumTcb,
      reportData: options.reportData,
    });
  };
}

/**
 * Azure's paravisor (HCL) binding: the TEE report's REPORT_DATA[0:32] is SHA-256 of the runtime data (JSON),
 * whose key "HCLAkPub" is the vTPM's attestation key. Proves the AK lives in the attested VM.
 */
export function verifyHclRuntimeData(
  variant: string,
  runtimeData: Uint8Array,
  reportData: Uint8Array,
  ak: AkKey,
): void {
  const digest = createHash('sha256').update(runtimeData).digest();
  if (!digest.equals(reportData.subarray(0, 32))) {
    throw new AttestationError(
      `${variant}: the report's REPORT_DATA does not bind the paravisor runtime data (SHA-256 differs)`,
    );
  }
  let parsed: unknown;
  try {
    parsed = parseJson(Buffer.from(runtimeData).toString('utf8'));
  } catch (cause) {
    throw new AttestationError(`${variant}: the paravisor runtime data is not JSON`, undefined, { cause });
  }
  type Jwk = { kid?: unknown; kty?: unknown; n?: unknown; e?: unknown };
  const listed = (parsed as { keys?: unknown } | null)?.keys;
  const keys = (Array.isArray(listed) ? listed : []).filter((k): k is Jwk => typeof k === 'object' && k !== null);
  const hclKey = keys.find((k) => k.kid === 'HCLAkPub') ?? keys[0];
  if (!hclKey) throw new AttestationError(`${variant}: the paravisor runtime data holds no attestation key`);
  const area = ak.publicArea;
  if (
    area.type !== TPM_ALG.RSA ||
    hclKey.kty !== 'RSA' ||
    typeof hclKey.n !== 'string' ||
    typeof hclKey.e !== 'string' ||
    !hclKey.n ||
    !hclKey.e
  ) {
    throw new AttestationError(`${variant}: the paravisor's attestation key and the quote's AK are not both RSA keys`);
  }
  const n = Buffer.from(hclKey.n, 'base64url');
  const e = Buffer.from(hclKey.e, 'base64url').reduce((acc, b) => acc * 256 + b, 0);
  const akE = area.parameters.exponent === 0 ? 65537 : area.parameters.exponent;
  if (!n.equals(area.unique.n) || e !== akE) {
    throw new AttestationError(
      `${variant}: the quote's attestation key is not the one in the paravisor runtime data (HCLAkPub)`,
    );
  }
}

/** The AK of the document must be the key in `cert`. */
export function sameKey(a: KeyObject, b: KeyObject): boolean {
  return Buffer.from(a.export({ type: 'spki', format: 'der' })).equals(b.export({ type: 'spki', format: 'der' }));
}
