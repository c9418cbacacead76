/**
 * The local-vtpm variant (docs/design.md#attestation): nodes of the local provider, each with its own swtpm. Its AK is trusted
 * only when it is, byte for byte, the AK the local provider registered for that instance when it created the
 * node (like GCP's shielded-instance identity API). instanceInfo is the UTF-8 JSON `{"instance":"<node name>"}`.
 * A trusted AK identifies the instance, so the result names it, with the role and addresses the provider registered.
 */
import { bytesEqual } from '../tpm-quote.js';
import { AttestationError, type Validator, type ValidatorDeps, type VariantConfig } from '../types.js';
import { createVtpmValidator } from '../vtpm-validator.js';
import { parseJson } from '../../json.js';

export const VARIANT = 'local-vtpm';

/** The instanceInfo of a local node. */
export function localInstanceInfo(instance: string): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ instance }));
}

export function createValidator(config: VariantConfig, deps: ValidatorDeps): Validator {
  return registeredAkValidator(VARIANT, config, deps, 'local');
}

/**
 * The validator of a variant whose AK the provider registered when it made the node (local-vtpm, qemu-vtpm): the
 * generic vTPM validator, trusting an AK only when the registry holds exactly it for the instance.
 */
export function registeredAkValidator(
  variant: string,
  config: VariantConfig,
  deps: ValidatorDeps,
  provider: string,
): Validator {
  const registry = deps.akRegistry;
  return createVtpmValidator({
    variant,
    measurements: config.measurements,
    deps,
    async trustAk(akPublic, instanceInfo) {
      const instance = parseInstance(instanceInfo, variant);
      if (!registry) throw new AttestationError(`${variant}: no AK registry to check the attestation key against`);
      const registered = await registry.lookup(instance);
      if (!registered) {
        throw new AttestationError(
          `${variant}: no attestation key is registered for instance "${instance}"`,
          undefined,
          {
            hint: `Only nodes the ${provider} provider created can attest.`,
          },
        );
      }
      if (!bytesEqual(registered.akPublic, akPublic)) {
        throw new AttestationError(
          `${variant}: the attestation key differs from the one registered for instance "${instance}"`,
          undefined,
          {
            hint: 'The node runs on another TPM than the provider created it with.',
          },
        );
      }
      const { role, addresses } = registered;
      return { name: instance, role, ...(addresses ? { addresses } : {}) };
    },
  });
}

function parseInstance(instanceInfo: Uint8Array, variant: string): string {
  let info: unknown;
  try {
    info = parseJson(new TextDecoder('utf-8', { fatal: true }).decode(instanceInfo));
  } catch {
    throw new AttestationError(`${variant}: instanceInfo is not UTF-8 JSON`);
  }
  const instance = (info as { instance?: unknown } | null)?.instance;
  if (typeof instance !== 'string' || instance === '' || Object.keys(info as object).length !== 1) {
    throw new AttestationError(`${variant}: instanceInfo must be {"instance":"<node name>"}`);
  }
  return instance;
}
