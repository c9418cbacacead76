/**
 * `upgrade apply` (docs/design.md#upgrades): brings every node to what the config asks for (image and its measurements,
 * Kubernetes version) by replacing nodes one at a time, with no downtime.
 *
 *   0. a new Kubernetes version goes to the control planes in place (./kubernetes-upgrade.ts); a control plane
 *      whose only difference was that version is not replaced; workers take it by replacement
 *   1. the new measurements, verified against the image's signed file (./trusted-measurements.ts), go to the
 *      cluster store as the current ones; the old stay accepted (previous). The journal records the intent first;
 *      a run that finds the store holding them already does not write them again
 *   2. per node, control planes first, one at a time:
 *        add a node of its group (new image) → wait until it has joined → verify it (attestation, PCR 15)
 *        → control plane: remove the old node's etcd member → remove the old node
 *   3. every node is asked what it runs: a node still on another image gets a step of its own (back to 2); the old
 *      measurements are dropped only when every node runs the new image, else the run names what it left
 *
 * Nothing here trusts the journal for what it writes or removes: measurements come from the signed file (or, on a
 * rollback, from the store's own history), and a rollback removes only a node the provider lists in that group as
 * made from the rollout's image (or, where the provider reports no image, made after the rollout started), never a
 * node another step replaces, and it stops at the first refusal of the cluster store (a quorum at risk).
 * When no rollout is needed, the store's measurements are brought to the config's verified ones if they differ.
 *
 * Every step is journaled in constellation-upgrade.json (0600) before and after it happens, so a killed run
 * continues where it stopped when run again, and no node is ever removed before its replacement joined. A
 * replacement that is refused (it fails attestation) stops the rollout naming the node and the PCR; the old node
 * stays and the cluster keeps working; `--rollback` (or the next run) removes what was added.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { Clock, Sleep } from '../../lib/clock.js';
import { pollUntil } from '../../lib/poll.js';
import { loadConfig } from '../../lib/config/index.js';
import { imageMeasurementsDigest } from '../../lib/attestation/measurements.js';
import { UserError } from '../../lib/errors.js';
import type { ValidatorDeps } from '../../lib/attestation/types.js';
import type { Logger } from '../../lib/logging/index.js';
import { writeFileAtomic } from '../../lib/workspace/atomic-file.js';
import { pathExists, UPGRADE_JOURNAL_FILE } from '../../lib/workspace/files.js';
import { readRegularFile, SIZE_LIMITS } from '../../lib/workspace/regular-file.js';
import type { Instance, InfrastructureProvider, ProviderContext, ResourceJournal } from '../../providers/contract.js';
import type { ImageSourceOptions } from '../images/image-measurements.js';
import { clusterJournalView } from '../../lib/workspace/journal-views.js';
import {
  onlyKubernetesDiffers,
  planKubernetesStep,
  upgradeControlPlanesInPlace,
  type KubernetesStep,
} from './kubernetes-upgrade.js';
import { clusterStatus, configuredSoftware, getNodeStatus, VERIFY_PORT, type SoftwareVersions } from './status.js';
import { newestFirst } from './newest-first.js';
import {
  dropPreviousMeasurements,
  removeStoreMember,
  restorePreviousMeasurements,
  setMeasurements,
  trustedMeasurements,
  withWorkspaceStore,
} from './store.js';
import { verifiedConfigMeasurements, type VerifiedMeasurements } from './trusted-measurements.js';
import { verifyCluster } from './verify.js';

export { UPGRADE_JOURNAL_FILE };

const stepSchema = z.object({
  old: z.string(),
  role: z.enum(['control-plane', 'worker']),
  group: z.string(),
  /** Set before the new node is asked for: a run killed in between adopts the node the provider made. */
  adding: z.boolean().optional(),
  new: z.string().optional(),
  done: z.boolean().optional(),
});
const journalSchema = z.object({
  version: z.literal(1),
  target: z.object({ image: z.string(), measurementsDigest: z.string(), kubernetesVersion: z.string() }),
  /** When the rollout was planned (ISO 8601): a rollback removes only nodes made after it (where no image is known). */
  startedAt: z.string().optional(),
  /** Journals of earlier versions recorded the measurements before the upgrade here; nothing reads them any more. */
  previous: z.unknown().optional(),
  /** The in-place Kubernetes upgrade of the control planes, before the measurements and the replacements. */
  kubernetes: z.object({ from: z.string(), to: z.string(), done: z.boolean() }).optional(),
  /** Set before the store write (the intent), then measurementsWritten after it. */
  measurementsWriting: z.boolean().optional(),
  measurementsWritten: z.boolean(),
  steps: z.array(stepSchema),
});
export type UpgradeJournal = z.infer<typeof journalSchema>;
type Step = UpgradeJournal['steps'][number];

