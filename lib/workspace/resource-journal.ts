/**
 * The resource journal: what a provider made, recorded as soon as
 * the cloud accepted it, so a re-run continues and `terminate` deletes exactly that.
 * FileResourceJournal keeps it in constellation-resources.json (`{"version":1,"resources":[...]}`, atomic
 * writes, mode 0600). Operations of one journal run one after another, so concurrent record() calls from
 * one process never lose an entry; other processes are kept out by the workspace lock. An unreadable
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

export class FileResourceJournal implements ResourceJournal {
  readonly file: string;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(workspaceDir: string) {
    this.file = path.join(workspaceDir, RESOURCES_FILE);
  }

  list(): Promise<RecordedResource[]> {
    return this.serialised(() => this.load());
  }

  record(resource: RecordedResource): Promise<void> {
    return this.serialised(async () => this.save(upsert(await this.load(), resource)));
  }

  remove(id: string): Promise<void> {
    return this.serialised(async () => {
      const resources = await this.load();
      const remaining = resources.filter((r) => r.id !== id);
      if (remaining.length !== resources.length) await this.save(remaining);
    });
  }

  /** Runs `op` after every earlier operation of this journal has finished (successfully or not). */
  private serialised<T>(op: () => Promise<T>): Promise<T> {
    const run = this.queue.then(op, op);
    this.queue = run.catch(() => undefined);
    return run;
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
