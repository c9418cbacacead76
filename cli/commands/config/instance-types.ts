import { Flags } from '@oclif/core';
import { BaseCommand } from '../../base-command.js';
import { INSTANCE_TYPES } from '../../../lib/config/instance-types.js';
import { PROVIDERS, PROVIDER_VARIANTS, type AttestationVariant, type Provider } from '../../../lib/config/variants.js';

type Listing = Record<string, Record<string, string[]>>;

export default class ConfigInstanceTypes extends BaseCommand<typeof ConfigInstanceTypes> {
  static override summary = 'List the instance types allowed per provider and attestation variant.';
  static override description =
    'Nodes must run on confidential VMs that can produce the configured attestation variant. This lists, per provider and variant, the instance types `config validate` accepts in nodeGroups.<name>.instanceType.';

  static override examples = [
    { description: 'Every provider and variant:', command: '<%= config.bin %> <%= command.id %>' },
    { description: 'Only Azure, as JSON:', command: '<%= config.bin %> <%= command.id %> --provider azure --json' },
  ];

  static override flags = {
    provider: Flags.string({ char: 'p', description: 'Only this provider.', options: [...PROVIDERS] }),
  };

  static override enableJsonFlag = true;

  public async run(): Promise<Listing> {
    const providers = this.flags.provider ? [this.flags.provider as Provider] : [...PROVIDERS];
    const listing: Listing = {};
    for (const provider of providers) {
      listing[provider] = Object.fromEntries(
        PROVIDER_VARIANTS[provider].map((variant: AttestationVariant) => [variant, [...INSTANCE_TYPES[variant]]]),
      );
    }
    if (!this.jsonEnabled()) {
      for (const [provider, variants] of Object.entries(listing)) {
        this.log(`${provider}:`);
        for (const [variant, types] of Object.entries(variants)) {
          this.log(`  ${variant}:`);
          for (const line of wrap(types, 96)) this.log(`    ${line}`);
        }
      }
    }
    return listing;
  }
}

/** Joins words with ", " into lines of at most `width` characters. */
function wrap(words: string[], width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of words) {
    const next = line ? `${line}, ${word}` : word;
    if (next.length > width && line) {
      lines.push(`${line},`);
      line = word;
    } else {
      line = next;
    }
  }
  if (line) lines.push(line);
  return lines;
}
