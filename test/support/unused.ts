/**
 * A collaborator a test says its subject must not use: any method called on it fails the test, naming the
 * collaborator and the method. It replaces `{} as Issuer`, which hides a dependency until it throws a TypeError far
 * from the cause. `known` gives the members the test does provide (a partial fake: `{ uuid }` of a state disk);
 * every other member fails when called. (`then` reads as undefined, so an `await` on the fake is no use of it.)
 */
import assert from 'node:assert/strict';

export function unused<T>(what: string, known: Partial<T> = {}): T {
  return new Proxy(known as object, {
    get: (target, key) =>
      Object.hasOwn(target, key)
        ? (target as Record<PropertyKey, unknown>)[key]
        : key === 'then'
          ? undefined
          : () => assert.fail(`${what}.${String(key)} must not be used`),
  }) as T;
}