export interface UpgradePlan {
  target: SoftwareVersions;
  /** The nodes to replace, in order (control planes first). */
  replace: Array<{ name: string; role: string; runs?: SoftwareVersions }>;
  /** An earlier run's journal is continued. */
  continued: boolean;
  /** Kubernetes goes to the control planes in place first. */
  kubernetes?: KubernetesStep;
}

export interface UpgradeOptions {
  workspaceDir: string;
  log: Logger;
  journal: ResourceJournal;
  provider: InfrastructureProvider;
  /** Shown the plan before anything changes; false stops with nothing changed. */
  confirm?: (plan: UpgradePlan) => Promise<boolean>;
  /** Where the image's signed measurements are found (the user's config folder, a version index). */
  imageSource?: ImageSourceOptions;
  progress?: (line: string) => void;
  rollback?: boolean;
  /** Longest wait for a replacement to join. */
  joinTimeoutMs?: number;
  /** Time for the replacement's wait (tests: a fake clock); default the system's. */
  clock?: Clock;
  sleep?: Sleep;
  /** Longest wait for every control plane to upgrade Kubernetes in place; default 10 minutes. */
  kubernetesTimeoutMs?: number;
  pollIntervalMs?: number;
  /** What the variant's validator needs to verify a replacement (default: the provider's, as `verify` finds them). */
  validatorDeps?: Partial<ValidatorDeps>;
}

export interface UpgradeResult {
  replaced: Array<{ old: string; new: string }>;
  rolledBack?: string[];
  /** Nothing to do: every node runs what the config asks for. */
  upToDate: boolean;
}

/** A replacement failed attestation (or did not join): the rollout stopped; the old node stays. */
export class UpgradeStoppedError extends UserError {}

