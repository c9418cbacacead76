/**
 * A minimal QMP client (QEMU Machine Protocol, JSON lines over the VM's unix socket): power control of a qemu node
 * (`system_reset`: a real reset, the firmware measures the image again; `quit`). One connection per command: read
 * the greeting, negotiate capabilities, run the command, close.
 */
import net from 'node:net';
import { UserError } from '../../lib/errors.js';

export class QmpError extends UserError {}

/** Runs one QMP command on the socket and resolves with its `return` value. */
export function qmpCommand(
  socketPath: string,
  command: string,
  args?: Record<string, unknown>,
  timeoutMs = 10_000,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    let buffered = '';
    let stage: 'greeting' | 'capabilities' | 'command' = 'greeting';
    const timer = setTimeout(
      () => fail(new QmpError(`QEMU did not answer ${command} on ${socketPath} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
    };
    const fail = (err: Error) => {
      done();
      reject(
        err instanceof QmpError
          ? err
          : new QmpError(`QMP ${socketPath}: ${err.message}`, { cause: err, hint: 'Is the VM running?' }),
      );
    };
    socket.on('error', fail);
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      let newline: number;
      while ((newline = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (!line) continue;
        let message: { QMP?: unknown; return?: unknown; error?: { desc?: string }; event?: string };
        try {
          message = JSON.parse(line) as typeof message;
        } catch {
          return fail(new QmpError(`QEMU sent no JSON on ${socketPath}`));
        }
        if (message.event) continue;
        if (message.error)
          return fail(
            new QmpError(
              `QEMU refused ${stage === 'command' ? command : 'qmp_capabilities'}: ${message.error.desc ?? 'error'}`,
            ),
          );
        if (stage === 'greeting' && message.QMP) {
          stage = 'capabilities';
          socket.write(`${JSON.stringify({ execute: 'qmp_capabilities' })}\n`);
        } else if (stage === 'capabilities' && 'return' in message) {
          stage = 'command';
          socket.write(`${JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}) })}\n`);
        } else if (stage === 'command' && 'return' in message) {
          done();
          resolve(message.return);
        }
      }
    });
    socket.on('close', () => fail(new QmpError(`QEMU closed ${socketPath} before answering ${command}`)));
  });
}
