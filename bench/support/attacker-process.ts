/**
 * Entry of the attacker process (see attacker.ts): on "attack", opens `streams` Init streams from 127.0.0.2 to the
 * init server at 127.0.0.1:`port`, each sending one Challenge and then nothing; on "stop", reports how the
 * streams ended so far and cancels the rest. Exits when the parent goes away.
 */
import { randomBytes } from 'node:crypto';
import { InitRequest } from '../../proto/gen/constellation/init.js';
import { openRawSession, type RawCall, type RawSession } from '../../test/atls/support/raw-grpc.js';
import type { AttackRequest, AttackerMessage } from './attacker.js';

const INIT_PATH = '/constellation.init.v1.Init/Init';
const SESSIONS = 10;

let sessions: RawSession[] = [];
let calls: RawCall[] = [];
let endings = new Map<string, number>();
let stopped = false;

async function attack(port: number, streams: number): Promise<void> {
  sessions = await Promise.all(Array.from({ length: SESSIONS }, () => openRawSession('127.0.0.1', port, '127.0.0.2')));
  calls = [];
  endings = new Map();
  stopped = false;
  for (let i = 0; i < streams; i++) {
    const call = sessions[i % SESSIONS].call(INIT_PATH);
    call.send(
      InitRequest.encode({
        kind: { $case: 'challenge', value: { nonce: randomBytes(32), verifierPublicKey: Buffer.alloc(0) } },
      }).finish(),
    );
    void call.status.then((status) => {
      if (stopped) return;
      const name =
        status.code === 8
          ? 'refused (RESOURCE_EXHAUSTED)'
          : status.code === 4
            ? 'closed idle (DEADLINE_EXCEEDED)'
            : `ended with status ${status.code}`;
      endings.set(name, (endings.get(name) ?? 0) + 1);
    });
    calls.push(call);
  }
}

function stop(): Array<[string, number]> {
  stopped = true;
  const finished = [...endings.values()].reduce((a, b) => a + b, 0);
  const out: Array<[string, number]> = [...endings, ['held open until the attacker left', calls.length - finished]];
  for (const call of calls) call.cancel();
  for (const session of sessions) session.close();
  return out;
}

process.on('message', (message: AttackRequest) => {
  if (message.type === 'attack')
    void attack(message.port, message.streams).then(() => process.send!({ type: 'opened' } satisfies AttackerMessage));
  if (message.type === 'stop') process.send!({ type: 'stopped', endings: stop() } satisfies AttackerMessage);
});
process.on('disconnect', () => process.exit(0));
process.send!({ type: 'ready' } satisfies AttackerMessage);
