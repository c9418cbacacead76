/**
 * Kubernetes bootstrap tokens for joining nodes: kubeadm's format `[a-z0-9]{6}.[a-z0-9]{16}` (token id and
 * secret), valid 15 minutes from the injected clock. Each ticket gets its own token, registered through a
 * TokenSink before it leaves the join service: the Kubernetes backend's sink (bootstrapper/kubernetes: kubeadm
 * registers it with the API server, `none` keeps it in memory). A token whose registration failed is never
 * handed out: issue() fails, and with it the join.
 */
import { randomBytes as nodeRandomBytes } from 'node:crypto';
import { UserError } from '../lib/errors.js';

export const TOKEN_TTL_MS = 15 * 60_000;
export const TOKEN_PATTERN = /^[a-z0-9]{6}\.[a-z0-9]{16}$/;
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
/** The largest multiple of the alphabet's size below 256: bytes from here on are drawn again, so no character is likelier. */
const UNBIASED_LIMIT = 256 - (256 % ALPHABET.length);

export interface BootstrapToken {
  /** "<id>.<secret>". */
  token: string;
  /** The public half (kubeadm's token id), safe to log. */
  id: string;
  expiresAt: Date;
}

/** Where issued tokens go before a node may use them. */
export interface TokenSink {
  register(token: BootstrapToken): Promise<void>;
}

/** Records tokens in memory (the `none` backend and tests); forgets them once they expire. */
export class MemoryTokenSink implements TokenSink {
  private readonly tokens = new Map<string, BootstrapToken>();

  constructor(private readonly clock: () => Date = () => new Date()) {}

  async register(token: BootstrapToken): Promise<void> {
    this.prune();
    this.tokens.set(token.token, token);
  }

  /** Whether `token` was registered and has not expired. */
  isValid(token: string): boolean {
    this.prune();
    return this.tokens.has(token);
  }

  /** How many unexpired tokens it holds. */
  get size(): number {
    this.prune();
    return this.tokens.size;
  }

  private prune(): void {
    const now = this.clock().getTime();
    for (const [key, token] of this.tokens) if (token.expiresAt.getTime() <= now) this.tokens.delete(key);
  }
}

export interface BootstrapTokenIssuerOptions {
  sink: TokenSink;
  clock?: () => Date;
  randomBytes?: (size: number) => Uint8Array;
  ttlMs?: number;
}

export class BootstrapTokenIssuer {
  private readonly clock: () => Date;
  private readonly randomBytes: (size: number) => Uint8Array;
  readonly ttlMs: number;

  constructor(private readonly options: BootstrapTokenIssuerOptions) {
    this.clock = options.clock ?? (() => new Date());
    this.randomBytes = options.randomBytes ?? nodeRandomBytes;
    this.ttlMs = options.ttlMs ?? TOKEN_TTL_MS;
  }

  /**
   * A fresh token, expiring ttl after now, returned only once the sink registered it. When the sink refuses with
   * a UserError, so does this, saying that no ticket is issued (the join service sends that to the node).
   */
  async issue(): Promise<BootstrapToken> {
    const id = this.randomString(6);
    const token: BootstrapToken = {
      token: `${id}.${this.randomString(16)}`,
      id,
      expiresAt: new Date(this.clock().getTime() + this.ttlMs),
    };
    try {
      await this.options.sink.register(token);
    } catch (err) {
      if (!(err instanceof UserError)) throw err;
      throw new UserError(
        `The bootstrap token for this join could not be registered with Kubernetes, so no ticket was issued: ${err.message}`,
        {
          hint: err.hint,
          cause: err,
        },
      );
    }
    return token;
  }

  private randomString(length: number): string {
    let out = '';
    while (out.length < length) {
      for (const byte of this.randomBytes(length * 2)) {
        if (byte < UNBIASED_LIMIT && out.length < length) out += ALPHABET[byte % ALPHABET.length];
      }
    }
    return out;
  }
}
