/**
 * What `constellation create` is about to make, shown before it starts (as upstream's create does), so that a
 * person can stop before a cloud bills anything: the provider and where, each node group (count, instance type,
 * zone, state disk), the image, the attestation variant and the Kubernetes version. No prices: this CLI has no
 * source for them that it could keep current, so it names none (docs/workflows/create-init.md).
 */
import type { Config } from '../../lib/config/schema.js';
import { attestationVariantOf, providerOf } from '../../lib/config/index.js';

export function describeCreatePlan(config: Config): string[] {
  const provider = providerOf(config);
  const section = (config.provider as Record<string, Record<string, unknown> | undefined>)[provider] ?? {};
  const where =
    provider === 'local' ? 'on this machine' : `in ${String(section.region ?? section.location ?? '')}`.trimEnd();
  const lines = [`The ${provider} provider will create cluster ${config.name} ${where}:`];
  for (const [name, g] of Object.entries(config.nodeGroups)) {
    const nodes = `${g.initialCount} ${g.role} node${g.initialCount === 1 ? '' : 's'}`;
    const zone = g.zone && provider !== 'local' ? ` in ${g.zone}` : '';
    lines.push(
      `  ${name}: ${nodes} of type ${g.instanceType}${zone}, each with a ${g.stateDiskSizeGB} GB ${g.stateDiskType} state disk`,
    );
  }
  lines.push(
    provider === 'local'
      ? '  a network namespace per node, a metadata server and a load balancer on this machine'
      : '  a network, a load balancer (ports 6443, 9000, 30090, 30081, 9999) and the firewall rules for them',
  );
  lines.push(
    `Image ${config.image}, attestation variant ${attestationVariantOf(config)}, Kubernetes ${config.kubernetesVersion}.`,
  );
  return lines;
}
