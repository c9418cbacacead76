/**
 * Which provider a workspace's cluster belongs to, its infrastructure side, the collaborators its attestation
 * variant needs on the CLI side, and the one place the CLI builds the validator of a workspace's nodes (init,
 * recover, verify). Providers load lazily through providers/registry.ts, so only the one in use loads.
 */
import type { InfrastructureProvider } from '../../providers/contract.js';
import type { Validator, ValidatorDeps, VariantConfig } from '../../lib/attestation/types.js';
import { attestationConfigOf, attestationVariantOf, providerOf, type Config } from '../../lib/config/index.js';
import type { State } from '../../lib/workspace/state.js';

/** The infrastructure side of a provider, given its config section and the cluster's uid (a provider ignores what it does not use). */
export async function loadInfrastructure(
  name: string,
  options: Record<string, unknown> = {},
): Promise<InfrastructureProvider> {
  const { loadProvider } = await import('../../providers/registry.js');
  const provider = await loadProvider(name);
  return provider.infrastructure(options);
}

/**
 * Options for a provider's infrastructure(): its config section (region, project, ...), the config's image (the
 * image new nodes boot: replacements and added nodes) and the uid once known.
 */
export function infrastructureOptions(
  config: Config | undefined,
  state: State | undefined,
  name: string,
): Record<string, unknown> {
  const section = (config?.provider as Record<string, Record<string, unknown> | undefined> | undefined)?.[name] ?? {};
  const uid = state?.infrastructure.uid;
  return { ...section, ...(config?.image ? { image: config.image } : {}), ...(uid ? { uid } : {}) };
}

/** The provider's section of the state (infrastructure.<provider>): what its create returned as providerState. */
export function providerStateOf(state: State, name: string): Record<string, unknown> {
  return ((state.infrastructure as Record<string, unknown>)[name] as Record<string, unknown> | undefined) ?? {};
}

/**
 * What the provider's attestation variants need to validate a node from the CLI: the provider's attestationDeps(),
 * given its state section. The local provider's AK registry is its metadata server (providerState.metadataUrl).
 */
export async function attestationDepsFor(
  name: string,
  providerState: Record<string, unknown>,
): Promise<Partial<ValidatorDeps>> {
  const { loadProvider } = await import('../../providers/registry.js');
  const provider = await loadProvider(name);
  return (await provider.attestationDeps?.(providerState)) ?? {};
}

/** Makes the validator of a variant; default lib/attestation/registry's createValidator (tests pass stand-ins). */
export type ValidatorFactory = (variant: string, config: VariantConfig, deps: ValidatorDeps) => Promise<Validator>;

export interface WorkspaceValidatorOptions {
  config: Config;
  state: State;
  /** Where each attestation warning (a warnOnly PCR that differs) goes. */
  warn: (message: string) => void;
  /** A node named on the command line (-e): the provider finds its attestation-key trust from the address. */
  nodeAddress?: string;
  /** What the validator checks; default the config's attestation config. */
  attestationConfig?: VariantConfig;
  /** Replaces the provider's attestation deps (tests). */
  validatorDeps?: Partial<ValidatorDeps>;
  createValidator?: ValidatorFactory;
}

/** The validator of this workspace's nodes: the config's variant and measurements, with the provider's deps. */
export async function workspaceValidator(options: WorkspaceValidatorOptions): Promise<Validator> {
  const { config, state } = options;
  const providerName = providerOf(config);
  const deps: ValidatorDeps = {
    ...(options.validatorDeps ??
      (await attestationDepsFor(providerName, {
        ...(options.nodeAddress ? { nodeAddress: options.nodeAddress } : {}),
        ...providerStateOf(state, providerName),
      }))),
    warn: options.warn,
  };
  const factory = options.createValidator ?? (await import('../../lib/attestation/registry.js')).createValidator;
  return factory(attestationVariantOf(config), options.attestationConfig ?? attestationConfigOf(config), deps);
}

/**
 * What the provider's attestation variants need to validate a saved document (`attestation verify`): its
 * attestationDeps() with the workspace's config section and, where a cluster was created, its state section (the
 * local provider's metadata server). Cloud clients use their default credential chains.
 */
export async function verifierDepsFor(
  name: string,
  section: Record<string, unknown>,
  workspaceDir: string,
): Promise<Partial<ValidatorDeps>> {
  const { readStateOrEmpty } = await import('../../lib/workspace/state.js');
  const state = await readStateOrEmpty(workspaceDir).catch(() => undefined);
  return attestationDepsFor(name, {
    ...(state ? providerStateOf(state, name) : {}),
    verifier: { section, workspaceDir },
  });
}

/** The infrastructure side of the provider of the workspace's config. */
export async function workspaceInfrastructure(workspaceDir: string): Promise<InfrastructureProvider> {
  const [{ loadConfig, providerOf }, { readStateOrEmpty }] = await Promise.all([
    import('../../lib/config/index.js'),
    import('../../lib/workspace/state.js'),
  ]);
  const config = await loadConfig(workspaceDir);
  const state = await readStateOrEmpty(workspaceDir);
  const name = providerOf(config);
  return loadInfrastructure(name, infrastructureOptions(config, state, name));
}