export async function upgradeCluster(options: UpgradeOptions): Promise<UpgradeResult> {
  const { workspaceDir, log, provider } = options;
  const progress = (line: string) => {
    log.info(line);
    options.progress?.(line);
  };
  if (!provider.addInstance || !provider.removeInstance) {
    throw new UserError(
      `The ${provider.name} provider cannot add and remove single instances yet, which a rollout without downtime needs.`,
      {
        hint: 'Nothing was changed. The built-in providers (local, aws, azure, gcp) can; a third-party provider needs addInstance and removeInstance (providers/contract.ts).',
      },
    );
  }
  const journalFile = path.join(workspaceDir, UPGRADE_JOURNAL_FILE);
  const ctx: ProviderContext = {
    journal: clusterJournalView(options.journal),
    log,
    workspaceDir,
    progress: options.progress,
  };
  let journal = await readJournal(journalFile);
  if (options.rollback) return rollback(journal, journalFile, options, ctx, progress);

  const config = await loadConfig(workspaceDir);
  // Before anything else (docs/design.md#upgrades): the measurements this rollout accepts are the image's signed ones.
  const verified = await verifiedConfigMeasurements(config, {
    provider,
    workspaceDir,
    imageSource: options.imageSource,
  });
  progress(`verified ${verified.source}`);
  const target = await configuredSoftware(config, workspaceDir);
  const targetKey = {
    image: target.image,
    measurementsDigest: target.measurementsDigest,
    kubernetesVersion: target.kubernetesVersion,
  };
  if (journal && JSON.stringify(journal.target) !== JSON.stringify(targetKey)) {
    throw new UserError(
      `An upgrade to ${journal.target.image} (measurements ${journal.target.measurementsDigest}) was started and did not finish; the config now asks for something else.`,
      {
        hint: 'Finish it with the config it started with, or run `constellation upgrade apply --rollback` to undo it first.',
      },
    );
  }
  if (!journal) {
    const status = await clusterStatus({ workspaceDir, provider, journal: options.journal, log, expected: target });
    const kubernetes = await withWorkspaceStore(workspaceDir, await provider.listInstances(ctx), (store) =>
      planKubernetesStep(store, target.kubernetesVersion),
    );
    // A control plane that differs only in its Kubernetes version gets it in place; every other node is replaced.
    const outdated = status.nodes.filter(
      (n) => n.upToDate === false && !(kubernetes && n.role === 'control-plane' && onlyKubernetesDiffers(n)),
    );
    if (kubernetes)
      progress(
        `Kubernetes ${kubernetes.from} → ${kubernetes.to}: in place on the control planes first (kubeadm upgrade apply on one, kubeadm upgrade node on the others), then by replacement on the workers`,
      );
    const down = status.nodes.filter((n) => n.upToDate === undefined);
    if (outdated.length === 0 && !kubernetes) {
      if (down.length > 0)
        progress(
          `every node that answers runs what the config asks for; not checked: ${down.map((n) => `${n.name} (${n.state})`).join(', ')}`,
        );
      await reconcileStore(verified, { keepPrevious: down.length > 0 }, options, ctx, progress);
      return { replaced: [], upToDate: true };
    }
    const instances = await provider.listInstances(ctx);
    const steps: Step[] = [...outdated]
      .sort((a, b) => (a.role === b.role ? a.name.localeCompare(b.name) : a.role === 'control-plane' ? -1 : 1))
      .map((n) => ({
        old: n.name,
        role: n.role as Step['role'],
        group: instances.find((i) => i.name === n.name)!.nodeGroup,
      }));
    const plan: UpgradePlan = {
      target,
      replace: outdated.map((n) => ({ name: n.name, role: n.role, runs: n.software })),
      continued: false,
      ...(kubernetes ? { kubernetes } : {}),
    };
    plan.replace.sort((a, b) => steps.findIndex((s) => s.old === a.name) - steps.findIndex((s) => s.old === b.name));
    if (options.confirm && !(await options.confirm(plan))) return { replaced: [], upToDate: false };
    journal = {
      version: 1,
      target: targetKey,
      startedAt: new Date().toISOString(),
      ...(kubernetes ? { kubernetes: { ...kubernetes, done: false } } : {}),
      measurementsWritten: false,
      steps,
    };
    await writeJournal(journalFile, journal);
  } else {
    progress(
      `continuing the upgrade to ${journal.target.image} (measurements ${journal.target.measurementsDigest}) an earlier run started`,
    );
  }

  if (journal.kubernetes && !journal.kubernetes.done) {
    await upgradeControlPlanesInPlace({
      step: journal.kubernetes,
      workspaceDir,
      provider,
      ctx,
      progress,
      timeoutMs: options.kubernetesTimeoutMs,
      pollIntervalMs: options.pollIntervalMs,
    });
    journal.kubernetes.done = true;
    await writeJournal(journalFile, journal);
  }

  if (!journal.measurementsWritten) {
    journal.measurementsWriting = true;
    await writeJournal(journalFile, journal);
    const wrote = await withWorkspaceStore(workspaceDir, await provider.listInstances(ctx), async (store) => {
      const { config: current } = await store.readJoinConfig();
      // A run killed between this write and the journal's finds the store holding the set already.
      const already = imageMeasurementsDigest(current.attestation.config.measurements) === verified.digest;
      if (!already) await setMeasurements(store, verified, { keepPrevious: true });
      await store.writeJoinConfig({
        cluster: { ...current.cluster, kubernetesVersion: target.kubernetesVersion, imageVersion: target.image },
      });
      return !already;
    });
    journal.measurementsWritten = true;
    await writeJournal(journalFile, journal);
    progress(
      wrote
        ? 'wrote the new measurements to the cluster store (the old ones stay accepted until every node is replaced)'
        : 'the cluster store holds the new measurements already',
    );
  }

  const replaced: UpgradeResult['replaced'] = [];
  // Until every node answers with the target: a node that no step covers (a partial rollback dropped its step, or
  // it was added meanwhile with the old image) gets a step of its own. Bounded: a node that keeps coming back old
  // after two rounds is named instead.
  for (let round = 0; ; round++) {
    for (const step of journal.steps) {
      if (step.done) continue;
      await replaceOne(step, journal, journalFile, options, ctx, progress);
      replaced.push({ old: step.old, new: step.new! });
    }
    const status = await clusterStatus({ workspaceDir, provider, journal: options.journal, log, expected: target });
    const outdated = status.nodes.filter((n) => n.upToDate === false);
    const unknown = status.nodes.filter((n) => n.upToDate === undefined);
    if (outdated.length > 0 && round < 2) {
      const instances = await provider.listInstances(ctx);
      for (const n of outdated) {
        if (journal.steps.some((s) => !s.done && s.old === n.name)) continue;
        journal.steps.push({
          old: n.name,
          role: n.role as Step['role'],
          group: instances.find((i) => i.name === n.name)!.nodeGroup,
        });
      }
      await writeJournal(journalFile, journal);
      progress(
        `still on another image: ${outdated.map((n) => n.name).join(', ')}; replacing ${outdated.length === 1 ? 'it' : 'them'} too`,
      );
      continue;
    }
    if (outdated.length > 0 || unknown.length > 0) {
      const left = [
        ...outdated.map((n) => `${n.name} (${(n.outdated ?? []).join(', ') || 'runs another image'})`),
        ...unknown.map((n) => `${n.name} (${n.state}: not checked)`),
      ];
      throw new UpgradeStoppedError(
        `The rollout to ${target.image} did not reach every node: ${left.join('; ')}. Both measurement sets stay accepted.`,
        {
          hint: 'Start or fix those nodes, then run `constellation upgrade apply` again to finish.',
        },
      );
    }
    break;
  }

  await withWorkspaceStore(workspaceDir, await provider.listInstances(ctx), (store) => dropPreviousMeasurements(store));
  await fs.rm(journalFile, { force: true });
  progress('every node runs the new image; the old measurements are no longer accepted');
  return { replaced, upToDate: false };
}

