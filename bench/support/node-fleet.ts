/**
 * The joining side of the join-storm bench as its own OS process: real nodes are other machines, so their
 * work (making attestation documents, opening tickets, their TLS clients) must not run on the join service's
 * event loop. The fleet process (node-fleet-process.ts) makes the nodes of every storm at start (each storm
 * is new nodes: their own AKs, CSRs and disks, like new machines joining) and tells this side their AKs (to
 * register with the service's AK registry, as the local provider does); on each storm() it starts the next
 * storm's joins all at once and reports each join's latency, the storm's wall time and its own CPU time.
 * Messages travel on the fork IPC channel.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Child → parent: the nodes exist. */
export interface FleetReady {
  type: 'ready';
  nodes: Array<{ instance: string; akPublic: string /* base64 */; ip: string }>;
}

/** Parent → child: join the next storm's nodes at once to the service at `address`. */
export interface StormRequest {
  type: 'storm';
  address: string;
}

/** Child → parent: one storm's outcome (times in ms). */
export interface StormReport {
  type: 'storm';
  /** From the first join's start to the last join's end. */
  wall: number;
  /** Each node's join, start to opened ticket. */
  latencies: number[];
  /** CPU time of the fleet process during the storm. */
  cpu: number;
  /** The first join that failed, if any (the bench then stops: a storm with refusals measures nothing). */
  error?: string;
}

export type FleetMessage = FleetReady | StormReport;

export interface NodeFleet {
  /** Every storm's nodes. */
  nodes: FleetReady['nodes'];
  /** Process id of the fleet, e.g. for a profiler. */
  pid: number;
  storm(address: string): Promise<StormReport>;
  /** Ends the fleet process and waits for it to exit. */
  stop(): Promise<void>;
}

const STOP_GRACE_MS = 5_000;
const ENTRY = fileURLToPath(new URL('./node-fleet-process.ts', import.meta.url));

/** Starts a fleet process with `storms` storms of `nodesPerStorm` new nodes each, and waits until they exist. */
export async function startNodeFleet(nodesPerStorm: number, storms: number): Promise<NodeFleet> {
  // Explicit execArgv: flags of this process (e.g. --cpu-prof for the service) stay out of the fleet;
  // JOIN_STORM_NODES_CPU_PROF=<dir> profiles the fleet instead.
  const profile = process.env.JOIN_STORM_NODES_CPU_PROF;
  const execArgv = ['--import', 'tsx', ...(profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`] : [])];
  const child = fork(ENTRY, [String(nodesPerStorm), String(storms)], {
    execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const ready = await nextMessage<FleetReady>(child, 'ready');
    return {
      nodes: ready.nodes,
      pid: child.pid!,
      async storm(address) {
        const report = nextMessage<StormReport>(child, 'storm');
        child.send({ type: 'storm', address } satisfies StormRequest);
        return report;
      },
      async stop() {
        // Closing the IPC channel lets the fleet exit on its own (writing its profile, if any); a kill backs it up.
        if (child.connected) child.disconnect();
        const kill = setTimeout(() => child.kill(), STOP_GRACE_MS);
        await exited;
        clearTimeout(kill);
      },
    };
  } catch (err) {
    child.kill();
    await exited;
    throw err;
  }
}

function nextMessage<T extends FleetMessage>(child: ChildProcess, type: T['type']): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onMessage = (message: FleetMessage) => {
      if (message.type !== type) return;
      cleanup();
      resolve(message as T);
    };
    const onExit = (code: number | null, signal: string | null) => {
      cleanup();
      reject(new Error(`the node fleet process exited (${signal ?? `code ${code}`}) before its ${type} message`));
    };
    const cleanup = () => {
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}
