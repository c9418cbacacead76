import assert from 'node:assert/strict';
import { describeCreatePlan } from '../../cli/cluster/create-plan.js';
import { defaultConfig } from '../../lib/config/defaults.js';

describe('create: what it will make, shown before it starts', () => {
  it('names every node group with count, type, zone and state disk, the network and what the nodes run', () => {
    const config = { ...defaultConfig('aws'), image: 'ami-0123456789abcdef0' };
    assert.deepEqual(describeCreatePlan(config), [
      'The aws provider will create cluster constell in us-east-2:',
      '  control_plane_default: 3 control-plane nodes of type m6a.xlarge in us-east-2a, each with a 30 GB gp3 state disk',
      '  worker_default: 1 worker node of type m6a.xlarge in us-east-2a, each with a 30 GB gp3 state disk',
      '  a network, a load balancer (ports 6443, 9000, 30090, 30081, 9999) and the firewall rules for them',
      `Image ami-0123456789abcdef0, attestation variant aws-sev-snp, Kubernetes ${config.kubernetesVersion}.`,
    ]);
  });

  it('says where local nodes run', () => {
    assert.equal(
      describeCreatePlan(defaultConfig('local'))[0],
      'The local provider will create cluster constell on this machine:',
    );
  });
});
