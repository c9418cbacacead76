/**
 * The KDS fetcher against a fake KDS on 127.0.0.1: VCEKs by chip id and reported TCB and a product's ASK/ARK chain,
 * fetched once and then served from the on-disk cache (also by a new process' fetcher), and a clear error when
 * the KDS cannot be reached and nothing is cached.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KdsClient, kdsVcekUrl, KDS_BASE_URL } from '../../../lib/attestation/snp/kds.js';
import { kdsFetcher, KdsUnavailableError } from '../../../lib/attestation/snp/kds-fetcher.js';
import { AttestationError } from '../../../lib/attestation/types.js';
import { startFakeKds, type FakeKds } from '../../fakes/amd/kds-server.js';
import { makeEndorsementKey, makeSnpTestCa, type EndorsementKey, type SnpTestCa } from './fixtures.js';

describe('AMD KDS fetcher (fake KDS, on-disk cache)', () => {
  let kds: FakeKds;
  let cacheDir: string;
  let ca: SnpTestCa;
  let vcek: EndorsementKey;
  let vcekPath: string;

  before(() => {
    ca = makeSnpTestCa('Genoa');
    vcek = makeEndorsementKey(ca);
    vcekPath = kdsVcekUrl('Genoa', vcek.chipId, vcek.tcb).slice(KDS_BASE_URL.length);
  });
  beforeEach(async () => {
    kds = await startFakeKds();
    kds.addVcek(vcekPath, vcek.cert.der);
    kds.addChain('Genoa', 'vcek', ca.vcekChain);
    cacheDir = await fs.mkdtemp(path.join(os.tmpdir(), 'kds-cache-'));
  });
  afterEach(async () => {
    await kds.close();
    await fs.rm(cacheDir, { recursive: true, force: true });
  });

  it('fetches the VCEK by chip id and TCB once, then from the disk cache even in a new fetcher', async () => {
    const client = new KdsClient(kdsFetcher({ baseUrl: kds.url, cacheDir }));
    assert.deepEqual(Buffer.from(await client.vcek('Genoa', vcek.chipId, vcek.tcb)), Buffer.from(vcek.cert.der));
    assert.deepEqual(kds.requests, [vcekPath]);
    assert.match(vcekPath, /^\/vcek\/v1\/Genoa\/[0-9a-f]{128}\?blSPL=3&teeSPL=0&snpSPL=8&ucodeSPL=115$/);
    const cached = await fs.readdir(cacheDir);
    assert.equal(cached.length, 1);
    assert.equal((await fs.stat(path.join(cacheDir, cached[0]))).mode & 0o777, 0o600);

    await kds.close();
    const later = new KdsClient(kdsFetcher({ baseUrl: kds.url, cacheDir }));
    assert.deepEqual(Buffer.from(await later.vcek('Genoa', vcek.chipId, vcek.tcb)), Buffer.from(vcek.cert.der));
  });

  it("fetches a product's ASK and ARK chain", async () => {
    const client = new KdsClient(kdsFetcher({ baseUrl: kds.url, cacheDir }));
    assert.equal(await client.certChain('Genoa'), ca.vcekChain);
    assert.deepEqual(kds.requests, ['/vcek/v1/Genoa/cert_chain']);
  });

  it('says the verifier is offline when the KDS cannot be reached and nothing is cached', async () => {
    await kds.close();
    const fetch = kdsFetcher({ baseUrl: kds.url, cacheDir });
    await assert.rejects(fetch(`${KDS_BASE_URL}${vcekPath}`), (err: Error) => {
      assert.ok(err instanceof KdsUnavailableError);
      assert.match(err.message, /Cannot reach AMD's key distribution service .*ECONNREFUSED.*offline/);
      assert.match(err.hint ?? '', /cached in/);
      return true;
    });
    // Through the KDS client (what validators use) it is an AttestationError that keeps the hint.
    await assert.rejects(
      new KdsClient(fetch).vcek('Genoa', vcek.chipId, vcek.tcb),
      (err: Error) =>
        err instanceof AttestationError &&
        /offline/.test(err.message) &&
        /cached in/.test((err as AttestationError).hint ?? ''),
    );
  });

  it('caches only a certificate: an HTTP 200 answer that is none is refused and not cached', async () => {
    kds.addVcek(vcekPath, Buffer.from('<html>captive portal</html>'));
    const fetch = kdsFetcher({ baseUrl: kds.url, cacheDir });
    await assert.rejects(
      fetch(`${KDS_BASE_URL}${vcekPath}`),
      (err: Error) =>
        err instanceof KdsUnavailableError &&
        /with something that is not a DER certificate; nothing was cached/.test(err.message),
    );
    assert.deepEqual(await fs.readdir(cacheDir), []);
  });

  it('refuses an answer larger than 64 KiB without caching it', async () => {
    kds.addVcek(vcekPath, Buffer.alloc(100_000, 0x30));
    const fetch = kdsFetcher({ baseUrl: kds.url, cacheDir });
    await assert.rejects(fetch(`${KDS_BASE_URL}${vcekPath}`), /answered more than 65536 bytes/);
    assert.deepEqual(await fs.readdir(cacheDir), []);
  });

  it('asks the KDS again for an entry older than 30 days, and for a cached file that is no certificate', async () => {
    let now = Date.now();
    const fetch = kdsFetcher({ baseUrl: kds.url, cacheDir, now: () => now });
    await fetch(`${KDS_BASE_URL}${vcekPath}`);
    await fetch(`${KDS_BASE_URL}${vcekPath}`);
    assert.equal(kds.requests.length, 1, 'a fresh entry is served from the cache');
    now += 31 * 24 * 60 * 60 * 1000;
    assert.deepEqual(Buffer.from(await fetch(`${KDS_BASE_URL}${vcekPath}`)), Buffer.from(vcek.cert.der));
    assert.equal(kds.requests.length, 2, 'an expired entry is fetched again');
    const [file] = await fs.readdir(cacheDir);
    await fs.writeFile(path.join(cacheDir, file), 'planted');
    assert.deepEqual(
      Buffer.from(await kdsFetcher({ baseUrl: kds.url, cacheDir })(`${KDS_BASE_URL}${vcekPath}`)),
      Buffer.from(vcek.cert.der),
    );
    assert.equal(kds.requests.length, 3, 'a cached file that is no certificate is fetched again');
  });

  it('names the KDS answer for an unknown chip, and caches nothing', async () => {
    const other = makeEndorsementKey(ca, { chipId: new Uint8Array(64).fill(9) });
    const fetch = kdsFetcher({ baseUrl: kds.url, cacheDir });
    await assert.rejects(fetch(kdsVcekUrl('Genoa', other.chipId, other.tcb)), /answered 404 Not Found/);
    assert.deepEqual(await fs.readdir(cacheDir), []);
  });
});
