import assert from 'node:assert/strict';
import { readNodeEnv } from '../../../providers/local/node-env.js';
import { UserError } from '../../../lib/errors.js';

const ENV = {
  NODE_NAME: 'worker-0',
  NODE_IP: '127.0.5.100',
  NODE_ROLE: 'worker',
  METADATA_URL: 'http://127.0.5.1:8080',
  TPM_SOCKET: '/tmp/n/tpm/swtpm.sock',
  STATE_DISK: '/tmp/n/state-disk',
  STATE_DIR: '/tmp/n/state',
  NODE_DIR: '/tmp/n',
};

describe('providers/local/node-env', () => {
  it('reads the launcher environment, with defaults for provider and backend', () => {
    assert.deepEqual(readNodeEnv(ENV), {
      name: 'worker-0',
      ip: '127.0.5.100',
      role: 'worker',
      metadataUrl: 'http://127.0.5.1:8080',
      tpmSocket: '/tmp/n/tpm/swtpm.sock',
      stateDisk: '/tmp/n/state-disk',
      stateDir: '/tmp/n/state',
      nodeDir: '/tmp/n',
      provider: 'local',
      backend: 'none',
      imageVersion: 'local',
    });
  });

  it('names every missing or malformed variable in one UserError', () => {
    const { NODE_DIR: _dir, ...missing } = ENV;
    assert.throws(
      () => readNodeEnv({ ...missing, NODE_IP: 'not-an-ip', NODE_ROLE: 'boss' }),
      (err: Error) =>
        err instanceof UserError &&
        /NODE_IP must be an IP address/.test(err.message) &&
        /NODE_ROLE must be "control-plane" or "worker"/.test(err.message) &&
        /NODE_DIR is not set/.test(err.message),
    );
  });

  it('refuses an empty variable, a malformed node name or URL and an unknown backend, naming each', () => {
    assert.throws(
      () =>
        readNodeEnv({
          ...ENV,
          NODE_NAME: 'Worker_0',
          METADATA_URL: 'ftp://x',
          STATE_DIR: '',
          KUBERNETES_BACKEND: 'k3s',
        }),
      (err: Error) =>
        err instanceof UserError &&
        /NODE_NAME must be a node name/.test(err.message) &&
        /METADATA_URL must be an http\(s\) URL/.test(err.message) &&
        /STATE_DIR is empty; it must be the directory where the state disk is mounted/.test(err.message) &&
        /KUBERNETES_BACKEND must be "none" or "kubeadm"/.test(err.message),
    );
  });

  it('takes the backend, provider and image version the launcher sets', () => {
    const env = readNodeEnv({
      ...ENV,
      KUBERNETES_BACKEND: 'kubeadm',
      CONSTELLATION_PROVIDER: 'qemu',
      IMAGE_VERSION: 'v1',
    });
    assert.deepEqual([env.backend, env.provider, env.imageVersion], ['kubeadm', 'qemu', 'v1']);
  });
});
