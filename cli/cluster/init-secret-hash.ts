/**
 * The bcrypt hash of the init secret that `create` hands to the nodes (docs/bootstrapper.md: a node compares the
 * secret Init sends with it). bcrypt at cost 10 is about a tenth of a second of CPU in JavaScript (bcryptjs); run on
 * the CLI's own thread it delayed everything after it in create (the nodes' start included) by that much. Here it
 * runs in a worker thread, started as soon as the secret exists, so it uses another core while the CLI measures the
 * image and writes the config and the state. The password crosses to the worker in memory only.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** The worker: bcryptjs's CommonJS build, one hash, the result (or the error's message) posted back. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const bcrypt = require(workerData.module);
bcrypt.hash(workerData.password, workerData.cost).then(
  (hash) => parentPort.postMessage({ hash }),
  (err) => parentPort.postMessage({ error: String(err && err.message ? err.message : err) }),
);
`;

/** bcrypt(password, cost) computed in a worker thread; the same as bcryptjs's hash, off this thread. */
export function bcryptHashInWorker(password: string, cost: number): Promise<string> {
  const module = createRequire(import.meta.url).resolve('bcryptjs');
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { module, password, cost } });
    let settled = false;
    worker.once('message', (m: { hash?: string; error?: string }) => {
      settled = true;
      if (m.hash !== undefined) resolve(m.hash);
      else reject(new Error(`bcrypt failed: ${m.error}`));
    });
    worker.once('error', (err) => {
      settled = true;
      reject(err);
    });
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`the bcrypt worker exited (code ${code}) without a hash`));
    });
  });
}
