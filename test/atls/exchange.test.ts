import { exchangeSuite } from './support/exchange-suite.js';
import { hasSwtpm, openAttestationKit } from './support/kits.js';

// swtpm is a Debian package `npm test` installs (scripts/ensure-system-deps.sh); without it the same cases run
// against the software attester, so the channel logic is still covered.
describe(`attested exchange (${hasSwtpm() ? 'swtpm-backed local-vtpm node' : 'software attester: swtpm is not installed'})`, () => {
  exchangeSuite(openAttestationKit);
});
