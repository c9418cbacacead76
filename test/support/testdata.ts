/** The repository's own test data (test/testdata/, see its README): evidence and vectors the tests and benchmarks read. */
import path from 'node:path';
import { REPO_ROOT } from './cli.js';

export const TESTDATA = path.join(REPO_ROOT, 'test/testdata');
