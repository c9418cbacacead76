/**
 * Loads a provider by name, lazily: the built-in ones from providers/<name>/index.js, any other from an
 * installed package named `constellation-provider-<name>`. Nothing here imports a cloud SDK.
 * The built-in ones are imported by string literal, so that the bundler of the node program
 * (scripts/bundle-node-program.mjs) puts every built-in provider into the bundle. In the node program only
 * bootstrapper/main.ts loads a provider, the one the node booted on: the bundler relies on that to leave the other
 * providers' files out of a node image (docs/workflows/node-images.md#what-the-image-holds).
 */
import { PROVIDERS } from '../lib/attestation/variant.js';
import { UserError } from '../lib/errors.js';
import type { ProviderModule } from './contract.js';

/** The providers of the variant table's provider column. */
export const BUILTIN_PROVIDERS = PROVIDERS;

type LoadedModule = { default?: ProviderModule; provider?: ProviderModule };

/** One literal import per built-in provider (a new provider adds its line here and to the variant table). */
const BUILTIN_MODULES: Record<(typeof BUILTIN_PROVIDERS)[number], () => Promise<LoadedModule>> = {
  local: () => import('./local/index.js'),
  qemu: () => import('./qemu/index.js'),
  aws: () => import('./aws/index.js'),
  azure: () => import('./azure/index.js'),
  gcp: () => import('./gcp/index.js'),
};

export async function loadProvider(name: string): Promise<ProviderModule> {
  const builtin = Object.hasOwn(BUILTIN_MODULES, name)
    ? BUILTIN_MODULES[name as keyof typeof BUILTIN_MODULES]
    : undefined;
  const specifier = builtin ? `./${name}/index.js` : `constellation-provider-${name}`;
  let mod: LoadedModule;
  try {
    mod = (builtin ? await builtin() : await import(specifier)) as LoadedModule;
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
