import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { UserError } from '../../lib/errors.js';
import { readUrl, toUrl } from '../../lib/images/read-url.js';
import { parseVersionIndex } from '../../lib/images/version-index.js';
import { httpsFileServer, tempDir, type HttpsFileServer } from './support.js';

describe('reading supply-chain files from URLs', () => {
  let dir: string;
  let server: HttpsFileServer;
  before(async () => {
    dir = await tempDir();
    await fs.mkdir(path.join(dir, 'v2'));
    await fs.writeFile(path.join(dir, 'v2', 'measurements.json'), 'signed bytes');
    await fs.writeFile(path.join(dir, 'big'), Buffer.alloc(2048));
    server = await httpsFileServer(dir);
  });
  after(async () => {
    await server.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('reads https with the CA it is given, following a redirect', async () => {
    assert.equal(
      (await readUrl(new URL('v2/measurements.json', server.url), { ca: server.ca })).toString(),
      'signed bytes',
    );
    assert.equal(
      (await readUrl(new URL('redirect/v2/measurements.json', server.url), { ca: server.ca })).toString(),
      'signed bytes',
    );
  });

  it('refuses a server whose certificate it does not trust', async () => {
    await assert.rejects(
      readUrl(new URL('v2/measurements.json', server.url)),
      (err: Error) =>
        err instanceof UserError && err.message.startsWith(`Cannot fetch ${server.url}v2/measurements.json: `),
    );
  });

  it('names the URL and the HTTP status of a missing file', async () => {
    await assert.rejects(
      readUrl(new URL('v3/measurements.json', server.url), { ca: server.ca }),
      new RegExp(`Cannot fetch ${server.url}v3/measurements.json: HTTP 404`),
    );
  });

  it('never follows a redirect to plain http', async () => {
    await assert.rejects(
      readUrl(new URL('to-http/v2/measurements.json', server.url), { ca: server.ca }),
      /a redirect to http: \(only https is followed\)/,
    );
  });

  it('refuses files larger than the limit, over https and from disk', async () => {
    await assert.rejects(
      readUrl(new URL('big', server.url), { ca: server.ca, maxBytes: 1024 }),
      /larger than 1024 bytes/,
    );
    await assert.rejects(readUrl(pathToFileURL(path.join(dir, 'big')), { maxBytes: 1024 }), /larger than 1024 bytes/);
  });

  it('ends a read that trickles one byte at a time at its total deadline, naming it', async () => {
    const started = Date.now();
    await assert.rejects(
      readUrl(new URL('slow', server.url), { ca: server.ca, timeoutMs: 10_000, deadlineMs: 700 }),
      (err: Error) =>
        err instanceof UserError && err.message === `Cannot fetch ${server.url}slow: not read within 700 ms.`,
    );
    assert.ok(Date.now() - started < 5_000);
  });

  it('refuses a file URL that names another host with a UserError that says what a file URL is (not a TypeError)', async () => {
    assert.throws(
      () => toUrl('file://host/x'),
      (err: Error) =>
        err instanceof UserError &&
        /file:\/\/host\/x: a file URL names a file on this machine, not on "host"\./.test(err.message),
    );
    await assert.rejects(
      readUrl(new URL('file://host/x')),
      (err: Error) => err instanceof UserError && /not on "host"/.test(err.message),
    );
    assert.equal(
      (await readUrl(toUrl(`file://localhost${path.join(dir, 'v2', 'measurements.json')}`))).toString(),
      'signed bytes',
    );
  });

  it('reads file URLs and paths (relative to cwd), and refuses plain http and other schemes', async () => {
    assert.equal(
      (await readUrl(toUrl(pathToFileURL(path.join(dir, 'v2', 'measurements.json')).href))).toString(),
      'signed bytes',
    );
    assert.equal((await readUrl(toUrl('v2/measurements.json', dir))).toString(), 'signed bytes');
    assert.throws(
      () => toUrl('http://example.test/m.json'),
      /only https and file URLs \(or paths\) are read, not http/,
    );
    assert.throws(() => toUrl('ftp://example.test/m.json'), /not ftp/);
    await assert.rejects(readUrl(toUrl('nope.json', dir)), new RegExp(`Cannot read ${dir}/nope.json: no such file`));
  });
});

describe('version indexes', () => {
  const base = new URL('https://images.example.test/series/index.json');

  it('resolve relative URLs against the index and default each image reference to its version', () => {
    const entries = parseVersionIndex(
      JSON.stringify({
        images: [
          { version: 'v2', measurementsUrl: 'v2/measurements.json', signatureUrl: 'v2/measurements.json.sig' },
          {
            version: 'v3',
            measurementsUrl: 'https://cdn.example.test/v3.json',
            signatureUrl: '/sig/v3',
            image: 'ami-0123',
            variant: 'aws-sev-snp',
          },
        ],
      }),
      base,
    );
    assert.deepEqual(
      entries.map((e) => [e.version, e.image, e.variant, e.measurementsUrl.href, e.signatureUrl.href]),
      [
        [
          'v2',
          'v2',
          undefined,
          'https://images.example.test/series/v2/measurements.json',
          'https://images.example.test/series/v2/measurements.json.sig',
        ],
        ['v3', 'ami-0123', 'aws-sev-snp', 'https://cdn.example.test/v3.json', 'https://images.example.test/sig/v3'],
      ],
    );
  });

  const invalid: [string, unknown, RegExp][] = [
    ['not JSON', '{', /is not valid \(/],
    ['no images list', { versions: [] }, /images: /],
    [
      'a version that is no version',
      { images: [{ version: '../x', measurementsUrl: 'a', signatureUrl: 'b' }] },
      /images\.0\.version: is not an image version/,
    ],
    [
      'an unknown variant',
      { images: [{ version: 'v1', measurementsUrl: 'a', signatureUrl: 'b', variant: 'tpm' }] },
      /images\.0\.variant/,
    ],
    [
      'an http URL',
      { images: [{ version: 'v1', measurementsUrl: 'http://x.test/m', signatureUrl: 'b' }] },
      /points at http:\/\/x\.test\/m \(images\.0\.measurementsUrl\); only https and file URLs are read/,
    ],
    [
      'a file URL in an index read over https',
      { images: [{ version: 'v1', measurementsUrl: 'file:///etc/shadow', signatureUrl: 'b' }] },
      /points at \/etc\/shadow \(images\.0\.measurementsUrl\); an index read over https may point only at https URLs/,
    ],
  ];
  for (const [name, content, expected] of invalid) {
    it(`are refused with ${name}`, () => {
      assert.throws(
        () => parseVersionIndex(typeof content === 'string' ? content : JSON.stringify(content), base),
        (err: Error) => err instanceof UserError && expected.test(err.message),
      );
    });
  }
});
