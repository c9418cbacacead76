/**
 * Where the node program runs, learned at start (docs/design.md#nodes, like upstream's kernel command line): the provider and
 * attestation variant come from the kernel command line (`constellation.csp=aws
 * constellation.attestation-variant=aws-sev-snp`) or from the boot config file the image ships
 * (/etc/constellation/boot.json: `{"csp", "attestationVariant", "paths"?, "providerOptions"?, "imageVersion"?}`); the file may also
 * move device paths and metadata endpoints (a test's emulated VM does). Neither present: a local process node,
 * whose launcher describes it in the environment (providers/local/node-env.ts). The platform then confirms the
 * provider by asking the cloud's metadata service who the node is (NodePlatform.identity).
 */
import { promises as fs } from 'node:fs';
import { UserError } from '../lib/errors.js';
import { checkShape, type ObjectField } from '../lib/json-shape.js';
import type { NodePlatformOptions } from '../providers/contract.js';

export const KERNEL_CMDLINE = '/proc/cmdline';
export const BOOT_CONFIG_FILE = '/etc/constellation/boot.json';

export interface BootConfig {
  provider: string;
  options: NodePlatformOptions;
}

export interface BootConfigSources {
  /** Default /proc/cmdline. */
  cmdlineFile?: string;
  /** Default: env CONSTELLATION_BOOT_CONFIG, else /etc/constellation/boot.json. */
  configFile?: string;
  env?: NodeJS.ProcessEnv;
}

interface BootConfigFile {
  csp?: string;
  attestationVariant?: string;
  paths?: NodePlatformOptions['paths'];
  providerOptions?: Record<string, unknown>;
  imageVersion?: string;
}

// Checked by hand, not with zod: the node program reads it before it listens (lib/json-shape.ts says why).
const nonEmpty = { kind: 'string', min: 1, optional: true } as const;
export const bootConfigFileShape: ObjectField = {
  kind: 'object',
  strict: true,
  fields: {
    csp: nonEmpty,
    attestationVariant: nonEmpty,
    paths: {
      kind: 'object',
      strict: true,
      optional: true,
      fields: {
        tpm: nonEmpty,
        stateDisk: nonEmpty,
        stateDir: nonEmpty,
        nodeDir: nonEmpty,
        tsmRoot: nonEmpty,
        sevGuest: nonEmpty,
      },
    },
    providerOptions: { kind: 'record', optional: true },
    imageVersion: nonEmpty,
  },
};

/** `key=value` words of a kernel command line (values may be double-quoted). */
export function parseCmdline(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const match of text.matchAll(/([^\s=]+)(?:=("[^"]*"|\S*))?/g))
    out.set(match[1], (match[2] ?? '').replace(/^"|"$/g, ''));
  return out;
}

async function readOptional(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new UserError(`Cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

export async function readBootConfig(sources: BootConfigSources = {}): Promise<BootConfig> {
  const env = sources.env ?? process.env;
  const cmdline = parseCmdline((await readOptional(sources.cmdlineFile ?? KERNEL_CMDLINE)) ?? '');
  const configFile = sources.configFile ?? env.CONSTELLATION_BOOT_CONFIG ?? BOOT_CONFIG_FILE;
  const text = await readOptional(configFile);
  let file: BootConfigFile = {};
  if (text !== undefined) {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (cause) {
      throw new UserError(`The boot config ${configFile} is not JSON.`, { cause });
    }
    const parsed = checkShape(json, bootConfigFileShape);
    if (!parsed.success) {
      const { issue } = parsed;
      throw new UserError(
        `The boot config ${configFile} is invalid: ${issue.path.join('.') || '(root)'}: ${issue.message}.`,
      );
    }
    file = parsed.data as BootConfigFile;
  }
  const csp = cmdline.get('constellation.csp');
  const variant = cmdline.get('constellation.attestation-variant');
  if (csp && file.csp && csp !== file.csp) {
    throw new UserError(
      `The kernel command line says constellation.csp=${csp}, but ${configFile} says csp ${file.csp}.`,
      { hint: 'The node image is inconsistent; rebuild it.' },
    );
  }
  const provider = csp ?? file.csp;
  if (!provider) {
    // No cloud named: a local process node (its launcher sets the environment).
    return { provider: env.CONSTELLATION_PROVIDER || 'local', options: { variant: 'local-vtpm', env } };
  }
  const attestationVariant = variant ?? file.attestationVariant;
  if (!attestationVariant) {
    throw new UserError(
      `The node runs on ${provider}, but neither the kernel command line (constellation.attestation-variant) nor ${configFile} names its attestation variant.`,
    );
  }
  return {
    provider,
    options: {
      variant: attestationVariant,
      paths: file.paths,
      providerOptions: file.providerOptions,
      imageVersion: file.imageVersion,
      env,
    },
  };
}
