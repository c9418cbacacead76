// Mocha's spec reporter plus one closing line in the plain form CI reads: "N passed, N failed, N skipped".
const Mocha = require('mocha');

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once('end', () => {
      const s = runner.stats;
      process.stdout.write(`${s.passes} passed, ${s.failures} failed, ${s.pending} skipped\n`);
    });
  }
}
module.exports = SpecWithSummary;
