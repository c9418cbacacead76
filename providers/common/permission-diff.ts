/**
 * `iam upgrade apply` (docs/workflows/iam.md#upgrading-the-identities): what an identity has against what this CLI's
 * nodes need, as the permissions to add and to remove. Shared by the clouds' IamProvisioner.upgrade.
 */
import type { IamPermissionChange } from '../contract.js';

/** The change for `identity`, or undefined when it has exactly the wanted permissions (order does not matter). */
export function permissionChange(
  identity: string,
  has: readonly string[],
  wants: readonly string[],
): IamPermissionChange | undefined {
  const present = new Set(has);
  const wanted = new Set(wants);
  const add = [...wanted].filter((p) => !present.has(p)).sort();
  const remove = [...present].filter((p) => !wanted.has(p)).sort();
  return add.length || remove.length ? { identity, add, remove } : undefined;
}
