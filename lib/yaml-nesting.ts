/**
 * A guard in front of the `yaml` package's parser: flow collections nested some thousand levels deep (`[[[[…`) make
 * it recurse until V8 aborts the whole process, a fatal error that no catch sees (the state-yaml fuzz target found
 * it: 1,600 open braces in a 1.7 KB file). Deep block nesting the parser refuses itself (RESOURCE_EXHAUSTION).
 * The guard runs yaml's own lexer, which is linear and does not recurse, so it counts open flow collections exactly
 * as the parser would see them (brackets in quoted scalars and comments do not count).
 */
import { Lexer } from 'yaml';

/** More than any file constellation reads needs (they nest a few levels). */
export const MAX_FLOW_NESTING = 64;

/** Why `text` must not reach the YAML parser (its flow collections nest too deep), or undefined. */
export function yamlNestingProblem(text: string): string | undefined {
  let depth = 0;
  for (const token of new Lexer().lex(text)) {
    if (token === '[' || token === '{') {
      if (++depth > MAX_FLOW_NESTING)
        return `it nests flow collections ([ ] and { }) more than ${MAX_FLOW_NESTING} levels deep`;
    } else if (token === ']' || token === '}') {
      depth = Math.max(0, depth - 1);
    }
  }
  return undefined;
}
