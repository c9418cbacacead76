import assert from 'node:assert/strict';
import {
  BootstrapTokenIssuer,
  MemoryTokenSink,
  TOKEN_PATTERN,
  TOKEN_TTL_MS,
  type BootstrapToken,
  type TokenSink,
} from '../../joinservice/bootstrap-token.js';
import { UserError } from '../../lib/errors.js';

describe('joinservice/bootstrap-token', () => {
  it("issues kubeadm-format tokens that expire 15 minutes after the clock's now", async () => {
    let now = new Date('2030-05-06T07:08:09.000Z');
    const clock = () => now;
    const sink = new MemoryTokenSink(clock);
    const issuer = new BootstrapTokenIssuer({ sink, clock });
    const token = await issuer.issue();
    assert.match(token.token, TOKEN_PATTERN);
    assert.equal(token.id, token.token.split('.')[0]);
    assert.equal(TOKEN_TTL_MS, 15 * 60_000);
    assert.equal(token.expiresAt.getTime(), now.getTime() + TOKEN_TTL_MS);
    assert.ok(sink.isValid(token.token));

    now = new Date(token.expiresAt.getTime() - 1);
    assert.ok(sink.isValid(token.token));
    now = token.expiresAt;
    assert.equal(sink.isValid(token.token), false);
    assert.equal(sink.size, 0);
  });

  it('draws every character uniformly from [a-z0-9], redrawing the bytes that would bias it', async () => {
    // 252..255 would map onto "a".."d" a second time; they must be skipped, not used.
    const bytes = [255, 254, 253, 252, ...Array.from({ length: 64 }, (_, i) => i % 36)];
    let offset = 0;
    const randomBytes = (n: number) => {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = bytes[offset++ % bytes.length];
      return out;
    };
    const token = await new BootstrapTokenIssuer({ sink: new MemoryTokenSink(), randomBytes }).issue();
    assert.equal(token.id, 'abcdef');
    assert.match(token.token, TOKEN_PATTERN);
  });

  it('gives every call a different token and registers it with the sink before returning it', async () => {
    const registered: BootstrapToken[] = [];
    const sink: TokenSink = { register: async (t) => void registered.push(t) };
    const issuer = new BootstrapTokenIssuer({ sink });
    const tokens = await Promise.all(Array.from({ length: 50 }, () => issuer.issue()));
    assert.equal(new Set(tokens.map((t) => t.token)).size, 50);
    assert.deepEqual(registered.map((t) => t.token).sort(), tokens.map((t) => t.token).sort());
  });

  it('fails the issue when the sink cannot register the token', async () => {
    const issuer = new BootstrapTokenIssuer({
      sink: {
        register: async () => {
          throw new Error('API server unreachable');
        },
      },
    });
    await assert.rejects(issuer.issue(), /API server unreachable/);
  });

  it("returns the token only once the sink's register resolved", async () => {
    let finish!: () => void;
    let registered: BootstrapToken | undefined;
    const sink: TokenSink = {
      register: (token) =>
        new Promise<void>((resolve) => {
          registered = token;
          finish = resolve;
        }),
    };
    let issued: BootstrapToken | undefined;
    const issuing = new BootstrapTokenIssuer({ sink }).issue().then((t) => (issued = t));
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(registered, 'register was called');
    assert.equal(issued, undefined, 'no token before register resolved');
    finish();
    await issuing;
    assert.equal(issued!.token, registered.token);
  });

  it('says that no ticket is issued when the sink refuses the token with a UserError, keeping its reason and hint', async () => {
    const refusal = new UserError('kubeadm token create failed with exit code 1: Unauthorized', {
      hint: 'The full output is in the node log.',
    });
    const issuer = new BootstrapTokenIssuer({
      sink: {
        register: async () => {
          throw refusal;
        },
      },
    });
    await assert.rejects(issuer.issue(), (err: unknown) => {
      assert.ok(err instanceof UserError);
      assert.equal(
        err.message,
        'The bootstrap token for this join could not be registered with Kubernetes, so no ticket was issued: kubeadm token create failed with exit code 1: Unauthorized',
      );
      assert.equal(err.hint, refusal.hint);
      assert.equal(err.cause, refusal);
      return true;
    });
  });
});