/**
 * No rollout is needed (every node runs what the config asks for): the store must trust exactly the config's verified
 * measurements. It may not after a rollback or a run killed between two writes; then they are written (the previous
 * ones stay while some node could not be asked).
 */
async function reconcileStore(
  verified: VerifiedMeasurements,
  { keepPrevious }: { keepPrevious: boolean },
  options: UpgradeOptions,
  ctx: ProviderContext,
  progress: (l: string) => void,
): Promise<void> {
  await withWorkspaceStore(options.workspaceDir, await options.provider.listInstances(ctx), async (store) => {
    const trusted = await trustedMeasurements(store);
    if (trusted.current !== verified.digest) {
      await setMeasurements(store, verified, { keepPrevious });
      progress(
        `the cluster store trusted measurements ${trusted.current}, not the config's ${verified.digest}: it now trusts the config's (${verified.source})`,
      );
    } else if (!keepPrevious && trusted.previous.length > 0) {
      await dropPreviousMeasurements(store);
      progress(
        `the cluster store also accepted measurements ${trusted.previous.join(', ')} of an earlier rollout: dropped, every node runs the config's`,
      );
    }
  });
}

/** Adds the replacement, waits until it joined and verifies, then removes the old node. Journaled at each step. */
async function replaceOne(
  step: Step,
  journal: UpgradeJournal,
  file: string,
  options: UpgradeOptions,
  ctx: ProviderContext,
  progress: (l: string) => void,
): Promise<void> {
  const { provider, workspaceDir } = options;
  let instances = await provider.listInstances(ctx);
  if (step.new && !instances.some((i) => i.name === step.new)) {
    step.new = undefined; // removed meanwhile (a rollback, by hand): add another
  }
  if (step.new) {
    const status = await getNodeStatus(`${address(instances, step.new)}:${VERIFY_PORT}`, 3000).catch(() => undefined);
    if (status?.state === 'refused' || status?.state === 'failed') {
      // Refused last time: what was added goes, and the rollout tries with a fresh node.
      progress(`removing ${step.new}, the replacement an earlier run added and that was refused`);
      await removeNamed(step.new, instances, options, ctx);
      step.new = undefined;
      await writeJournal(file, journal);
    }
  }
  if (!step.new) {
    if (step.adding) {
      // The run that asked for a node was killed before it recorded it: use the node if it came up, else start over.
      const adopted = adoptNewest(instances, journal, step);
      if (adopted && instances.find((i) => i.name === adopted)?.state === 'running') step.new = adopted;
      else if (adopted) {
        progress(`removing ${adopted}, which an interrupted run began to add`);
        await removeNamed(adopted, instances, options, ctx);
      }
    }
    if (!step.new) {
      step.adding = true;
      await writeJournal(file, journal);
      progress(`adding a node to ${step.group} to replace ${step.old}`);
      step.new = (await provider.addInstance!(step.group, ctx)).name;
      progress(`${step.new} is running; waiting until it joins the cluster`);
    }
    step.adding = false;
    await writeJournal(file, journal);
  }
  instances = await provider.listInstances(ctx);
  await waitJoined(step, address(instances, step.new!), options);
  const verified = await verifyCluster({
    workspaceDir,
    log: options.log,
    nodeEndpoint: address(instances, step.new!),
    validatorDeps: options.validatorDeps,
  });
  const node = verified.nodes[0];
  if (node.outcome !== 'verified') {
    throw new UpgradeStoppedError(`The replacement ${step.new} of ${step.old} does not verify: ${node.reason}`, {
      hint: ROLLBACK_HINT,
      exitCode: 3,
    });
  }
  progress(`${step.new} joined and verified`);
  await retireNode(step.old, step.role, instances, options, ctx);
  step.done = true;
  await writeJournal(file, journal);
  progress(`replaced ${step.old} with ${step.new}`);
}

