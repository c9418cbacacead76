/**
 * A fake AMD key distribution service on 127.0.0.1: serves VCEKs (DER) by product, hardware id and TCB query, and
 * per product the ASK+ARK (and ASVK+ARK) chain as PEM, like kdsintf.amd.com; unknown paths are 404. Counts requests.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeKds {
  url: string;
  requests: string[];
  /** Serve `der` for this VCEK path+query (as kdsVcekUrl makes it, without the origin). */
  addVcek(pathAndQuery: string, der: Uint8Array): void;
  addChain(product: string, kind: 'vcek' | 'vlek', pem: string): void;
  close(): Promise<void>;
}

export async function startFakeKds(): Promise<FakeKds> {
  const vceks = new Map<string, Uint8Array>();
  const chains = new Map<string, string>();
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    const url = req.url ?? '/';
    requests.push(url);
    const chain = /^\/(vcek|vlek)\/v1\/([A-Za-z]+)\/cert_chain$/.exec(url);
    if (chain && chains.has(`${chain[2]}/${chain[1]}`)) {
      res.writeHead(200, { 'content-type': 'application/x-pem-file' });
      res.end(chains.get(`${chain[2]}/${chain[1]}`));
      return;
    }
    const der = vceks.get(url);
    if (der) {
      res.writeHead(200, { 'content-type': 'application/pkix-cert' });
      res.end(Buffer.from(der));
      return;
    }
    res.writeHead(404).end('Not Found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    addVcek: (pathAndQuery, der) => vceks.set(pathAndQuery, der),
    addChain: (product, kind, pem) => chains.set(`${product}/${kind}`, pem),
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
