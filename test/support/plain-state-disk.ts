/**
 * A hand-written StateDisk for unit tests: a plain folder (no encryption, no mount) that remembers a hash of its key
 * and refuses another, as a real disk would. Integration tests use the real gocryptfs disk.
 */
import { createHash, randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { StateDiskError, type StateDisk } from '../../bootstrapper/state-disk.js';

export class PlainStateDisk implements StateDisk {
  readonly uuid = randomUUID();
  readonly mountPoint: string;
  private keyHash: string | undefined;
  private open = false;
  /** How often format() ran (a disk is formatted at most once). */
  formats = 0;

  constructor(dir: string) {
    this.mountPoint = dir;
  }

  async isFormatted(): Promise<boolean> {
    return this.keyHash !== undefined;
  }

  async format(key: Uint8Array): Promise<void> {
    if (this.keyHash) throw new StateDiskError('formatted already');
    this.formats++;
    this.keyHash = hash(key);
    await fs.mkdir(this.mountPoint, { recursive: true });
    this.open = true;
  }

  async unlock(key: Uint8Array): Promise<void> {
    if (!this.keyHash) throw new StateDiskError('not formatted');
    if (hash(key) !== this.keyHash)
      throw new StateDiskError(`The key does not unlock the state disk ${this.uuid}; nothing was changed.`);
    this.open = true;
  }

  async readFile(name: string): Promise<Uint8Array | undefined> {
    this.checkOpen();
    return fs.readFile(path.join(this.mountPoint, name)).then(
      (b) => new Uint8Array(b),
      () => undefined,
    );
  }

  async writeFile(name: string, data: Uint8Array): Promise<void> {
    this.checkOpen();
    await fs.mkdir(path.dirname(path.join(this.mountPoint, name)), { recursive: true });
    await fs.writeFile(path.join(this.mountPoint, name), data);
  }

  async close(): Promise<void> {
    this.open = false;
  }

  private checkOpen(): void {
    if (!this.open) throw new StateDiskError(`The state disk ${this.uuid} is locked; unlock it first.`);
  }
}

const hash = (key: Uint8Array) => createHash('sha256').update(key).digest('hex');
