/** A worker thread of `npm run fuzz` (scripts/fuzz.ts): lists the targets, or runs one and posts its TargetRun. */
import { parentPort, workerData } from 'node:worker_threads';
import { runTarget } from './run-target.js';
import { makeTargets } from './targets.js';

const data = workerData as { list?: boolean; name?: string; timeMs?: number; seed?: number };
const targets = await makeTargets();
if (data.list) {
  parentPort!.postMessage({ type: 'names', names: targets.map((t) => t.name) });
} else {
  const target = targets.find((t) => t.name === data.name)!;
  const run = await runTarget(target, { timeMs: data.timeMs!, seed: data.seed });
  // Close what the target opened before the parent ends this thread: ending a worker while it parses HTTP aborts Node.
  await Promise.all(targets.map((t) => t.close?.()));
  parentPort!.postMessage({ type: 'run', run });
}
