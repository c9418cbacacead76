/**
 * An operator's view of one attestation document: the verdict of the variant's validator and, PCR by PCR,
 * what the config expects against what the document shows (`constellation attestation verify`). When the
 * document fails before PCRs are compared (bad signature, unknown AK), the table shows the values the
 * document claims, marked unverified, so the operator still sees what the node reported.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { isUserError, UserError } from '../errors.js';
import {
  AttestationError,
  type AttestationDocument,
  type Measurements,
  type PcrComparison,
  type Validator,
  type ValidatorDeps,
  type VtpmAttestation,
} from './types.js';

export interface PcrRow {
  index: number;
  expected: string;
  /** The document's value; null when it has none for this PCR. */
  actual: string | null;
  mode: 'enforced' | 'warn';
  match: boolean;
}

export interface AttestationReport {
  verdict: 'accepted' | 'rejected';
  variant: string;
  warnings: string[];
  pcrs: PcrRow[];
  /** False when the validator stopped before comparing PCRs: `actual` is then what the document claims. */
  pcrsVerified: boolean;
  /** "evidence": only the variant's evidence for the AK was checked (--evidence-only), no quote. Default: the whole document. */
  scope?: 'evidence';
  error?: string;
  hint?: string;
}

const SHA256_BANK = 11;

/** Validates `document` for `nonce` and reports the verdict with the PCR table. Only bugs throw. */
export async function reportAttestation(
  document: AttestationDocument,
  nonce: Uint8Array,
  validator: Validator,
  measurements: Measurements,
): Promise<AttestationReport> {
  const base = { variant: document.variant };
  if (document.variant !== validator.variant) {
    return {
      ...base,
      verdict: 'rejected',
      warnings: [],
      pcrs: claimedRows(document, measurements),
      pcrsVerified: false,
      error: `The document is for attestation variant ${document.variant}, but the config expects ${validator.variant}.`,
    };
  }
  try {
    const result = await validator.validate(document, nonce);
    return { ...base, verdict: 'accepted', warnings: result.warnings, pcrs: rows(result.comparisons), pcrsVerified: true };
  } catch (err) {
    if (!isUserError(err)) throw err;
    const compared = err instanceof AttestationError ? err.comparisons : undefined;
    return {
      ...base,
      verdict: 'rejected',
      warnings: [],
      pcrs: compared ? rows(compared) : claimedRows(document, measurements),
      pcrsVerified: compared !== undefined,
      error: err.message,
      ...(err.hint ? { hint: err.hint } : {}),
    };
  }
}

/** The report as text: verdict, then a PCR table (index, expected, actual, enforced|warn, match). */
export function renderAttestationReport(report: AttestationReport): string {
  const lines = [`Verdict: ${report.verdict === 'accepted' ? 'ACCEPTED' : 'REJECTED'} (variant ${report.variant}${report.scope === 'evidence' ? ', evidence only' : ''})`];
  if (report.scope === 'evidence') lines.push('Checked: the evidence that vouches for the attestation key (TEE report, cloud identity, certificates); no TPM quote.');
  if (report.error) lines.push(`Reason:  ${report.error}`);
  if (report.hint) lines.push(`Hint:    ${report.hint}`);
  for (const warning of report.warnings) lines.push(`Warning: ${warning}`);
  if (report.pcrs.length > 0) {
    lines.push('', report.pcrsVerified ? 'PCRs:' : 'PCRs (values as the document claims them; not verified, the document failed before PCRs were compared):');
    const table = [
      ['PCR', 'expected', 'actual', 'mode', 'match'],
      ...report.pcrs.map((r) => [String(r.index), r.expected, r.actual ?? '(missing)', r.mode, r.match ? 'yes' : 'NO']),
    ];
    const widths = table[0].map((_, col) => Math.max(...table.map((row) => row[col].length)));
    for (const row of table) lines.push(row.map((cell, col) => cell.padEnd(widths[col])).join('  ').trimEnd());
  }
  return `${lines.join('\n')}\n`;
}

function rows(comparisons: PcrComparison[]): PcrRow[] {
  return [...comparisons]
    .sort((a, b) => a.index - b.index)
    .map((c) => ({ index: c.index, expected: c.expected, actual: c.actual ?? null, mode: c.warnOnly ? 'warn' : 'enforced', match: c.match }));
}

/** Rows from the PCR values the document claims (its SHA-256 quote, else its first), unverified. */
function claimedRows(document: AttestationDocument, measurements: Measurements): PcrRow[] {
  const quotes = (document.attestation as Partial<VtpmAttestation>).quotes;
  const quote = Array.isArray(quotes) ? (quotes.find((q) => q?.hashAlg === SHA256_BANK) ?? quotes[0]) : undefined;
  const claimed: Record<string, unknown> = quote && typeof quote.pcrs === 'object' && quote.pcrs !== null ? quote.pcrs : {};
  return Object.entries(measurements)
    .map(([index, m]) => {
      const value = claimed[index];
      const actual = typeof value === 'string' ? value.toLowerCase() : null;
      return { index: Number(index), expected: m.expected, actual, mode: m.warnOnly ? 'warn' : 'enforced', match: actual === m.expected.toLowerCase() } as PcrRow;
    })
    .sort((a, b) => a.index - b.index);
}

