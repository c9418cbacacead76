#!/usr/bin/env node
// Renders manifests/cloud-controller-manager/{aws,azure,gcp}.yaml, the cloud controller managers the kubeadm
// backend installs on cloud nodes (bootstrapper/kubernetes/cloud-controller.ts), from upstream Constellation's charts
// `ccm` and `cnm` (edgelesssys/constellation@7cb5b83, internal/constellation/helm/charts/edgeless/constellation-services/charts).
// Not run by the build or the tests: the rendered manifests are committed. No helm is needed: the charts use only
// `if eq .Values.csp "<cloud>"`, `.Release.Namespace` and plain values, which this script substitutes (it refuses any
// other template expression). Values become placeholders the bootstrapper replaces at install time.
//   node scripts/render-cloud-controllers.mjs <charts directory holding ccm/ and cnm/>
// Changes to upstream's output, each applied on the parsed objects below and named in the file's header:
//   gcp   the CCM authenticates as the VM's service account through the metadata server (the nodes run as the
//         config's IAMServiceAccountVM), so no service-account key goes into the cluster: the gcekey Secret, its
//         volume and GOOGLE_APPLICATION_CREDENTIALS are gone, and gce.conf has no `token-url = nil`; node-tags
//         is the network tag our GCP provider gives the nodes (providers/gcp/plan.ts); the
//         upgrade-agent socket (a hostPath of type Socket, which no node of ours has) is not mounted; the
//         controllers are cloud-node and cloud-node-lifecycle: kubeadm's controller manager allocates the pod
//         CIDRs (Cilium's IPAM mode kubernetes), and services and routes are not provided.
import { Buffer } from 'node:buffer';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import process from 'node:process';
import { parseAllDocuments, stringify } from 'yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, '..', 'manifests', 'cloud-controller-manager');
const charts = process.argv[2];
if (!charts) {
  console.error('usage: node scripts/render-cloud-controllers.mjs <charts directory holding ccm/ and cnm/>');
  process.exit(2);
}

// The placeholders bootstrapper/kubernetes/cloud-controller.ts replaces (reserved .invalid names).
const values = {
  image: 'constellation-ccm-image.invalid',
  cnmImage: 'constellation-cnm-image.invalid',
  azureConfig: 'constellation-azure-config.invalid',
  projectID: 'constellation-gcp-project.invalid',
  uid: 'constellation-gcp-uid.invalid',
  nodeTag: 'constellation-gcp-node-tag.invalid',
  subnetworkPodCIDR: 'constellation-gcp-pod-cidr.invalid',
  secretData: 'constellation-gcp-key.invalid',
};
const clouds = { aws: 'AWS', azure: 'Azure', gcp: 'GCP' };

function render(text, csp, image) {
  let t = text.replace(
    /\{\{-? if eq \.Values\.csp "(\w+)" -?\}\}\n?([\s\S]*?)\{\{-? end -?\}\}\n?/g,
    (_, want, body) => (want === csp ? body : ''),
  );
  const b64 = (s) => Buffer.from(s).toString('base64');
  t = t
    .replace(/\{\{ ?\.Release\.Namespace ?\}\}/g, 'kube-system')
    .replace(/\{\{ \.Values\.image \| quote \}\}/g, JSON.stringify(image))
    .replace(/\{\{ \.Values\.Azure\.azureConfig \| b64enc \}\}/g, b64(values.azureConfig))
    .replace(/\{\{ \.Values\.GCP\.secretData \| b64enc \}\}/g, b64(values.secretData))
    .replace(/\{\{ ?\.Values\.GCP\.(\w+) ?\}\}/g, (_, key) => values[key]);
  if (t.includes('{{'))
    throw new Error(`an unknown template expression is left: ${t.slice(t.indexOf('{{'), t.indexOf('{{') + 60)}`);
  return t;
}

async function templates(chart) {
  const dir = path.join(charts, chart, 'templates');
  return (await fs.readdir(dir))
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => path.join(dir, f));
}

