/**
 * `iam create` accepts upstream Constellation's flag names (cli/internal/cmd/iamcreate{aws,azure,gcp}.go): oclif
 * parses them as aliases of ours, and iamFlagInputs maps the parsed flags of a cloud to the provider's inputs.
 */
import assert from 'node:assert/strict';
import { Parser } from '@oclif/core';
import { describe, it } from 'mocha';
import IamCreate from '../../cli/commands/iam/create.js';
import { iamFlagInputs } from '../../cli/iam/index.js';
import { UserError } from '../../lib/errors.js';

async function parse(argv: string[]): Promise<Record<string, string | undefined>> {
  const { flags } = await Parser.parse(argv, { flags: IamCreate.flags, args: IamCreate.args, strict: true });
  return flags as Record<string, string | undefined>;
}

describe('iam create: upstream flag names', () => {
  it('azure: --subscriptionID --resourceGroup --region --servicePrincipal', async () => {
    const flags = await parse([
      'azure',
      '--subscriptionID',
      'sub-1',
      '--resourceGroup',
      'rg-1',
      '--region',
      'westeurope',
      '--servicePrincipal',
      'sp-1',
    ]);
    const { inputs, notInConfig } = iamFlagInputs('azure', flags);
    assert.deepEqual(inputs, {
      subscription: 'sub-1',
      location: 'westeurope',
      resourceGroup: 'rg-1',
      tenant: undefined,
      identityName: 'sp-1',
    });
    assert.deepEqual(notInConfig, ['identityName'], 'the identity name is no config key');
  });

  it('azure: our names give the same inputs; --location and --region must agree', async () => {
    const ours = iamFlagInputs(
      'azure',
      await parse(['azure', '--subscription', 'sub-1', '--resource-group', 'rg-1', '--location', 'westeurope']),
    );
    assert.deepEqual(ours.inputs, {
      subscription: 'sub-1',
      location: 'westeurope',
      resourceGroup: 'rg-1',
      tenant: undefined,
      identityName: undefined,
    });
    assert.deepEqual(
      iamFlagInputs('azure', await parse(['azure', '--location', 'westeurope', '--region', 'westeurope'])).inputs
        .location,
      'westeurope',
    );
    assert.throws(
      () => iamFlagInputs('azure', { location: 'westeurope', region: 'eastus' }),
      (err: unknown) => err instanceof UserError && /--location and --region both set the location/.test(err.message),
    );
  });

  it('gcp: --projectID, --zone and the deprecated --serviceAccountID (the prefix)', async () => {
    const flags = await parse([
      'gcp',
      '--projectID',
      'proj-1',
      '--zone',
      'europe-west3-a',
      '--serviceAccountID',
      'demo',
    ]);
    assert.equal(flags.prefix, 'demo');
    assert.deepEqual(iamFlagInputs('gcp', flags).inputs, {
      project: 'proj-1',
      region: undefined,
      zone: 'europe-west3-a',
    });
  });

  it('aws: --prefix and --zone, as upstream', async () => {
    const flags = await parse(['aws', '--prefix', 'demo', '--zone', 'us-east-2a']);
    assert.equal(flags.prefix, 'demo');
    assert.deepEqual(iamFlagInputs('aws', flags).inputs, { region: undefined, zone: 'us-east-2a' });
  });

  it('refuses a flag of another cloud, naming the ones the cloud takes', async () => {
    assert.throws(
      () => iamFlagInputs('aws', { subscription: 'x' }),
      (err: unknown) =>
        err instanceof UserError &&
        /--subscription is not a flag of `iam create aws`/.test(err.message) &&
        /--region, --zone/.test(err.hint ?? ''),
    );
    assert.throws(
      () => iamFlagInputs('gcp', { servicePrincipal: 'x' }),
      /--servicePrincipal is not a flag of `iam create gcp`/,
    );
  });
});
