/**
 * Cloud-in-a-box scenarios that run at the same time, each reported by its own `it` (docs/cloud-in-a-box.md: one
 * after another they took about 5.5 minutes of the suite). Every scenario has its own fake, its own box and its own
 * loopback addresses (two octets apart: `127.<octet>` for instances, `127.<octet + 1>` for public addresses), so
 * nothing is shared but the machine.
 *
 * Scenarios of one lane (one cloud) run one after another; the lanes run together. More at once would not finish
 * sooner (the clusters need the CPU: two cores here), and the test process, which hosts every fake, load balancer and
 * probe, would answer a node's metadata request too late for it when two dozen nodes boot at once.
 *
 *   start()        (in a `before`) begins every lane; each scenario's outcome is kept, not thrown, so a failure waits
 *                  for the `it` that reports it
 *   outcome(name)  (in that `it`) awaits the scenario and fails with its error, or returns the lines it logged
 *   closeAll()     (in an `after`) waits for every lane to end (bounded: one that hangs is closed under its feet) and
 *                  closes what is still open
 *
 * What a scenario made is closed as soon as it ends, passed or failed, in order: its cluster's follower, the box's
 * nodes and swtpms (by PID) and load balancer, its fake, its temporary folder. So a failed cloud stops using the CPU
 * the others need, and leaves nothing behind.
 */
import { randomInt } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BoxCluster } from './aws-scenarios.js';
import { CloudBox } from './box.js';
import type { BoxCloud } from './clouds.js';

/** What one scenario runs in: its folder, its box, its addresses; what it made is closed when it ends. */
export interface ScenarioFixture {
  root: string;
  workspace: string;
  box: CloudBox;
  /** Second octet of this scenario's loopback addresses (127.<octet>, 127.<octet + 1>). */
  octet: number;
  /** Closes the cluster's follower before the box, and its cloud's fake after it. */
  track<C extends BoxCluster>(cluster: C): C;
  /** Closes the cloud's fake after the box. */
  trackCloud<C extends BoxCloud>(cloud: C): C;
  /** A line for the report (printed by the scenario's `it`, not in the middle of another test's output). */
  log(line: string): void;
}

type Outcome = { ok: true; lines: string[] } | { ok: false; error: unknown };

interface Entry {
  name: string;
  lane: string;
  run: (fixture: ScenarioFixture) => Promise<void>;
  fixture?: ScenarioFixture;
  clusters: BoxCluster[];
  clouds: BoxCloud[];
  lines: string[];
  outcome?: Promise<Outcome>;
}

/** How long closeAll waits for a lane still running (an `it` timed out) before closing it anyway. */
const SETTLE_MS = 30_000;

export class ConcurrentScenarios {
  private readonly entries = new Map<string, Entry>();
  private lanes: Promise<void>[] = [];

  /** Registers a scenario (before start) in `lane`: after the lane's earlier scenarios, beside the other lanes. */
  add(lane: string, name: string, run: (fixture: ScenarioFixture) => Promise<void>): void {
    if (this.entries.has(name)) throw new Error(`scenario ${name} added twice`);
    this.entries.set(name, { name, lane, run, clusters: [], clouds: [], lines: [] });
  }

  /** Begins every lane; each scenario gets its own pair of octets. */
  start(): void {
    const entries = [...this.entries.values()];
    const base = randomInt(20, 250 - 2 * entries.length);
    const settled = new Map<string, Promise<unknown>>();
    entries.forEach((entry, i) => {
      const previous = settled.get(entry.lane) ?? Promise.resolve();
      entry.outcome = previous.then(() => this.runEntry(entry, base + 2 * i));
      settled.set(entry.lane, entry.outcome);
    });
    this.lanes = [...settled.values()].map((p) => p.then(() => undefined));
  }

  private async runEntry(entry: Entry, octet: number): Promise<Outcome> {
    let outcome: Outcome;
    try {
      const root = await fs.mkdtemp(path.join(os.tmpdir(), `box-${entry.name.replace(/\W+/g, '-')}-`));
      entry.fixture = {
        root,
        workspace: path.join(root, 'workspace'),
        box: new CloudBox(path.join(root, 'vms')),
        octet,
        track(cluster) {
          entry.clusters.push(cluster);
          if (!entry.clouds.includes(cluster.cloud)) entry.clouds.push(cluster.cloud);
          return cluster;
        },
        trackCloud(cloud) {
          if (!entry.clouds.includes(cloud)) entry.clouds.push(cloud);
          return cloud;
        },
        log: (line) => entry.lines.push(line),
      };
      await entry.run(entry.fixture);
      outcome = { ok: true, lines: entry.lines };
    } catch (error) {
      outcome = { ok: false, error };
    }
    try {
      await closeEntry(entry);
    } catch (error) {
      if (outcome.ok) outcome = { ok: false, error };
    }
    return outcome;
  }

  /** The scenario's outcome: the lines it logged, or its error. */
  async outcome(name: string): Promise<string[]> {
    const entry = this.entries.get(name);
    if (!entry?.outcome) throw new Error(`scenario ${name} was not started`);
    const outcome = await entry.outcome;
    if (!outcome.ok) throw outcome.error;
    return outcome.lines;
  }

  /** Waits (bounded) for every lane, then closes whatever a scenario still running left open. */
  async closeAll(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, SETTLE_MS)));
    await Promise.race([Promise.all(this.lanes), deadline]);
    clearTimeout(timer);
    const results = await Promise.allSettled([...this.entries.values()].map((entry) => closeEntry(entry)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}

/** Closes what the scenario made and has not closed yet; every close is attempted, errors joined. */
async function closeEntry(entry: Entry): Promise<void> {
  const errors: unknown[] = [];
  const attempt = async (fn: () => Promise<unknown> | undefined) => {
    try {
      await fn();
    } catch (err) {
      errors.push(err);
    }
  };
  for (const cluster of entry.clusters.splice(0)) await attempt(() => cluster.close());
  await attempt(() => entry.fixture?.box.close());
  for (const cloud of entry.clouds.splice(0)) await attempt(() => cloud.close());
  if (entry.fixture) await attempt(() => fs.rm(entry.fixture!.root, { recursive: true, force: true }));
  if (errors.length) throw new Error(`closing scenario ${entry.name}: ${errors.map(String).join('; ')}`);
}
