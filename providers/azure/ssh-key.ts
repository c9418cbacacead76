/**
 * A throwaway SSH public key for the scale sets: Azure refuses a Linux VM without a password or an SSH key,
 * and Constellation's node images run no sshd, so the private half is generated in memory and dropped.
 * OpenSSH's "ssh-rsa" wire encoding is a few lines; no library in the dependency set writes it.
 */
import { generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';

const generate = promisify(generateKeyPair);

function sshString(data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  return Buffer.concat([length, data]);
}

/** An mpint: big-endian, with a leading zero byte when the high bit is set (so it stays positive). */
function sshMpint(base64url: string): Buffer {
  const bytes = Buffer.from(base64url, 'base64url');
  return sshString(bytes[0] & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
}

export async function throwawaySshPublicKey(): Promise<string> {
  const { publicKey } = await generate('rsa', { modulusLength: 2048 });
  const jwk = publicKey.export({ format: 'jwk' });
  const blob = Buffer.concat([sshString(Buffer.from('ssh-rsa')), sshMpint(jwk.e!), sshMpint(jwk.n!)]);
  return `ssh-rsa ${blob.toString('base64')} constellation-unused`;
}
