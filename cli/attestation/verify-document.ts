/**
 * `attestation verify`: reads a saved attestation document, the nonce, the config and (local-vtpm) the node's
 * registered AK, builds the config's validator and reports the verdict with the PCR table
 * (lib/attestation/report.ts). The files are the user's, so every unreadable one is a UserError naming it.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { reportAttestation, type AttestationReport } from '../../lib/attestation/report.js';
import type { ValidatorDeps } from '../../lib/attestation/types.js';
import { variantSpec } from '../../lib/attestation/variant.js';
import { UserError } from '../../lib/errors.js';
import { formatSize, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';

export interface VerifyDocumentFileOptions {
  documentFile: string;
  /** Hex; empty for a document made without a nonce. */
  nonceHex: string;
  /** The config file whose attestation section (variant, measurements) applies. */
  configFile: string;
  /** local-vtpm: a file with the registered AK (TPMT_PUBLIC, binary or base64), used for any instance. */
  akFile?: string;
}

/** `attestation verify`: reads the document, nonce, config and AK, builds the config's validator, reports. */
export async function verifyDocumentFile(options: VerifyDocumentFileOptions): Promise<AttestationReport> {
  const [{ parseAttestationDocument }, config, { createValidator }] = await Promise.all([
    import('../../lib/atls/document.js'),
    import('../../lib/config/index.js'),
    import('../../lib/attestation/registry.js'),
  ]);
  const nonce = parseHex(options.nonceHex);
  const document = parseAttestationDocument(await readUserFile(options.documentFile, 'attestation document'));
  const loaded = await config.loadConfig(path.dirname(options.configFile), { fileName: path.basename(options.configFile) });
  const variant = config.attestationVariantOf(loaded);
  const variantConfig = config.attestationConfigOf(loaded);
  const ak = options.akFile === undefined ? undefined : decodeAk(await readUserFile(options.akFile, 'attestation key'));
  const warnings: string[] = [];
  const deps: ValidatorDeps = { warn: (message) => warnings.push(message) };
  if (ak) deps.akRegistry = { lookup: async () => ak };
  const validator = await createValidator(variant, variantConfig, deps);
  const report = await reportAttestation(document, nonce, validator, variantConfig.measurements);
  if (report.verdict === 'rejected' && variantSpec(variant).akTrust === 'provider-registry' && !ak && !report.hint) {
    report.hint = "The local provider's AK registry is not reachable offline: pass the node's registered attestation key with --ak <file>.";
  }
  return { ...report, warnings: [...new Set([...report.warnings, ...warnings])] };
}

function parseHex(text: string): Uint8Array {
  const hex = text.trim().replace(/^0x/i, '');
  if (hex.length % 2 !== 0 || !/^[0-9a-f]*$/i.test(hex)) {
    throw new UserError(`--nonce is not hex: "${text.length > 80 ? `${text.slice(0, 80)}…` : text}".`, {
      hint: 'Give the nonce as hex digits (an even number of them), e.g. --nonce 00112233.',
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
      throw new UserError(`The ${what} ${file} is ${formatSize(size)}; the limit is ${formatSize(SIZE_LIMITS.attestationDocument)}.`);
    }
    return await fs.readFile(file);
  } catch (cause) {
    if (cause instanceof UserError) throw cause;
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