/**
 * Removes a node: out of the load balancer first (no call reaches its join service once its store member is gone),
 * then, for a control plane, out of the cluster store (the quorum never counts a node that is gone), then the instance.
 */
async function retireNode(
  name: string,
  role: Step['role'],
  instances: Instance[],
  options: UpgradeOptions,
  ctx: ProviderContext,
): Promise<void> {
  const id = instances.find((i) => i.name === name)?.id;
  if (id !== undefined) await options.provider.drainInstance?.(id, ctx);
  // A refusal (the quorum would be at risk, or the store cannot answer) stops here, before the instance goes.
  if (role === 'control-plane') await removeStoreMember(options.workspaceDir, instances, name);
  await removeNamed(name, instances, options, ctx);
}

/** The journal names nodes; the provider removes instances by id (on the clouds the two differ). Gone already: nothing to do. */
async function removeNamed(
  name: string,
  instances: Instance[],
  options: UpgradeOptions,
  ctx: ProviderContext,
): Promise<void> {
  const id = instances.find((i) => i.name === name)?.id;
  if (id !== undefined) await options.provider.removeInstance!(id, ctx);
}

const ROLLBACK_HINT =
  'The old node stays and the cluster keeps working. `constellation upgrade apply --rollback` removes what the upgrade added; fix the image and run `constellation upgrade apply` again to retry.';

/** Polls the new node until it has joined; a refusal (its reason names the PCR) stops the rollout. */
async function waitJoined(step: Step, host: string, options: UpgradeOptions): Promise<void> {
  const timeoutMs = options.joinTimeoutMs ?? 120_000;
  let last: string | undefined;
  await pollUntil(
    async () => {
      const status = await getNodeStatus(`${host}:${VERIFY_PORT}`, 2000).catch(() => undefined);
      last = status?.state;
      if (status?.state === 'joined') return true;
      if (status?.state === 'refused' || status?.state === 'failed') {
        throw new UpgradeStoppedError(
          `The replacement ${step.new} of ${step.old} was ${status.state}: ${status.reason}`,
          { hint: ROLLBACK_HINT, exitCode: 3 },
        );
      }
      return undefined;
    },
    {
      timeoutMs,
      intervalMs: options.pollIntervalMs ?? 200,
      clock: options.clock,
      sleep: options.sleep,
      onTimeout: () => {
        throw new UpgradeStoppedError(
          `The replacement ${step.new} of ${step.old} did not join within ${Math.round(timeoutMs / 1000)} s (it is ${last ?? 'not answering'}).`,
          {
            hint: `See its log with \`constellation status\`. ${ROLLBACK_HINT}`,
          },
        );
      },
    },
  );
}

