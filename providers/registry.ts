/**
 * Loads a provider by name, lazily: the built-in ones from providers/<name>/index.js, any other from an
 * installed package named `constellation-provider-<name>`. Nothing here imports a cloud SDK.
 */
import { PROVIDERS } from '../lib/attestation/variant.js';
import { UserError } from '../lib/errors.js';
import type { ProviderModule } from './contract.js';

/** The providers of the variant table's provider column. */
export const BUILTIN_PROVIDERS = PROVIDERS;

export async function loadProvider(name: string): Promise<ProviderModule> {
  const specifier = (BUILTIN_PROVIDERS as readonly string[]).includes(name)
    ? `./${name}/index.js`
    : `constellation-provider-${name}`;
  let mod: { default?: ProviderModule; provider?: ProviderModule };
  try {
    mod = (await import(specifier)) as typeof mod;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ERR_MODULE_NOT_FOUND' && String((err as Error).message).includes(specifier.replace('./', ''))) {
      throw new UserError(`Unknown provider "${name}".`, {
        hint: `Built-in providers: ${BUILTIN_PROVIDERS.join(', ')}. A third-party provider is installed as the npm package constellation-provider-${name}.`,
        cause: err,
      });
    }
    throw err;
  }
  const provider = mod.default ?? mod.provider;
  if (!provider || typeof provider.infrastructure !== 'function') {
    throw new UserError(`The package for provider "${name}" does not export a provider.`, {
      hint: 'A provider package exports a ProviderModule (see providers/contract.ts) as default export or as `provider`.',
    });
  }
  return provider;
}
