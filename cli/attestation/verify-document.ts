/**
 * `attestation verify`: reads a saved attestation document, the nonce, the config and (local-vtpm) the node's
 * registered AK, builds the config's validator and reports the verdict with the PCR table
 * (lib/attestation/report.ts). The files are the user's, so every unreadable one is a UserError naming it.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { claimedRows, reportAttestation, type AttestationReport } from '../../lib/attestation/report.js';
import type { AttestationDocument, Measurements, Validator, ValidatorDeps } from '../../lib/attestation/types.js';
import { variantSpec } from '../../lib/attestation/variant.js';
import { isUserError, UserError } from '../../lib/errors.js';
import { formatSize, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';

export interface VerifyDocumentFileOptions {
  documentFile: string;
  /** Hex; empty for a document made without a nonce. Default: the file's "nonce" field (verify -o raw), else empty. */
  nonceHex?: string;
  /** The config file whose attestation section (variant, measurements) applies. */
  configFile: string;
  /** local-vtpm: a file with the registered AK (TPMT_PUBLIC, binary or base64), used for any instance. */
  akFile?: string;
  /**
   * Hex: the quote's qualifying data exactly (a quote made outside Constellation's protocol, e.g. by `gotpm attest`
   * without a nonce; empty string: no qualifying data). Replaces the nonce binding.
   */
  qualifyingDataHex?: string;
  /** Check only the variant's evidence for the AK (TEE report, cloud identity, certificate chain); no quote. */
  evidenceOnly?: boolean;
  /**
   * The collaborators of the config's provider (its cloud clients with their default credential chains), given the
   * provider's name and its config section; a failure to make them is reported as a warning, not fatal.
   */
  providerDeps?: (provider: string, section: Record<string, unknown>) => Promise<Partial<ValidatorDeps>>;
  /** Where SEV-SNP VCEKs missing from the evidence come from (default: AMD's KDS with the on-disk cache). */
  fetch?: ValidatorDeps['fetch'];
}

/** `attestation verify`: reads the document, nonce, config and AK, builds the config's validator, reports. */
export async function verifyDocumentFile(options: VerifyDocumentFileOptions): Promise<AttestationReport> {
  const [{ parseAttestationDocument }, config, { createValidator }, { kdsFetcher }] = await Promise.all([
    import('../../lib/atls/document.js'),
    import('../../lib/config/index.js'),
    import('../../lib/attestation/registry.js'),
    import('../../lib/attestation/snp/kds-fetcher.js'),
  ]);
  if (options.qualifyingDataHex !== undefined && options.nonceHex) {
    throw new UserError('--nonce and --qualifying-data exclude each other.', {
      hint: "--qualifying-data gives the quote's qualifying data exactly; the nonce is then not used.",
    });
  }
  const content = await readUserFile(options.documentFile, 'attestation document');
  const document = parseAttestationDocument(content);
  const nonce =
    options.nonceHex !== undefined
      ? parseHex(options.nonceHex, '--nonce')
      : options.qualifyingDataHex !== undefined
        ? new Uint8Array(0)
        : savedNonce(content);
  const loaded = await config.loadConfig(path.dirname(options.configFile), {
    fileName: path.basename(options.configFile),
  });
  const variant = config.attestationVariantOf(loaded);
  const variantConfig = config.attestationConfigOf(loaded);
  const ak = options.akFile === undefined ? undefined : decodeAk(await readUserFile(options.akFile, 'attestation key'));
  const warnings: string[] = [];
  const provider = config.providerOf(loaded);
  let providerDeps: Partial<ValidatorDeps> = {};
  try {
    providerDeps =
      (await options.providerDeps?.(
        provider,
        (loaded.provider as Record<string, Record<string, unknown>>)[provider] ?? {},
      )) ?? {};
  } catch (err) {
    warnings.push(`The ${provider} provider's attestation clients are not available: ${(err as Error).message}`);
  }
  const deps: ValidatorDeps = {
    fetch: options.fetch ?? kdsFetcher(),
    ...providerDeps,
    warn: (message) => warnings.push(message),
  };
  if (ak) deps.akRegistry = { lookup: async () => ({ akPublic: ak }) };
  if (options.qualifyingDataHex !== undefined)
    deps.quoteQualifyingData = parseHex(options.qualifyingDataHex, '--qualifying-data');
  const validator = await createValidator(variant, variantConfig, deps);
  const report = options.evidenceOnly
    ? await reportEvidence(document, validator, variantConfig.measurements)
    : await reportAttestation(document, nonce, validator, variantConfig.measurements);
  if (report.verdict === 'rejected' && variantSpec(variant).akTrust === 'provider-registry' && !ak && !report.hint) {
    report.hint =
      "The local provider's AK registry is not reachable offline: pass the node's registered attestation key with --ak <file>.";
  }
  return { ...report, warnings: [...new Set([...report.warnings, ...warnings])] };
}

