import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { FileExistsError } from '../../lib/workspace/atomic-file.js';
import { STATE_FILE } from '../../lib/workspace/files.js';
import {
  emptyState,
  parseState,
  readState,
  stateToYaml,
  updateState,
  writeState,
  type State,
} from '../../lib/workspace/state.js';

const INIT_SECRET = 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';

/** A state file as Constellation v2.x writes it for GCP. */
const CONSTELLATION_STATE = `version: v1
infrastructure:
  uid: 6b1b2c3d
  clusterEndpoint: 34.1.2.3
  inClusterEndpoint: 34.1.2.3
  initSecret: ${INIT_SECRET}
  apiServerCertSANs:
    - 34.1.2.3
  name: mycluster-6b1b2c3d
  ipCidrNode: 192.168.178.0/24
  gcp:
    projectID: my-project
    ipCidrPod: 10.10.0.0/16
clusterValues:
  clusterID: 128c164378fe8767f998fbdfe4b4d6463ec5ae1b664ea5999bc27417607ae9b6
  ownerID: ""
  measurementSalt: 202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f
`;

function expectInvalid(text: string, ...patterns: RegExp[]): UserError {
  let caught: unknown;
  try {
    parseState(text, '/ws/constellation-state.yaml');
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof UserError, 'a UserError');
  for (const p of patterns) assert.match(caught.message, p);
  assert.match(caught.message, /\/ws\/constellation-state\.yaml/);
  assert.ok(!caught.message.includes(INIT_SECRET.slice(0, 12)), 'the init secret is never shown');
  return caught;
}

describe('workspace/state', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'state-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('reads a state file written by Constellation', () => {
    const state = parseState(CONSTELLATION_STATE);
    assert.equal(state.version, 'v1');
    assert.equal(state.infrastructure.initSecret, INIT_SECRET);
    assert.deepEqual(state.infrastructure.apiServerCertSANs, ['34.1.2.3']);
    assert.deepEqual(state.infrastructure.gcp, { projectID: 'my-project', ipCidrPod: '10.10.0.0/16' });
    assert.equal(state.clusterValues.ownerID, '');
  });

  it('round-trips through YAML in Constellation key order', () => {
    const state = parseState(CONSTELLATION_STATE);
    const yaml = stateToYaml(state);
    assert.deepEqual(parseState(yaml), state);
    assert.ok(yaml.indexOf('uid:') < yaml.indexOf('clusterEndpoint:'));
    assert.ok(yaml.indexOf('infrastructure:') < yaml.indexOf('clusterValues:'));
  });

  it('writes with mode 0600, reads back, and refuses to overwrite when exclusive', async () => {
    const state: State = {
      ...emptyState(),
      infrastructure: { ...emptyState().infrastructure, uid: 'abc', local: { nodes: 3 } },
    };
    await writeState(dir, state, { exclusive: true });
    assert.equal((await fs.stat(path.join(dir, STATE_FILE))).mode & 0o777, 0o600);
    assert.deepEqual(await readState(dir), state);
    await assert.rejects(writeState(dir, emptyState(), { exclusive: true }), FileExistsError);
    assert.equal((await readState(dir)).infrastructure.uid, 'abc');
  });

  it('updates the state in place', async () => {
    await writeState(dir, emptyState());
    await updateState(dir, (s) => {
      s.clusterValues.clusterID = 'ab';
    });
    assert.equal((await readState(dir)).clusterValues.clusterID, 'ab');
  });

  it('reads unquoted hex that looks like a number as written (like Go does)', () => {
    const state = parseState(
      CONSTELLATION_STATE.replace(/clusterID: .*/, 'clusterID: 1e10').replace(/ownerID: .*/, 'ownerID: 0012'),
    );
    assert.equal(state.clusterValues.clusterID, '1e10');
    assert.equal(state.clusterValues.ownerID, '0012');
    assert.match(stateToYaml(state), /clusterID: "1e10"/);
  });

  it('an empty state is valid', () => {
    assert.deepEqual(parseState(stateToYaml(emptyState())), emptyState());
  });

  it('names a missing file', async () => {
    await assert.rejects(readState(dir), /constellation-state\.yaml does not exist/);
  });

  it('names the key path and line of a value that is not hex, without the value', () => {
    const text = CONSTELLATION_STATE.replace(INIT_SECRET, `${INIT_SECRET}zz`);
    expectInvalid(text, /infrastructure\.initSecret: must be hex bytes/, /line 6/);
  });

  it('names an unknown key and its line', () => {
    expectInvalid(
      CONSTELLATION_STATE.replace('  name: mycluster', '  nmae: mycluster'),
      /infrastructure\.nmae: unknown key \(line 9\)/,
      /infrastructure\.name: missing/,
    );
  });

  it('names a missing key', () => {
    expectInvalid(
      CONSTELLATION_STATE.replace(/ {2}measurementSalt: .*\n/, ''),
      /clusterValues\.measurementSalt: missing from the section at line 14/,
    );
  });

  it('refuses another version', () => {
    expectInvalid(CONSTELLATION_STATE.replace('version: v1', 'version: v2'), /version: must be "v1" \(line 1\)/);
  });

  it('names the line of broken YAML without quoting it', () => {
    const err = expectInvalid(
      CONSTELLATION_STATE.replace('  uid: 6b1b2c3d', '  uid: [6b1b2c3d'),
      /not valid YAML \(line \d+/,
    );
    assert.ok(!err.message.includes('6b1b2c3d'));
  });

  it('refuses an empty file', () => {
    expectInvalid('', /is empty/);
  });

  it('refuses to serialise an invalid state', () => {
    const state = emptyState();
    state.infrastructure.initSecret = 'not hex';
    assert.throws(() => stateToYaml(state));
  });
});