function gcpChanges(objects) {
  const kept = objects.filter((o) => !(o.kind === 'Secret' && o.metadata.name === 'gcekey'));
  for (const o of kept) {
    if (o.kind === 'ConfigMap' && o.metadata.name === 'gceconf') {
      o.data['gce.conf'] = o.data['gce.conf']
        .split('\n')
        .filter((line) => !line.startsWith('token-url'))
        .map((line) => (line.startsWith('node-tags = ') ? `node-tags = ${values.nodeTag}` : line))
        .join('\n');
    }
    if (o.kind === 'DaemonSet') {
      const spec = o.spec.template.spec;
      const dropped = new Set(['upgrade-agent-socket', 'gcekey']);
      spec.volumes = spec.volumes.filter((v) => !dropped.has(v.name));
      for (const c of spec.containers) {
        c.volumeMounts = c.volumeMounts.filter((m) => !dropped.has(m.name));
        delete c.env;
        c.command = c.command
          .filter((a) => !a.startsWith('--cluster-cidr=') && !a.startsWith('--cidr-allocator-type='))
          .map((a) =>
            a.startsWith('--controllers=')
              ? '--controllers=cloud-node,cloud-node-lifecycle'
              : a === '--allocate-node-cidrs=true'
                ? '--allocate-node-cidrs=false'
                : a,
          );
      }
    }
  }
  return kept;
}

const CHANGES = {
  aws: [],
  azure: [
    'the cloud-node-manager DaemonSet of the chart cnm added (the CCM runs without its cloud-node controller, as upstream)',
  ],
  gcp: [
    "authenticates as the VM's service account (metadata server): no gcekey Secret, volume or GOOGLE_APPLICATION_CREDENTIALS, no token-url in gce.conf",
    "node-tags is our provider's network tag of the nodes (providers/gcp/plan.ts), not constellation-<uid>",
    'no upgrade-agent socket mount',
    'controllers cloud-node,cloud-node-lifecycle, --allocate-node-cidrs=false, no --cluster-cidr/--cidr-allocator-type (kubeadm allocates pod CIDRs)',
  ],
};

await fs.mkdir(out, { recursive: true });
for (const [cloud, csp] of Object.entries(clouds)) {
  const files = [...(await templates('ccm')), ...(cloud === 'azure' ? await templates('cnm') : [])];
  let objects = [];
  for (const file of files) {
    const image = file.includes(`${path.sep}cnm${path.sep}`) ? values.cnmImage : values.image;
    const text = render(await fs.readFile(file, 'utf8'), csp, image);
    for (const doc of parseAllDocuments(text)) {
      const o = doc.toJS();
      if (o)
        objects.push({
          source: `${path.basename(path.dirname(path.dirname(file)))}/templates/${path.basename(file)}`,
          object: o,
        });
    }
  }
  if (cloud === 'gcp') {
    const kept = new Set(gcpChanges(objects.map((o) => o.object)));
    objects = objects.filter((o) => kept.has(o.object));
  }
  const header = [
    `# Rendered by scripts/render-cloud-controllers.mjs from upstream Constellation's charts ccm${cloud === 'azure' ? ' and cnm' : ''}`,
    '# (edgelesssys/constellation@7cb5b83 internal/constellation/helm/charts/edgeless/constellation-services/charts) for',
    `# csp ${csp}. Do not edit: change the script and render again. The placeholders (*.invalid) are replaced`,
    '# by bootstrapper/kubernetes/cloud-controller.ts; the images are pinned there, per Kubernetes minor version',
    "# (1.33 runs 1.32's: the CCMs' 1.33 digests were not established, see there).",
    ...(CHANGES[cloud].length ? ['# Changes to upstream:', ...CHANGES[cloud].map((c) => `#   ${c}`)] : []),
  ];
  const body = objects.map((o) => `---\n# Source: ${o.source}\n${stringify(o.object)}`).join('');
  await fs.writeFile(path.join(out, `${cloud}.yaml`), `${header.join('\n')}\n${body}`);
  console.log(`wrote ${path.join(out, `${cloud}.yaml`)} (${objects.length} objects)`);
}