export interface VerifyDocumentFileOptions {
  documentFile: string;
  /** Hex; empty for a document made without a nonce. */
  nonceHex: string;
  /**
   * Hex: the quote's qualifying data exactly (a quote made outside Constellation's protocol, e.g. by `gotpm attest`
   * without a nonce; empty string: no qualifying data). Replaces the nonce binding.
   */
  qualifyingDataHex?: string;
  /** Check only the variant's evidence for the AK (TEE report, cloud identity, certificate chain); no quote. */
  evidenceOnly?: boolean;
  /** The config file whose attestation section (variant, measurements) applies. */
  configFile: string;
  /** local-vtpm: a file with the registered AK (TPMT_PUBLIC, binary or base64), used for any instance. */
  akFile?: string;
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
    import('../atls/document.js'),
    import('../config/index.js'),
    import('./registry.js'),
    import('./snp/kds-fetcher.js'),
  ]);
  if (options.qualifyingDataHex !== undefined && options.nonceHex) {
    throw new UserError('--nonce and --qualifying-data exclude each other.', { hint: '--qualifying-data gives the quote\'s qualifying data exactly; the nonce is then not used.' });
  }
  const nonce = parseHex(options.nonceHex, '--nonce');
  const document = parseAttestationDocument(await readUserFile(options.documentFile, 'attestation document'));
  const loaded = await config.loadConfig(path.dirname(options.configFile), { fileName: path.basename(options.configFile) });
  const variant = config.attestationVariantOf(loaded);
  const variantConfig = config.attestationConfigOf(loaded);
  const ak = options.akFile === undefined ? undefined : decodeAk(await readUserFile(options.akFile, 'attestation key'));
  const warnings: string[] = [];
  const provider = config.providerOf(loaded);
  let providerDeps: Partial<ValidatorDeps> = {};
  try {
    providerDeps = (await options.providerDeps?.(provider, (loaded.provider as Record<string, Record<string, unknown>>)[provider] ?? {})) ?? {};
  } catch (err) {
    warnings.push(`The ${provider} provider's attestation clients are not available: ${(err as Error).message}`);
  }
  const deps: ValidatorDeps = { fetch: options.fetch ?? kdsFetcher(), ...providerDeps, warn: (message) => warnings.push(message) };
  if (ak) deps.akRegistry = { lookup: async () => ak };
  if (options.qualifyingDataHex !== undefined) deps.quoteQualifyingData = parseHex(options.qualifyingDataHex, '--qualifying-data');
  const validator = await createValidator(variant, variantConfig, deps);
  const report = options.evidenceOnly ? await reportEvidence(document, validator, variantConfig.measurements) : await reportAttestation(document, nonce, validator, variantConfig.measurements);
  if (report.verdict === 'rejected' && variant === 'local-vtpm' && !ak && !report.hint) {
    report.hint = "The local provider's AK registry is not reachable offline: pass the node's registered attestation key with --ak <file>.";
  }
  return { ...report, warnings: [...new Set([...report.warnings, ...warnings])] };
}

/** --evidence-only: the variant's AK rule alone; PCRs are shown as the document claims them, unverified. */
async function reportEvidence(document: AttestationDocument, validator: Validator, measurements: Measurements): Promise<AttestationReport> {
  const { hasEvidenceCheck } = await import('./variants/vtpm-backed.js');
  const base = { variant: document.variant, scope: 'evidence' as const, warnings: [], pcrs: claimedRows(document, measurements), pcrsVerified: false };
  if (!hasEvidenceCheck(validator)) {
    return { ...base, verdict: 'rejected', error: `Variant ${validator.variant} has no evidence besides the quote: verify a whole document instead of --evidence-only.` };
  }
  if (document.variant !== validator.variant) {
    return { ...base, verdict: 'rejected', error: `The document is for attestation variant ${document.variant}, but the config expects ${validator.variant}.` };
  }
  try {
    await validator.checkEvidence(document);
    return { ...base, verdict: 'accepted' };
  } catch (err) {
    if (!isUserError(err)) throw err;
    return { ...base, verdict: 'rejected', error: err.message, ...(err.hint ? { hint: err.hint } : {}) };
  }
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

async function readUserFile(file: string, what: string): Promise<Buffer> {
  try {
    return await fs.readFile(file);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code;
    throw new UserError(`Cannot read the ${what} ${file}: ${code === 'ENOENT' ? 'no such file' : (cause as Error).message}.`, { cause });
  }
}

/** A TPMT_PUBLIC as raw bytes or as base64 text (which raw TPMT_PUBLIC bytes never are: they start with 0x00). */
function decodeAk(content: Buffer): Uint8Array {
  const text = content.toString('utf8').trim();
  if (content.length > 0 && content[0] !== 0 && /^[A-Za-z0-9+/=\s]+$/.test(text)) return new Uint8Array(Buffer.from(text, 'base64'));
  return new Uint8Array(content);
}
