// Relays raw TPM commands between tpm2-tools' "cmd" TCTI (our stdin/stdout) and a swtpm unix socket:
// Debian 12's TSS (3.2) reaches swtpm only over TCP, and tests must not depend on free ports.
import net from 'node:net';

const socket = net.connect(process.argv[2]);
process.stdin.pipe(socket);
socket.pipe(process.stdout);
process.stdin.on('end', () => socket.end());
socket.on('close', () => process.exit(0));
socket.on('error', (err) => {
  process.stderr.write(`tcti-bridge: ${err.message}\n`);
  process.exit(1);
});
