/**
 * A TPM character device for tests: a pseudo-terminal in raw mode whose other end is relayed to a swtpm socket.
 * util-linux `script` owns the pty's master side (its stdin/stdout are our pipes) and runs a shell that switches
 * the pty to raw mode (no echo, no byte translation), prints the pty's path and sleeps holding it open. A client
 * that opens that path (/dev/pts/N, a real character device) talks to the swtpm through the relay.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';

export interface PtyTpmDevice {
  path: string;
  close(): Promise<void>;
}

export async function startPtyTpmDevice(serverSocket: string): Promise<PtyTpmDevice> {
  const child = spawn('script', ['-q', '-E', 'never', '-c', 'stty raw -echo && tty && exec sleep 600', '/dev/null'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const path = await new Promise<string>((resolve, reject) => {
    let seen = '';
    const onData = (chunk: Buffer) => {
      seen += chunk.toString('latin1');
      const end = seen.search(/[\r\n]/);
      if (end < 0) return;
      child.stdout.off('data', onData);
      const rest = Buffer.from(seen.slice(end).replace(/^[\r\n]+/, ''), 'latin1');
      if (rest.length > 0) child.stdout.unshift(rest);
      resolve(seen.slice(0, end).trim());
    };
    child.stdout.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`script exited (${code}) before naming its pty`)));
  });
  const socket = net.connect(serverSocket);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  child.stdout.pipe(socket);
  socket.pipe(child.stdin);
  return {
    path,
    async close() {
      socket.destroy();
      child.kill('SIGKILL');
      await exited;
    },
  };
}
