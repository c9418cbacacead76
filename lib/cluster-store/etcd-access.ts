/**
 * Access control of the etcd cluster store (docs/workflows/high-availability.md#who-may-read-and-write-the-store):
 * etcd's own authentication with `--client-cert-auth`, where the common name of a client certificate is the etcd user
 * (https://etcd.io/docs/v3.4/op-guide/authentication/). Without it, any certificate of the cluster's etcd CA — a
 * member's peer or server certificate included — reads the master secret and writes the measurements.
 *
 *   user                        role                       may
 *   root, constellation-admin   root                       everything: the CLI (upgrades write measurements,
 *                                                          scale-in removes members), and a control plane for the
 *                                                          moment it changes membership (a short-lived certificate
 *                                                          it makes in memory from the etcd CA)
 *   constellation-joinservice   constellation-joinservice  read the join configuration; read and write disk claims,
 *                                                          node records and the Kubernetes upgrade record
 *   anything else (a member's   none                       nothing: etcd refuses every request
 *   peer or server certificate)
 *
 * The join configuration is written once at init, before access control goes on; after that only root writes it.
 * enableAccessControl is idempotent (a retried init runs it again).
 */
import type { Etcd3 } from 'etcd3';
import { ENTRY, JOIN_CONFIG_PREFIX, NODES_PREFIX } from './entries.js';
import { STORE_PREFIX as PREFIX } from './etcd.js';

/** The etcd user of the CLI's certificate (constellation-store.json). */
export const ETCD_ADMIN_USER = 'constellation-admin';
/** etcd needs a user named root with the root role before it turns authentication on. */
export const ETCD_ROOT_USER = 'root';
/** The etcd user (and role) of every control plane's join service and upgrade follower. */
export const ETCD_JOIN_SERVICE_USER = 'constellation-joinservice';

type Grant = { permission: 'Read' | 'Readwrite'; prefix: string } | { permission: 'Read' | 'Readwrite'; key: string };

/** What a join service may do: tickets need the join configuration, disk claims and node records; upgrades their record. */
export const JOIN_SERVICE_GRANTS: readonly Grant[] = [
  { permission: 'Read', prefix: `${PREFIX}${JOIN_CONFIG_PREFIX}` },
  { permission: 'Readwrite', prefix: `${PREFIX}${ENTRY.disk('')}` },
  { permission: 'Readwrite', prefix: `${PREFIX}${NODES_PREFIX}` },
  { permission: 'Readwrite', key: `${PREFIX}${ENTRY.kubernetesUpgrade}` },
];

/**
 * Creates the users and roles above (what exists already is kept) and turns etcd's authentication on (etcd ignores
 * that when it is on already). `client` acts as root (or as anyone, before authentication is on).
 */
export async function enableAccessControl(client: Etcd3): Promise<void> {
  const { Range, EtcdRoleExistsError, EtcdUserExistsError } = await import('etcd3');
  // Three rounds of consensus, each of requests that do not depend on each other (etcd commits what arrives at once
  // together): what exists already (a retried init) is not looked up first, its "already exists" is taken as done.
  const existed = (kind: new (...args: never[]) => Error) => (err: unknown) => {
    if (!(err instanceof kind)) throw err;
  };
  await Promise.all([
    ...['root', ETCD_JOIN_SERVICE_USER].map((name) =>
      client.role(name).create().then(undefined, existed(EtcdRoleExistsError)),
    ),
    // No password: these users authenticate only by the common name of a certificate of the etcd CA.
    ...[ETCD_ROOT_USER, ETCD_ADMIN_USER, ETCD_JOIN_SERVICE_USER].map((name) =>
      client.auth.userAdd({ name, options: { no_password: true } }).then(undefined, existed(EtcdUserExistsError)),
    ),
  ]);
  const memberships: Array<[string, string]> = [
    [ETCD_ROOT_USER, 'root'],
    [ETCD_ADMIN_USER, 'root'],
    [ETCD_JOIN_SERVICE_USER, ETCD_JOIN_SERVICE_USER],
  ];
  await Promise.all([
    client
      .role(ETCD_JOIN_SERVICE_USER)
      .grant(
        JOIN_SERVICE_GRANTS.map((g) =>
          'prefix' in g
            ? { permission: g.permission, range: Range.prefix(g.prefix) }
            : { permission: g.permission, key: g.key },
        ),
      ),
    ...memberships.map(([user, role]) => client.user(user).addRole(role)),
  ]);
  await client.auth.authEnable();
}
