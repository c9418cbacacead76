/**
 * The quorum checks etcd's strict reconfiguration mode would make, which our members run without (so a control plane
 * that joins right after another need not wait 5 s): a learner is promoted only when the started voters and it form a
 * quorum of the grown cluster; a voter is removed only when the healthy voters left form a quorum of the smaller one.
 */
import assert from 'node:assert/strict';
import {
  promotionRefusal,
  removalRefusal,
  type EtcdMember,
  type MemberHealth,
  type StoreHealth,
} from '../../lib/cluster-store/etcd-members.js';

const member = (name: string, options: Partial<EtcdMember> = {}): EtcdMember => ({
  id: `id-${name || 'unstarted'}`,
  name,
  peerUrls: [`https://${name}:2380`],
  clientUrls: name ? [`https://${name}:2379`] : [],
  isLearner: false,
  ...options,
});

function health(members: Array<[string, { healthy: boolean; isLearner?: boolean }]>): StoreHealth {
  const all: MemberHealth[] = members.map(([name, h]) => ({
    ...member(name, { isLearner: h.isLearner ?? false }),
    healthy: h.healthy,
    leader: false,
  }));
  const voters = all.filter((m) => !m.isLearner);
  const healthyVoters = voters.filter((m) => m.healthy).length;
  return { members: all, voters: voters.length, healthyVoters, quorum: healthyVoters > voters.length / 2 };
}

describe('cluster store membership: quorum checks', () => {
  describe('promoting a learner', () => {
    it('is allowed when every voter has started', () => {
      assert.equal(promotionRefusal([member('cp-0'), member('learner', { isLearner: true })]), undefined);
      assert.equal(
        promotionRefusal([member('cp-0'), member('cp-1'), member('learner', { isLearner: true })]),
        undefined,
      );
    });

    it('is allowed when the started voters and the learner are a quorum of the grown cluster', () => {
      // 3 voters, one never started: 2 + the learner = 3 of 4.
      assert.equal(
        promotionRefusal([member('cp-0'), member('cp-1'), member(''), member('learner', { isLearner: true })]),
        undefined,
      );
    });

    it('is refused when they are not, naming how many voters have started', () => {
      // 2 voters, one never started: 1 + the learner = 2 of 3 is a quorum; 3 voters with 2 unstarted: 2 of 4 is not.
      assert.equal(promotionRefusal([member('cp-0'), member(''), member('learner', { isLearner: true })]), undefined);
      assert.equal(
        promotionRefusal([
          member('cp-0'),
          member('', { id: 'a' }),
          member('', { id: 'b' }),
          member('learner', { isLearner: true }),
        ]),
        'only 1 of 3 voting members have started',
      );
    });
  });

  describe('removing a member', () => {
    it('is allowed when the healthy voters left are a quorum', () => {
      assert.equal(
        removalRefusal(
          health([
            ['cp-0', { healthy: true }],
            ['cp-1', { healthy: true }],
            ['cp-2', { healthy: true }],
            ['cp-3', { healthy: true }],
          ]),
          'cp-0',
        ),
        undefined,
      );
      // Removing a member that is down leaves the healthy ones as they were.
      assert.equal(
        removalRefusal(
          health([
            ['cp-0', { healthy: false }],
            ['cp-1', { healthy: true }],
            ['cp-2', { healthy: true }],
          ]),
          'cp-0',
        ),
        undefined,
      );
    });

    it('is refused when they are not, naming the members that are down', () => {
      assert.equal(
        removalRefusal(
          health([
            ['cp-0', { healthy: true }],
            ['cp-1', { healthy: false }],
            ['cp-2', { healthy: true }],
          ]),
          'cp-0',
        ),
        'removing cp-0 would leave 1 healthy of 2 voting members: no quorum (down: cp-1)',
      );
    });

    it('always allows a learner or a name that is no member', () => {
      const h = health([
        ['cp-0', { healthy: true }],
        ['cp-1', { healthy: false }],
        ['new', { healthy: false, isLearner: true }],
      ]);
      assert.equal(removalRefusal(h, 'new'), undefined);
      assert.equal(removalRefusal(h, 'gone'), undefined);
    });
  });
});
