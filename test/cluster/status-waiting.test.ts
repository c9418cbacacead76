import assert from 'node:assert/strict';
import { explainWaiting, type NodeStatusEntry } from '../../cli/cluster/status.js';

const node = (name: string, role: string, state: NodeStatusEntry['state'], reason?: string): NodeStatusEntry => ({
  name,
  role,
  address: '10.0.0.1',
  state,
  ...(reason ? { reason } : {}),
});
const NO_QUORUM = 'The control plane has no quorum: the cluster store cannot answer (1 of 3 members healthy).';

describe('status: why a control plane waits, and what to run', () => {
  it('names the control planes that are down and the command that starts them (local provider)', () => {
    const nodes = [
      node('control-plane-0', 'control-plane', 'waiting', NO_QUORUM),
      node('control-plane-1', 'control-plane', 'stopped'),
      node('control-plane-2', 'control-plane', 'stopped'),
      node('worker-0', 'worker', 'joined'),
    ];
    assert.equal(
      explainWaiting(nodes, 'local')[0]!.reason,
      'The control plane has no quorum: the cluster store cannot answer (1 of 3 members healthy); it waits for a majority of the control planes (2 of 3; 1 run, control-plane-1, control-plane-2 are down); run `constellation mini start control-plane-1 control-plane-2`; `constellation recover` if every control plane rebooted',
    );
  });

  it('on a cloud, says to start the down nodes in its console', () => {
    const nodes = [
      node('cp-0', 'control-plane', 'waiting', NO_QUORUM),
      node('cp-1', 'control-plane', 'unreachable'),
      node('cp-2', 'control-plane', 'joined'),
    ];
    assert.match(
      explainWaiting(nodes, 'aws')[0]!.reason!,
      /\(2 of 3; 2 run, cp-1 is down\); start cp-1 in the cloud's console; `constellation recover`/,
    );
  });

  it('leaves every other node as the node reported it', () => {
    const nodes = [
      node('cp-0', 'control-plane', 'waiting', 'not initialized yet'),
      node('w-0', 'worker', 'refused', 'PCR 4 mismatch'),
      node('cp-1', 'control-plane', 'joined'),
    ];
    assert.deepEqual(explainWaiting(nodes, 'local'), nodes);
  });
});
