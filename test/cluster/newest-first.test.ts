import assert from 'node:assert/strict';
import { newestFirst } from '../../cli/cluster/newest-first.js';
import type { Instance } from '../../providers/contract.js';

const node = (name: string, createdAt?: string): Instance => ({ id: `id-${name}`, name, role: 'control-plane', nodeGroup: 'cp', privateIp: '10.0.0.1', state: 'running', ...(createdAt ? { createdAt } : {}) });

describe('apply: which nodes a scale-in removes', () => {
  it('takes the newest by the creation time the provider reports, whatever the names say', () => {
    const cloud = [node('cp-zz', '2026-01-01T00:00:00Z'), node('cp-aa', '2026-03-01T00:00:00Z'), node('cp-mm', '2026-02-01T00:00:00Z')];
    assert.deepEqual(newestFirst(cloud).map((n) => n.name), ['cp-aa', 'cp-mm', 'cp-zz']);
  });

  it('falls back to the number in the name only when some node has no creation time (local records of earlier versions)', () => {
    const local = [node('control-plane-2'), node('control-plane-10', '2026-01-01T00:00:00Z'), node('control-plane-0')];
    assert.deepEqual(newestFirst(local).map((n) => n.name), ['control-plane-10', 'control-plane-2', 'control-plane-0']);
  });
});