/** Removes every node the upgrade added that did not replace its old node yet, and restores the old measurements. */
async function rollback(
  journal: UpgradeJournal | undefined,
  file: string,
  options: UpgradeOptions,
  ctx: ProviderContext,
  progress: (l: string) => void,
): Promise<UpgradeResult> {
  if (!journal)
    throw new UserError('There is no upgrade to roll back in this workspace.', {
      hint: 'An upgrade in progress is recorded in constellation-upgrade.json.',
    });
  const instances = await options.provider.listInstances(ctx);
  const rolledBack: string[] = [];
  for (const step of journal.steps) {
    if (step.done) continue;
    const added = step.new ?? (step.adding ? adoptNewest(instances, journal, step) : undefined);
    if (!added) continue;
    const refusal = rollbackRefusal(added, step, journal, instances);
    if (refusal) {
      throw new UserError(`The rollback does not remove ${added}: ${refusal}.`, {
        hint: `The journal (${UPGRADE_JOURNAL_FILE}) names a node this upgrade did not add. Nothing more was removed; check the journal, and remove a node by hand only if you know it is the upgrade's.`,
      });
    }
    await retireNode(added, step.role, instances, options, ctx);
    rolledBack.push(added);
    progress(`removed ${added}, which the upgrade added to replace ${step.old}`);
  }
  if (journal.steps.every((s) => !s.done)) {
    // Whether the rollout's write happened is the store's to say, not the journal's (a run killed between them).
    const restored = await withWorkspaceStore(
      options.workspaceDir,
      await options.provider.listInstances(ctx),
      (store) => restorePreviousMeasurements(store, journal.target.measurementsDigest),
    );
    if (restored) progress('restored the measurements of before the upgrade');
  } else if (journal.steps.some((s) => s.done)) {
    progress(
      'some nodes run the new image already: both measurement sets stay accepted; finish the upgrade with `constellation upgrade apply`',
    );
    journal.steps = journal.steps.filter((s) => s.done);
    await writeJournal(file, journal);
    return { replaced: [], rolledBack, upToDate: false };
  }
  await fs.rm(file, { force: true });
  return { replaced: [], rolledBack, upToDate: false };
}

/**
 * Why a rollback must not remove `name` as the node added for `step`, or undefined when the provider confirms it is
 * the rollout's: listed in the step's group, not a node any step replaces, and made from the rollout's image (or,
 * where the provider reports no image, made after the rollout started).
 */
function rollbackRefusal(name: string, step: Step, journal: UpgradeJournal, instances: Instance[]): string | undefined {
  const instance = instances.find((i) => i.name === name);
  if (!instance) return 'the provider lists no such node';
  if (instance.nodeGroup !== step.group) return `it is in node group ${instance.nodeGroup}, not ${step.group}`;
  if (journal.steps.some((s) => s.old === name)) return 'it is a node the upgrade replaces, not one it added';
  if (instance.image !== undefined) {
    return instance.image === journal.target.image
      ? undefined
      : `the provider made it from image ${instance.image}, not the upgrade's ${journal.target.image}`;
  }
  if (instance.createdAt && journal.startedAt) {
    return instance.createdAt >= journal.startedAt
      ? undefined
      : `the provider made it at ${instance.createdAt}, before the upgrade started (${journal.startedAt})`;
  }
  return 'the provider reports neither its image nor when it made it';
}

/** A node of the step's group that no step knows: the one a killed run asked for but did not record. */
function adoptNewest(instances: Instance[], journal: UpgradeJournal, step: Step): string | undefined {
  const known = new Set(journal.steps.flatMap((s) => [s.old, s.new].filter((n): n is string => n !== undefined)));
  return newestFirst(instances.filter((i) => i.nodeGroup === step.group && !known.has(i.name)))[0]?.name;
}

function address(instances: Instance[], name: string): string {
  const instance = instances.find((i) => i.name === name);
  if (!instance) throw new UserError(`The provider lists no node ${name}.`);
  return instance.publicIp || instance.privateIp;
}

async function readJournal(file: string): Promise<UpgradeJournal | undefined> {
  if (!(await pathExists(file))) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(
      (await readRegularFile(file, { what: 'the upgrade journal', maxBytes: SIZE_LIMITS.upgradeJournal })).toString(
        'utf8',
      ),
    );
  } catch (err) {
    if (err instanceof UserError) throw err;
    value = undefined;
  }
  const parsed = journalSchema.safeParse(value);
  if (!parsed.success)
    throw new UserError(`${file} is not an upgrade journal this CLI understands.`, {
      hint: 'Remove it only if no upgrade is in progress.',
    });
  return parsed.data;
}

function writeJournal(file: string, journal: UpgradeJournal): Promise<void> {
  return writeFileAtomic(file, `${JSON.stringify(journal, null, 2)}\n`, { mode: 0o600 });
}
