/**
 * A StateDisk for race tests: files in memory, and every step that touches the device (isFormatted, format, unlock)
 * answers after a real delay (setTimeout), as cryptsetup does. It counts how often the disk was opened (formatted
 * or unlocked) and refuses an unlock while another is under way or the disk is open, as `cryptsetup open` does for
 * a device that is already active: a node that opens its disk twice shows up as a failure, not as a silent no-op.
 */
import { createHash, randomUUID } from 'node:crypto';
import { StateDiskError, type StateDisk } from '../../bootstrapper/state-disk.js';

export class LatencyStateDisk implements StateDisk {
  readonly uuid: string;
  readonly mountPoint = '/nonexistent/latency-state-disk';
  private keyHash: string | undefined;
  private open = false;
  private opening = false;
  private readonly files = new Map<string, Uint8Array>();
  /** How often format() or unlock() started. */
  opens = 0;
  formats = 0;
  private readonly openingWaiters: Array<() => void> = [];

  /** `latencyMs`: how long each device step takes. `formattedWith`: a disk that was formatted before (a reboot). */
  constructor(
    private readonly latencyMs: number,
    formattedWith?: Uint8Array,
    uuid: string = randomUUID(),
  ) {
    this.uuid = uuid;
    if (formattedWith) this.keyHash = hash(formattedWith);
  }

  async isFormatted(): Promise<boolean> {
    await this.delay();
    return this.keyHash !== undefined;
  }

  async format(key: Uint8Array): Promise<void> {
    this.startOpening();
    this.formats++;
    try {
      await this.delay();
      if (this.keyHash) throw new StateDiskError(`The state disk ${this.uuid} is already formatted.`);
      this.keyHash = hash(key);
      this.open = true;
    } finally {
      this.opening = false;
    }
  }

  async unlock(key: Uint8Array): Promise<void> {
    this.startOpening();
    try {
      await this.delay();
      if (!this.keyHash) throw new StateDiskError(`The state disk ${this.uuid} is not formatted.`);
      if (hash(key) !== this.keyHash)
        throw new StateDiskError(`The key does not unlock the state disk ${this.uuid}; nothing was changed.`);
      this.open = true;
    } finally {
      this.opening = false;
    }
  }

  async readFile(name: string): Promise<Uint8Array | undefined> {
    this.checkOpen();
    return this.files.get(name);
  }

  async writeFile(name: string, data: Uint8Array): Promise<void> {
    this.checkOpen();
    this.files.set(name, new Uint8Array(data));
  }

  async close(): Promise<void> {
    this.open = false;
  }

  /** Resolves when a format or unlock starts (the device is busy from then until it answers). */
  whenOpening(): Promise<void> {
    return new Promise((resolve) => this.openingWaiters.push(resolve));
  }

  private startOpening(): void {
    this.opens++;
    for (const resolve of this.openingWaiters.splice(0)) resolve();
    if (this.opening || this.open)
      throw new StateDiskError(`The state disk ${this.uuid} is already being opened or open (device already exists).`);
    this.opening = true;
  }

  private checkOpen(): void {
    if (!this.open) throw new StateDiskError(`The state disk ${this.uuid} is locked; unlock it first.`);
  }

  private delay(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, this.latencyMs));
  }
}

const hash = (key: Uint8Array) => createHash('sha256').update(key).digest('hex');
