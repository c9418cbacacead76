/**
 * Entry of the node fleet process (see node-fleet.ts): for each of `storms` storms, `nodesPerStorm` new
 * local-vtpm nodes with software TPMs, each with its own JoinHello (disk UUID, kubelet CSR), joining over its
 * own TLS connection when the parent asks for the next storm. Exits when the parent goes away.
 */
import { randomUUID } from 'node:crypto';
import { hello, kubeletCsr, requestTicket } from '../../test/joinservice/support/join-client.js';
import { imagePcrs, SoftwareVtpm } from '../../test/joinservice/support/software-vtpm.js';
import type { JoinHello } from '../../proto/gen/constellation/join.js';
import type { FleetReady, StormReport, StormRequest } from './node-fleet.js';

const [nodesPerStorm, storms] = process.argv.slice(2).map(Number);
const pcrs = imagePcrs();
const stormNodes: Array<Array<{ vtpm: SoftwareVtpm; hello: JoinHello; ip: string }>> = [];
for (let s = 0; s < storms; s++) {
  stormNodes.push(
    await Promise.all(
      Array.from({ length: nodesPerStorm }, async (_, i) => {
        const name = `storm-${s}-node-${i}`;
        const ip = `10.${s}.${(i + 1) >> 8}.${(i + 1) & 0xff}`;
        return {
          vtpm: new SoftwareVtpm(name, pcrs),
          hello: hello({ nodeName: name, diskUuid: randomUUID(), certificateRequest: await kubeletCsr([ip]) }),
          ip,
        };
      }),
    ),
  );
}
let next = 0;

async function storm(address: string): Promise<StormReport> {
  const nodes = stormNodes[next++];
  if (!nodes)
    return { type: 'storm', wall: 0, latencies: [], cpu: 0, error: `the fleet was made for ${storms} storms` };
  const cpu = process.cpuUsage();
  const start = performance.now();
  let error: string | undefined;
  const latencies = await Promise.all(
    nodes.map(async (node) => {
      const t = performance.now();
      const attempt = await requestTicket(address, node.vtpm, node.hello, 'join');
      if (attempt.error) error ??= `${node.hello.nodeName}: ${attempt.error.message}`;
      return performance.now() - t;
    }),
  );
  const wall = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { type: 'storm', wall, latencies, cpu: (used.user + used.system) / 1000, error };
}

process.on('message', (message: StormRequest) => {
  if (message.type === 'storm') void storm(message.address).then((report) => process.send!(report));
});
process.on('disconnect', () => process.exit(0));
process.send!({
  type: 'ready',
  nodes: stormNodes
    .flat()
    .map((n) => ({ instance: n.vtpm.instance, akPublic: Buffer.from(n.vtpm.akPublic).toString('base64'), ip: n.ip })),
} satisfies FleetReady);
