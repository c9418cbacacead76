/** The real evidence and reference vectors of test/testdata/ (see its README for where each file comes from). */
import path from 'node:path';
import { REPO_ROOT } from './cli.js';

export const TESTDATA = path.join(REPO_ROOT, 'test/testdata');
