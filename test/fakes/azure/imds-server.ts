/**
 * A fake Azure instance metadata service on 127.0.0.1: answers GET /metadata/instance (with the Metadata: true
 * header IMDS requires) with the instance document of one scale set VM, built from the fake ARM's state, and
 * GET /metadata/identity/oauth2/token with the VM's managed-identity token (when it has one). It also
 * plays that VM's wire server (/machine/?comp=goalstate and ?comp=health, as providers/azure/wire-server.ts speaks
 * it) and counts the Ready reports, for tests of a single node without the fake ARM. GET
 * /metadata/attested/document?nonce=… answers the VM's attested document, signed by a metadata.azure.com
 * certificate of the test PKI (./imds-pki.ts) whose AIA names /pki/intermediate.crt here, which serves its issuer.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  attestedContent,
  imdsTestIntermediateDer,
  makeImdsSigner,
  signAttestedContent,
  type ImdsSigner,
} from './imds-pki.js';

export interface FakeImds {
  url: string;
  /** Health reports with State Ready the wire server got. */
  readyReports: number;
  requests: { path: string; metadataHeader?: string }[];
  /** Managed-identity token requests: the resource and api-version asked for. */
  tokenRequests: { resource: string; apiVersion: string }[];
  stop(): Promise<void>;
}

export interface ImdsVm {
  name: string;
  computerName: string;
  resourceId: string;
  subscriptionId: string;
  resourceGroupName: string;
  tags: Record<string, string>;
  privateIp: string;
  /**
   * The VM's managed identity: IMDS hands out this token at /metadata/identity/oauth2/token (for any resource).
   * Without it the VM has no identity and IMDS answers 400 "Identity not found", as Azure's does.
   */
  managedIdentity?: { token: string };
  /** The VM's unique id (IMDS compute.vmId); default a fixed UUID, as every real VM has one. */
  vmId?: string;
  /** What IMDS's THIM endpoint (/metadata/THIM/amd/certification) hands out on an SEV-SNP VM: VCEK and ASK+ARK, PEM. */
  thim?: { vcekCert: string; certificateChain: string };
}

const DEFAULT_VM_ID = '00000000-0000-4000-8000-0000000000a1';

export async function startFakeImds(vm: ImdsVm): Promise<FakeImds> {
  const requests: FakeImds['requests'] = [];
  const tokenRequests: FakeImds['tokenRequests'] = [];
  let readyReports = 0;
  // The attested document's signer, made once the server's address (which its AIA URL names) is known.
  const pki: { signer?: ImdsSigner } = {};
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    requests.push({ path: url.pathname, metadataHeader: req.headers.metadata as string | undefined });
    if (servePki(url, res)) return;
    if (url.pathname === '/machine/' && req.headers['x-ms-version']) {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (url.searchParams.get('comp') === 'health' && /<State>Ready<\/State>/.test(Buffer.concat(chunks).toString()))
          readyReports++;
        res.writeHead(200, { 'content-type': 'text/xml' });
        res.end(
          url.searchParams.get('comp') === 'goalstate'
            ? `<GoalState><Incarnation>1</Incarnation><Container><ContainerId>c-1</ContainerId><RoleInstanceList><RoleInstance><InstanceId>${vm.name}</InstanceId></RoleInstance></RoleInstanceList></Container></GoalState>`
            : '',
        );
      });
      return;
    }
    if (req.headers.metadata !== 'true') {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'Bad request. Required metadata header not specified' }));
      return;
    }
    if (url.pathname === '/metadata/identity/oauth2/token') {
      tokenRequests.push({
        resource: url.searchParams.get('resource') ?? '',
        apiVersion: url.searchParams.get('api-version') ?? '',
      });
      if (!url.searchParams.get('resource') || !url.searchParams.get('api-version')) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            error: 'invalid_request',
            error_description: 'Required query variable resource or api-version is missing',
          }),
        );
        return;
      }
      if (!vm.managedIdentity) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'invalid_request', error_description: 'Identity not found' }));
        return;
      }
      const expiresOn = Math.floor(Date.now() / 1000) + 3600;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          access_token: vm.managedIdentity.token,
          expires_on: String(expiresOn),
          resource: url.searchParams.get('resource'),
          token_type: 'Bearer',
        }),
      );
      return;
    }
    if (url.pathname === '/metadata/attested/document' && pki.signer) {
      serveAttestedDocument(url, res, vm, pki.signer);
      return;
    }
    if (url.pathname === '/metadata/THIM/amd/certification' && vm.thim) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ...vm.thim, tcbm: '0000000000000000' }));
      return;
    }
    if (url.pathname !== '/metadata/instance' || !url.searchParams.get('api-version')) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        compute: {
          name: vm.name,
          vmId: vm.vmId ?? DEFAULT_VM_ID,
          resourceId: vm.resourceId,
          subscriptionId: vm.subscriptionId,
          resourceGroupName: vm.resourceGroupName,
          vmScaleSetName: vm.resourceId.split('/')[8],
          osProfile: { computerName: vm.computerName, adminUsername: 'constell' },
          tags: Object.entries(vm.tags)
            .map(([k, v]) => `${k}:${v}`)
            .join(';'),
          tagsList: Object.entries(vm.tags).map(([name, value]) => ({ name, value })),
          location: 'westeurope',
        },
        network: { interface: [{ ipv4: { ipAddress: [{ privateIpAddress: vm.privateIp, publicIpAddress: '' }] } }] },
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  pki.signer = await makeImdsSigner(`${url}/pki/intermediate.crt`);
  return {
    url,
    get readyReports() {
      return readyReports;
    },
    requests,
    tokenRequests,
    stop: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The intermediate CA the signer's AIA names (served without the Metadata header, as Microsoft's PKI site is). */
function servePki(url: URL, res: http.ServerResponse): boolean {
  if (url.pathname !== '/pki/intermediate.crt') return false;
  res.writeHead(200, { 'content-type': 'application/pkix-cert' });
  res.end(Buffer.from(imdsTestIntermediateDer()));
  return true;
}

/**
 * IMDS's attested document (Azure's IMDS docs, "Attested data"): { encoding: "pkcs7", signature } for the nonce
 * asked for (IMDS puts a timestamp where none is given), 400 without an api-version.
 */
function serveAttestedDocument(url: URL, res: http.ServerResponse, vm: ImdsVm, signer: ImdsSigner): void {
  if (!url.searchParams.get('api-version')) {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: 'Bad request. api-version was not specified in the request' }));
    return;
  }
  const nonce = url.searchParams.get('nonce') ?? new Date().toISOString().replace(/\D/g, '').slice(0, 14);
  const content = attestedContent({
    nonce,
    vmId: vm.vmId ?? DEFAULT_VM_ID,
    subscriptionId: vm.subscriptionId,
  });
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ encoding: 'pkcs7', signature: signAttestedContent(content, signer) }));
}
