/**
 * The resource journal: what a provider made, recorded as soon as
 * the cloud accepted it, so a re-run continues and `terminate` deletes exactly that.
 * FileResourceJournal keeps it in constellation-resources.json (`{"version":1,"resources":[...]}`, atomic
 * writes, mode 0600). Operations of one journal run in the order they were called, so concurrent record() calls
 * from one process never lose an entry (those that wait for their turn together share one read and one write);
 * other processes are kept out by the workspace lock. An unreadable
 * journal is never replaced: every operation fails with a message naming the file.
 * MemoryResourceJournal has the same semantics in memory, for tests.
 */
import path from 'node:path';
import { z } from 'zod';
import { UserError } from '../errors.js';
import { JsonInputError, parseJson } from '../json.js';
import { writeFileAtomic } from './atomic-file.js';
import { readRegularFile, SIZE_LIMITS } from './regular-file.js';
import { RESOURCES_FILE } from './files.js';

/** A resource the provider made, recorded in the workspace as soon as the cloud accepted it. */
export interface RecordedResource {
  /** Provider-defined kind, e.g. "aws:vpc", "azure:vmss", "local:node". */
  kind: string;
  /** The provider's id, enough to delete it. */
  id: string;
  name?: string;
  /** ids of resources that must be deleted after this one (it depends on them). */
  dependsOn?: string[];
  data?: Record<string, unknown>;
}

/** Persistent record of what a provider made, so a re-run continues and terminate deletes exactly that. */
export interface ResourceJournal {
  list(): Promise<RecordedResource[]>;
  /** Records (or updates, by id) a resource. Durable when the promise resolves. */
  record(resource: RecordedResource): Promise<void>;
  /** Forgets a resource after it was deleted. */
  remove(id: string): Promise<void>;
}

const JOURNAL_VERSION = 1;

const resourceSchema = z.object({
  kind: z.string().min(1),
  id: z.string().min(1),
  name: z.string().optional(),
  dependsOn: z.array(z.string()).optional(),
  data: z.record(z.string(), z.unknown()).optional(),
});

const journalSchema = z.object({
  version: z.literal(JOURNAL_VERSION),
  resources: z.array(resourceSchema),
});

/** Adds or replaces (by id, keeping its position: the order is creation order) one resource. */
function upsert(resources: RecordedResource[], resource: RecordedResource): RecordedResource[] {
  const checked = checkResource(resource);
  const index = resources.findIndex((r) => r.id === checked.id);
  if (index === -1) return [...resources, checked];
  const next = [...resources];
  next[index] = checked;
  return next;
}

function checkResource(resource: RecordedResource): RecordedResource {
  const result = resourceSchema.safeParse(resource);
  if (!result.success) {
    // A provider bug, not a user error: say which field.
    throw new TypeError(
      `Invalid resource for the journal: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  return structuredClone(result.data);
}

/** One queued journal operation: what it does to the list (a read changes nothing) and how its caller is answered. */
interface JournalOp {
  apply(resources: RecordedResource[]): { resources: RecordedResource[]; changed: boolean; value?: unknown };
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export class FileResourceJournal implements ResourceJournal {
  readonly file: string;
  private queue: Promise<void> = Promise.resolve();
  /** The operations that wait for their turn together (none is running yet); undefined when none waits. */
  private waiting: JournalOp[] | undefined;

  constructor(workspaceDir: string) {
    this.file = path.join(workspaceDir, RESOURCES_FILE);
  }

  list(): Promise<RecordedResource[]> {
    return this.enqueue((resources) => ({ resources, changed: false, value: structuredClone(resources) }));
  }

  record(resource: RecordedResource): Promise<void> {
    return this.enqueue((resources) => ({ resources: upsert(resources, resource), changed: true }));
  }

  remove(id: string): Promise<void> {
    return this.enqueue((resources) => {
      const remaining = resources.filter((r) => r.id !== id);
      return { resources: remaining, changed: remaining.length !== resources.length };
    });
  }

  /**
   * Runs `apply` after every earlier operation of this journal. Operations that arrive while an earlier one runs
   * wait together and then share one read and one write of the file, in the order they arrived (a create that
   * starts ten nodes records each twice: one write each was twenty reads and fsynced writes in a row). Each still
   * resolves only once what it changed is on disk.
   */
  private enqueue<T>(apply: JournalOp['apply']): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const op: JournalOp = { apply, resolve: resolve as (value: unknown) => void, reject };
      if (this.waiting) {
        this.waiting.push(op);
        return;
      }
      const batch = [op];
      this.waiting = batch;
      const run = () => this.runBatch(batch);
      this.queue = this.queue.then(run, run);
    });
  }

  private async runBatch(batch: JournalOp[]): Promise<void> {
    if (this.waiting === batch) this.waiting = undefined; // operations from now on wait for the next turn
    let resources: RecordedResource[];
    try {
      resources = await this.load();
    } catch (err) {
      for (const op of batch) op.reject(err);
      return;
    }
    const done: { op: JournalOp; value: unknown; afterChange: boolean }[] = [];
    let changed = false;
    for (const op of batch) {
      try {
        const result = op.apply(resources);
        resources = result.resources;
        changed ||= result.changed;
        done.push({ op, value: result.value, afterChange: changed });
      } catch (err) {
        op.reject(err);
      }
    }
    if (changed) {
      try {
        await this.save(resources);
      } catch (err) {
        // What was not written did not happen: every operation that changed the list, or read it changed, fails.
        for (const d of done) if (d.afterChange) d.op.reject(err);
        for (const d of done) if (!d.afterChange) d.op.resolve(d.value);
        return;
      }
    }
    for (const d of done) d.op.resolve(d.value);
  }

  private async load(): Promise<RecordedResource[]> {
    let text: string;
    try {
      text = (
        await readRegularFile(this.file, { what: 'the resource journal', maxBytes: SIZE_LIMITS.resourceJournal })
      ).toString('utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    let json: unknown;
    try {
      json = parseJson(text);
    } catch (err) {
      if (!(err instanceof JsonInputError)) throw err;
      throw this.corrupt(err.message);
    }
    const result = journalSchema.safeParse(json);
    if (!result.success) {
      const issue = result.error.issues[0];
      throw this.corrupt(`is invalid at ${issue.path.join('.') || '(top level)'}: ${issue.message}`);
    }
    return result.data.resources;
  }

  private async save(resources: RecordedResource[]): Promise<void> {
    const body = { version: JOURNAL_VERSION, resources };
    await writeFileAtomic(this.file, `${JSON.stringify(body, null, 2)}\n`, {
      mode: 0o600,
      what: 'the resource journal',
    });
  }

  private corrupt(what: string): UserError {
    return new UserError(`The resource journal ${this.file} ${what}.`, {
      hint: 'It lists the cloud resources this workspace created; restore it from your backup, or repair it by hand. It is not replaced automatically so that no resource is forgotten.',
    });
  }
}

export class MemoryResourceJournal implements ResourceJournal {
  private resources: RecordedResource[];

  constructor(initial: RecordedResource[] = []) {
    this.resources = initial.reduce<RecordedResource[]>(upsert, []);
  }

  async list(): Promise<RecordedResource[]> {
    return structuredClone(this.resources);
  }

  async record(resource: RecordedResource): Promise<void> {
    this.resources = upsert(this.resources, resource);
  }

  async remove(id: string): Promise<void> {
    this.resources = this.resources.filter((r) => r.id !== id);
  }
}
