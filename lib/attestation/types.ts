/**
 * The attestation contract (docs/design.md#attestation) every variant implements: an Issuer on the node makes a document,
 * a Validator on the verifier's side checks it. Encodings inside the document are fixed here so that
 * issuers and validators written separately agree byte for byte.
 */
import { UserError } from '../errors.js';

/**
 * The attestation document, as JSON on the wire. Byte fields are standard base64.
 * - `attestation`: the variant's evidence. For vTPM-based variants a VtpmAttestation.
 * - `instanceInfo`: variant-specific bytes bound into the quote (e.g. Azure: SNP report + runtime data).
 * - `userData`: what the attested side binds (for aTLS: SHA-256 of purpose, public key and request fields).
 */
export interface AttestationDocument {
  variant: string;
  attestation: VtpmAttestation | Record<string, unknown>;
  instanceInfo: string;
  userData: string;
}

/** vTPM evidence: the AK's TPMT_PUBLIC, one quote per PCR bank, optionally the TCG event log. */
export interface VtpmAttestation {
  akPublic: string;
  quotes: VtpmQuote[];
  eventLog?: string;
}

export interface VtpmQuote {
  /** TPM algorithm id of the PCR bank: 11 = SHA-256, 12 = SHA-384 (4 = SHA-1 is refused by validators). */
  hashAlg: number;
  /** TPMS_ATTEST, base64. */
  quote: string;
  /** TPMT_SIGNATURE, base64. */
  signature: string;
  /** PCR index (decimal string) -> value, hex. */
  pcrs: Record<string, string>;
}

/** One PCR's expected value (hex) and whether a mismatch only warns. The config's `measurements` map. */
export interface Measurement {
  expected: string;
  warnOnly: boolean;
}
export type Measurements = Record<string, Measurement>;

export interface PcrComparison {
  index: number;
  expected: string;
  actual: string | undefined;
  warnOnly: boolean;
  match: boolean;
}

/**
 * The instance a variant's AK trust vouches for: the AK belongs to this instance, and the provider says what
 * role it created the instance with. Attestation proves the software; only this proves *which* node it is —
 * every node runs the same image, so a worker's quote looks like a control plane's.
 */
export interface AttestedInstance {
  name: string;
  role?: 'control-plane' | 'worker';
  /** The IP addresses the provider gave the instance (what a kubelet certificate may name), when it says. */
  addresses?: string[];
}

export interface ValidationResult {
  /** Set by variants whose AK trust names an instance (local-vtpm: the node the provider registered the AK for). */
  instance?: AttestedInstance;
  userData: Uint8Array;
  /** The PCR values of the verified quote (bank the validator compared), index -> value. */
  pcrs: Map<number, Uint8Array>;
  comparisons: PcrComparison[];
  /** Human-readable warnings (warnOnly mismatches, and similar). */
  warnings: string[];
}

/** Node side. `issue` must bind userData and nonce into the quote: qualifyingData = SHA-256(instanceInfo ‖ SHA-256(userData ‖ nonce)). */
export interface Issuer {
  readonly variant: string;
  issue(userData: Uint8Array, nonce: Uint8Array): Promise<AttestationDocument>;
}

/** Verifier side. Throws AttestationError on any failure; returns only for evidence that passed every check. */
export interface Validator {
  readonly variant: string;
  validate(document: AttestationDocument, nonce: Uint8Array): Promise<ValidationResult>;
}

/** Why a document was rejected. `comparisons` is set when PCRs were compared (so a report can show the table). */
export class AttestationError extends UserError {
  constructor(
    message: string,
    readonly comparisons?: PcrComparison[],
    options: { hint?: string; cause?: unknown } = {},
  ) {
    super(message, options);
  }
}

/** A variant's section of the config's `attestation` (measurements plus variant fields such as TCB minimums). */
export interface VariantConfig {
  measurements: Measurements;
  [key: string]: unknown;
}

/** What a provider registered for an instance it created. */
export interface RegisteredInstance {
  /** The TPMT_PUBLIC of the instance's AK. */
  akPublic: Uint8Array;
  /** The role the provider created the instance with, when it recorded one. */
  role?: 'control-plane' | 'worker';
  /** The IP addresses the provider gave the instance, when it recorded them. */
  addresses?: string[];
}

/**
 * Looks up the AK a provider registered for an instance (local-vtpm; like GCP's shielded-instance identity). One
 * lookup gives the AK with the instance's role and addresses: a validation asks once, not once per fact.
 */
export interface AkRegistry {
  /** The instance's registration, or undefined when the instance is unknown. */
  lookup(instance: string): Promise<RegisteredInstance | undefined>;
}

/**
 * Collaborators a validator may need. Each variant uses what applies to it; tests pass fakes.
 * By convention every variant lives in `lib/attestation/variants/<variant>.ts` and exports
 * `createValidator(config: VariantConfig, deps: ValidatorDeps): Validator`.
 */
export interface ValidatorDeps {
  now?: () => Date;
  warn?: (message: string) => void;
  /** HTTP GET returning bytes (AMD KDS, Intel PCS); tests inject a fake, nothing reaches the internet. */
  fetch?: (url: string) => Promise<Uint8Array>;
  akRegistry?: AkRegistry;
  /**
   * `attestation verify --qualifying-data` only: the quote's qualifying data exactly as a tool outside
   * Constellation's protocol made it (e.g. a quote without a nonce), instead of SHA-256(instanceInfo ‖ SHA-256(userData
   * ‖ nonce)). Never set by a service: it gives up the binding to a fresh nonce.
   */
  quoteQualifyingData?: Uint8Array;
  [key: string]: unknown;
}
