/**
 * What `iam create <cloud>` hands the provider: the values given on the command line, completed from the
 * workspace config's provider section when the workspace has a config for that cloud (empty fields, which
 * `config generate` leaves for the identities, do not count). A zone given without a region implies its region.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { UserError } from '../../lib/errors.js';
import { CONFIG_FILE } from '../../lib/workspace/files.js';

export type IamCloud = 'aws' | 'azure' | 'gcp';
export const IAM_CLOUDS: readonly IamCloud[] = ['aws', 'azure', 'gcp'];
const CLOUD_NAMES: Record<IamCloud, string> = { aws: 'AWS', azure: 'Azure', gcp: 'GCP' };

/**
 * Per cloud: which flags (as parsed; upstream's names such as --subscriptionID are oclif aliases of ours) the
 * cloud takes and which input each sets. Inputs the config has no key for (the identity's name) are passed to
 * the provider but never written into the config.
 */
export const IAM_CLOUD_FLAGS: Record<IamCloud, Record<string, { input: string; inConfig: boolean }>> = {
  aws: { region: { input: 'region', inConfig: true }, zone: { input: 'zone', inConfig: true } },
  azure: {
    subscription: { input: 'subscription', inConfig: true },
    location: { input: 'location', inConfig: true },
    // Upstream's `iam create azure --region` is the location.
    region: { input: 'location', inConfig: true },
    'resource-group': { input: 'resourceGroup', inConfig: true },
    tenant: { input: 'tenant', inConfig: true },
    // Upstream's --servicePrincipal names what the nodes run as: our user-assigned identity.
    servicePrincipal: { input: 'identityName', inConfig: false },
  },
  gcp: {
    project: { input: 'project', inConfig: true },
    region: { input: 'region', inConfig: true },
    zone: { input: 'zone', inConfig: true },
  },
};

/**
 * The provider inputs the parsed flags give for a cloud: a UserError for a flag another cloud takes, or for two
 * flags that set one input to different values (azure --location and --region).
 */
export function iamFlagInputs(
  cloud: IamCloud,
  flags: Record<string, string | undefined>,
): { inputs: Record<string, string | undefined>; notInConfig: string[] } {
  const own = IAM_CLOUD_FLAGS[cloud];
  const all = new Set(Object.values(IAM_CLOUD_FLAGS).flatMap((f) => Object.keys(f)));
  const misplaced = [...all].filter((flag) => flags[flag] !== undefined && !(flag in own));
  if (misplaced.length > 0) {
    throw new UserError(`--${misplaced[0]} is not a flag of \`iam create ${cloud}\`.`, {
      hint: `${CLOUD_NAMES[cloud]} takes ${Object.keys(own)
        .map((f) => `--${f}`)
        .join(', ')}.`,
    });
  }
  const inputs: Record<string, string | undefined> = {};
  const from: Record<string, string> = {};
  for (const [flag, { input }] of Object.entries(own)) {
    const value = flags[flag];
    if (value === undefined) continue;
    if (inputs[input] !== undefined && inputs[input] !== value) {
      throw new UserError(`--${from[input]} and --${flag} both set the ${input}, to different values.`, {
        hint: 'Give one of them.',
      });
    }
    inputs[input] = value;
    from[input] = flag;
  }
  for (const { input } of Object.values(own)) if (!(input in inputs)) inputs[input] = undefined;
  return {
    inputs,
    notInConfig: Object.values(own)
      .filter((f) => !f.inConfig)
      .map((f) => f.input),
  };
}

export interface IamInputs {
  /** Everything known: the given values over the config's. What the provider gets as providerConfig. */
  providerConfig: Record<string, unknown>;
  /** Only the values given on the command line (and a region derived from a given zone). */
  given: Record<string, string>;
  /** The config's provider, when the workspace has a readable config. */
  configProvider?: string;
  /** Why the workspace's config could not be read (its values are then not used). */
  configProblem?: string;
}

/** "us-east-2a" → "us-east-2" (AWS), "europe-west3-a" → "europe-west3" (GCP). */
export function regionOfZone(cloud: IamCloud, zone: string): string | undefined {
  if (cloud === 'aws') return /^([a-z]{2}(?:-[a-z]+)+-\d+)[a-z]$/.exec(zone)?.[1];
  if (cloud === 'gcp') return /^([a-z]+-[a-z]+\d+)-[a-z]$/.exec(zone)?.[1];
  return undefined;
}

export async function resolveIamInputs(
  workspaceDir: string,
  cloud: IamCloud,
  flags: Record<string, string | undefined>,
): Promise<IamInputs> {
  const given = Object.fromEntries(
    Object.entries(flags).filter((e): e is [string, string] => typeof e[1] === 'string' && e[1] !== ''),
  );
  if (given.zone && !given.region) {
    const region = regionOfZone(cloud, given.zone);
    if (region) given.region = region;
  }
  const { provider, section, problem } = await configSection(workspaceDir);
  const fromConfig =
    provider === cloud
      ? Object.fromEntries(Object.entries(section).filter(([, v]) => v !== '' && v !== undefined))
      : {};
  return { providerConfig: { ...fromConfig, ...given }, given, configProvider: provider, configProblem: problem };
}

/**
 * The provider section of the workspace's config, read leniently: a missing or broken config gives no defaults
 * (the command warns about a broken one; `--update-config` refuses it, naming the line).
 */
async function configSection(
  workspaceDir: string,
): Promise<{ provider?: string; section: Record<string, unknown>; problem?: string }> {
  try {
    await fs.access(path.join(workspaceDir, CONFIG_FILE));
  } catch {
    return { section: {} };
  }
  const { loadConfig, providerOf } = await import('../../lib/config/index.js');
  try {
    const config = await loadConfig(workspaceDir, { allowIncomplete: true });
    const provider = providerOf(config);
    return {
      provider,
      section: { ...((config.provider as Record<string, Record<string, unknown> | undefined>)[provider] ?? {}) },
    };
  } catch (err) {
    return { section: {}, problem: (err as Error).message };
  }
}
