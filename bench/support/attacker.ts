/**
 * The attacker of the admission bench as its own OS process (a real attacker is another machine: its HTTP/2
 * client work must not run on the server's event loop). attack() opens the half-open Init streams and resolves
 * once they are all sent; stop() cancels them and says how they ended. Messages travel on the fork IPC channel.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export type AttackRequest = { type: 'attack'; port: number; streams: number } | { type: 'stop' };
export type AttackerMessage =
  { type: 'ready' } | { type: 'opened' } | { type: 'stopped'; endings: Array<[string, number]> };

export interface Attacker {
  attack(port: number, streams: number): Promise<void>;
  stop(): Promise<Map<string, number>>;
  close(): Promise<void>;
}

const ENTRY = fileURLToPath(new URL('./attacker-process.ts', import.meta.url));

export async function startAttacker(): Promise<Attacker> {
  const child = fork(ENTRY, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await next(child, 'ready');
  return {
    async attack(port, streams) {
      const opened = next(child, 'opened');
      child.send({ type: 'attack', port, streams } satisfies AttackRequest);
      await opened;
    },
    async stop() {
      const stopped = next(child, 'stopped');
      child.send({ type: 'stop' } satisfies AttackRequest);
      return new Map(((await stopped) as Extract<AttackerMessage, { type: 'stopped' }>).endings);
    },
    async close() {
      if (child.connected) child.disconnect();
      const kill = setTimeout(() => child.kill(), 5_000);
      await exited;
      clearTimeout(kill);
    },
  };
}

function next(child: ChildProcess, type: AttackerMessage['type']): Promise<AttackerMessage> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: AttackerMessage) => {
      if (message.type !== type) return;
      cleanup();
      resolve(message);
    };
    const onExit = () => {
      cleanup();
      reject(new Error(`the attacker process exited before its ${type} message`));
    };
    const cleanup = () => {
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}
