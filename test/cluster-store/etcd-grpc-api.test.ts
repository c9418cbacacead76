/**
 * The bundled node program's etcd services (lib/cluster-store/etcd-grpc-api.ts) against what etcd3 makes with
 * @grpc/proto-loader from its own .proto files: every service and method of etcd's API, with the same path,
 * streaming flags and name, and (de)serializers that give the same bytes and objects for a message with every field
 * set.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { grpcServiceDefinitions, methodName } from '../../lib/cluster-store/etcd-grpc-api.js';

// etcd3's own proto-loader and .proto files, with the options etcd3 loads them with (its lib/connection-pool.js).
const etcd3Dir = path.dirname(createRequire(import.meta.url).resolve('etcd3/package.json'));
const protoLoader = createRequire(path.join(etcd3Dir, 'lib', 'index.js'))(
  '@grpc/proto-loader',
) as typeof import('@grpc/proto-loader');
const RPC_PROTO = path.join(etcd3Dir, 'proto', 'rpc.proto');
const OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

/** As scripts/bundle-node-program.mjs makes etcd3/rpc.json. */
function etcdApiJson(): protobuf.INamespace {
  const root = new protobuf.Root();
  root.loadSync(RPC_PROTO, { keepCase: true });
  return JSON.parse(JSON.stringify(root.toJSON())) as protobuf.INamespace;
}

/** A message of `type` with every field set to something other than its default (nested messages two levels deep). */
function sample(type: protobuf.Type, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const seenOneofs = new Set<string>();
  for (const field of type.fieldsArray) {
    field.resolve();
    if (field.partOf) {
      if (seenOneofs.has(field.partOf.name)) continue; // one member of a oneof
      seenOneofs.add(field.partOf.name);
    }
    let value: unknown;
    if (field.resolvedType instanceof protobuf.Type) {
      if (depth >= 2) continue;
      value = sample(field.resolvedType, depth + 1);
    } else if (field.resolvedType instanceof protobuf.Enum) {
      const names = Object.keys(field.resolvedType.values);
      value = names[names.length - 1];
    } else if (field.type === 'string') value = `v-${field.name}`;
    else if (field.type === 'bytes') value = Buffer.from(`b-${field.name}`);
    else if (field.type === 'bool') value = true;
    else if (/int64|fixed64/.test(field.type)) value = '1234567890123';
    else if (field.type === 'double' || field.type === 'float') value = 1.5;
    else value = 7;
    out[field.name] = field.repeated ? [value, value] : value;
  }
  return out;
}

describe('etcd gRPC services for the bundled node program', () => {
  const expected = protoLoader.loadSync(RPC_PROTO, OPTIONS);
  const json = etcdApiJson();
  const actual = grpcServiceDefinitions(json, OPTIONS);
  const root = protobuf.Root.fromJSON(json).resolveAll();
  const expectedServices = Object.entries(expected).filter(([, def]) => !('format' in def)) as [
    string,
    ServiceDefinition,
  ][];

  it('defines the services proto-loader defines, with the same methods', () => {
    assert.ok(expectedServices.length >= 6, 'etcd has KV, Watch, Lease, Cluster, Maintenance and Auth');
    assert.deepEqual(Object.keys(actual).sort(), expectedServices.map(([name]) => name).sort());
    for (const [name, service] of expectedServices) {
      assert.deepEqual(Object.keys(actual[name]!).sort(), Object.keys(service).sort(), name);
    }
  });

  it("gives every method proto-loader's path, streaming flags and name", () => {
    for (const [name, service] of expectedServices) {
      for (const [method, def] of Object.entries(service)) {
        const mine = actual[name]![method]!;
        assert.equal(mine.path, def.path);
        assert.equal(mine.requestStream, def.requestStream, def.path);
        assert.equal(mine.responseStream, def.responseStream, def.path);
        assert.equal(mine.originalName, def.originalName, def.path);
      }
    }
  });

  it('serializes and deserializes every request and response as proto-loader does', () => {
    let checked = 0;
    for (const [name, service] of expectedServices) {
      for (const [method, def] of Object.entries(service) as [string, MethodDefinition<object, object>][]) {
        const mine = actual[name]![method] as MethodDefinition<object, object>;
        const protoMethod = root.lookupService(name).methods[method]!;
        for (const [side, type] of [
          ['request', protoMethod.resolvedRequestType!],
          ['response', protoMethod.resolvedResponseType!],
        ] as const) {
          const message = sample(type);
          const serialize = side === 'request' ? 'requestSerialize' : 'responseSerialize';
          const deserialize = side === 'request' ? 'requestDeserialize' : 'responseDeserialize';
          const bytes = def[serialize](message);
          if (type.fieldsArray.length > 0) assert.ok(bytes.length > 0, `${def.path} ${side}: the sample sets fields`);
          assert.deepEqual(mine[serialize](message), bytes, `${def.path} ${side} bytes`);
          assert.deepEqual(mine[deserialize](bytes), def[deserialize](bytes), `${def.path} ${side} object`);
          checked++;
        }
      }
    }
    assert.ok(checked > 50, `${checked} messages checked`);
  });

  it('refuses an array as a message, as proto-loader does', () => {
    const range = actual['etcdserverpb.KV']!.Range as MethodDefinition<object, object>;
    assert.throws(() => range.requestSerialize([] as unknown as object), /got array instead/);
  });

  it("names methods as lodash's camelCase does", () => {
    assert.equal(methodName('Range'), 'range');
    assert.equal(methodName('LeaseTimeToLive'), 'leaseTimeToLive');
    assert.equal(methodName('HashKV'), 'hashKv');
    assert.equal(methodName('MoveLeader'), 'moveLeader');
  });
});
