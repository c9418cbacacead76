/**
 * Telling Azure that the VM booted, without the Azure guest agent (the scale sets set provisionVMAgent false, as
 * upstream's): Azure keeps a VM Creating until its guest reports Ready to the wire server, and gives up with
 * OSProvisioningTimedOut after about 20 minutes. Upstream's node image reports from its initrd; our node program
 * reports when it starts (its first question to the platform, identity()).
 *
 *   GET  http://168.63.129.16/machine/?comp=goalstate   (x-ms-version: 2012-11-30) → Incarnation, ContainerId, InstanceId
 *   POST http://168.63.129.16/machine/?comp=health      <Health> … <State>Ready</State> … </Health>
 *
 * Reference: https://learn.microsoft.com/azure/virtual-machines/linux/no-agent (the health report a guest without
 * the agent sends). The endpoint is configurable (providerOptions.wireServerEndpoint) so that a test serves it.
 */
import { UserError } from '../../lib/errors.js';

export const WIRE_SERVER_ENDPOINT = 'http://168.63.129.16';
const HEADERS = { 'x-ms-version': '2012-11-30', 'x-ms-agent-name': 'constellation' };

function element(xml: string, name: string): string | undefined {
  return new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1]?.trim();
}

/** Reports Ready for this VM's current goal state; retried a few times (the wire server may answer late at boot). */
export async function reportReady(
  endpoint = WIRE_SERVER_ENDPOINT,
  options: { attempts?: number; delayMs?: number } = {},
): Promise<void> {
  const base = endpoint.replace(/\/$/, '');
  const attempts = options.attempts ?? 10;
  for (let attempt = 1; ; attempt++) {
    try {
      const goal = await fetch(`${base}/machine/?comp=goalstate`, {
        headers: HEADERS,
        signal: AbortSignal.timeout(10_000),
      });
      const xml = await goal.text();
      if (!goal.ok) throw new Error(`goal state: ${goal.status} ${xml.slice(0, 200)}`);
      const incarnation = element(xml, 'Incarnation');
      const containerId = element(xml, 'ContainerId');
      const instanceId = element(xml, 'InstanceId');
      if (!incarnation || !containerId || !instanceId)
        throw new Error('the goal state names no incarnation, container or instance');
      const body =
        '<?xml version="1.0" encoding="utf-8"?>' +
        '<Health xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema">' +
        `<GoalStateIncarnation>${incarnation}</GoalStateIncarnation><Container><ContainerId>${containerId}</ContainerId>` +
        `<RoleInstanceList><Role><InstanceId>${instanceId}</InstanceId><Health><State>Ready</State></Health></Role></RoleInstanceList></Container></Health>`;
      const health = await fetch(`${base}/machine/?comp=health`, {
        method: 'POST',
        headers: { ...HEADERS, 'content-type': 'text/xml;charset=utf-8' },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      if (!health.ok) throw new Error(`health report: ${health.status} ${(await health.text()).slice(0, 200)}`);
      return;
    } catch (err) {
      if (attempt >= attempts) {
        throw new UserError(
          `Telling Azure that this VM is ready failed (wire server ${base}): ${(err as Error).message}`,
          {
            hint: 'Azure keeps the VM Creating until it hears Ready; check that the VM reaches 168.63.129.16.',
            cause: err,
          },
        );
      }
      await new Promise((r) => setTimeout(r, options.delayMs ?? 1000));
    }
  }
}
