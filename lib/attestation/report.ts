/**
 * An operator's view of one attestation document: the verdict of the variant's validator and, PCR by PCR,
 * what the config expects against what the document shows (`constellation attestation verify`). When the
 * document fails before PCRs are compared (bad signature, unknown AK), the table shows the values the
 * document claims, marked unverified, so the operator still sees what the node reported.
 */
import { isUserError } from '../errors.js';
import {
  AttestationError,
  type AttestationDocument,
  type Measurements,
  type PcrComparison,
  type Validator,
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
    return {
      ...base,
      verdict: 'accepted',
      warnings: result.warnings,
      pcrs: rows(result.comparisons),
      pcrsVerified: true,
    };
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
  const lines = [
    `Verdict: ${report.verdict === 'accepted' ? 'ACCEPTED' : 'REJECTED'} (variant ${report.variant}${report.scope === 'evidence' ? ', evidence only' : ''})`,
  ];
  if (report.scope === 'evidence')
    lines.push(
      'Checked: the evidence that vouches for the attestation key (TEE report, cloud identity, certificates); no TPM quote.',
    );
  if (report.error) lines.push(`Reason:  ${report.error}`);
  if (report.hint) lines.push(`Hint:    ${report.hint}`);
  for (const warning of report.warnings) lines.push(`Warning: ${warning}`);
  if (report.pcrs.length > 0) {
    lines.push(
      '',
      report.pcrsVerified
        ? 'PCRs:'
        : 'PCRs (values as the document claims them; not verified, the document failed before PCRs were compared):',
    );
    const table = [
      ['PCR', 'expected', 'actual', 'mode', 'match'],
      ...report.pcrs.map((r) => [String(r.index), r.expected, r.actual ?? '(missing)', r.mode, r.match ? 'yes' : 'NO']),
    ];
    const widths = table[0].map((_, col) => Math.max(...table.map((row) => row[col].length)));
    for (const row of table)
      lines.push(
        row
          .map((cell, col) => cell.padEnd(widths[col]))
          .join('  ')
          .trimEnd(),
      );
  }
  return `${lines.join('\n')}\n`;
}

function rows(comparisons: PcrComparison[]): PcrRow[] {
  return [...comparisons]
    .sort((a, b) => a.index - b.index)
    .map((c) => ({
      index: c.index,
      expected: c.expected,
      actual: c.actual ?? null,
      mode: c.warnOnly ? 'warn' : 'enforced',
      match: c.match,
    }));
}

/** Rows from the PCR values the document claims (its SHA-256 quote, else its first), unverified. */
export function claimedRows(document: AttestationDocument, measurements: Measurements): PcrRow[] {
  const quotes = (document.attestation as Partial<VtpmAttestation>).quotes;
  const quote = Array.isArray(quotes) ? (quotes.find((q) => q?.hashAlg === SHA256_BANK) ?? quotes[0]) : undefined;
  const claimed: Record<string, unknown> =
    quote && typeof quote.pcrs === 'object' && quote.pcrs !== null ? quote.pcrs : {};
  return Object.entries(measurements)
    .map(([index, m]) => {
      const value = claimed[index];
      const actual = typeof value === 'string' ? value.toLowerCase() : null;
      return {
        index: Number(index),
        expected: m.expected,
        actual,
        mode: m.warnOnly ? 'warn' : 'enforced',
        match: actual === m.expected.toLowerCase(),
      } as PcrRow;
    })
    .sort((a, b) => a.index - b.index);
}
