import assert from 'node:assert/strict';
import { withPort } from '../lib/addresses.js';

describe('bootstrapper/addresses', () => {
  it('adds a port only where the endpoint has none', () => {
    assert.equal(withPort('127.0.5.1', 30090), '127.0.5.1:30090');
    assert.equal(withPort('lb.example:443', 30090), 'lb.example:443');
    assert.equal(withPort('fd00::1', 6443), '[fd00::1]:6443');
    assert.equal(withPort('[fd00::1]:8443', 6443), '[fd00::1]:8443');
  });
});