/** --evidence-only: the variant's AK rule alone; PCRs are shown as the document claims them, unverified. */
async function reportEvidence(
  document: AttestationDocument,
  validator: Validator,
  measurements: Measurements,
): Promise<AttestationReport> {
  const { hasEvidenceCheck } = await import('../../lib/attestation/variants/vtpm-backed.js');
  const base = {
    variant: document.variant,
    scope: 'evidence' as const,
    warnings: [],
    pcrs: claimedRows(document, measurements),
    pcrsVerified: false,
  };
  if (!hasEvidenceCheck(validator)) {
    return {
      ...base,
      verdict: 'rejected',
      error: `Variant ${validator.variant} has no evidence besides the quote: verify a whole document instead of --evidence-only.`,
    };
  }
  if (document.variant !== validator.variant) {
    return {
      ...base,
      verdict: 'rejected',
      error: `The document is for attestation variant ${document.variant}, but the config expects ${validator.variant}.`,
    };
  }
  try {
    await validator.checkEvidence(document);
    return { ...base, verdict: 'accepted' };
  } catch (err) {
    if (!isUserError(err)) throw err;
    return { ...base, verdict: 'rejected', error: err.message, ...(err.hint ? { hint: err.hint } : {}) };
  }
}

/** The "nonce" field `verify -o raw` adds to the document it prints (hex); empty when there is none. */
function savedNonce(content: Buffer): Uint8Array {
  let value: unknown;
  try {
    value = (JSON.parse(content.toString('utf8')) as { nonce?: unknown }).nonce;
  } catch {
    return new Uint8Array(0); // parseAttestationDocument accepted it, so this does not happen
  }
  return typeof value === 'string' ? parseHex(value, 'The document\'s "nonce" field') : new Uint8Array(0);
}

function parseHex(text: string, flag: string): Uint8Array {
  const hex = text.trim().replace(/^0x/i, '');
  if (hex.length % 2 !== 0 || !/^[0-9a-f]*$/i.test(hex)) {
    throw new UserError(`${flag} is not hex: "${text.length > 80 ? `${text.slice(0, 80)}…` : text}".`, {
      hint: `Give it as hex digits (an even number of them), e.g. ${flag} 00112233.`,
    });
  }
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

/**
 * A file the user named on the command line (a link is the user's choice and is followed), of at most the
 * attestation document's size limit: the parser behind it never sees more.
 */
async function readUserFile(file: string, what: string): Promise<Buffer> {
  try {
    const { size } = await fs.stat(file);
    if (size > SIZE_LIMITS.attestationDocument) {
      throw new UserError(
        `The ${what} ${file} is ${formatSize(size)}; the limit is ${formatSize(SIZE_LIMITS.attestationDocument)}.`,
      );
    }
    return await fs.readFile(file);
  } catch (cause) {
    if (cause instanceof UserError) throw cause;
    const code = (cause as NodeJS.ErrnoException).code;
    throw new UserError(
      `Cannot read the ${what} ${file}: ${code === 'ENOENT' ? 'no such file' : (cause as Error).message}.`,
      { cause },
    );
  }
}

/** A TPMT_PUBLIC as raw bytes or as base64 text (which raw TPMT_PUBLIC bytes never are: they start with 0x00). */
function decodeAk(content: Buffer): Uint8Array {
  const text = content.toString('utf8').trim();
  if (content.length > 0 && content[0] !== 0 && /^[A-Za-z0-9+/=\s]+$/.test(text))
    return new Uint8Array(Buffer.from(text, 'base64'));
  return new Uint8Array(content);
}
