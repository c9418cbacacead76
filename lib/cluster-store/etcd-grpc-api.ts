/**
 * etcd's gRPC services as the etcd3 package defines them, for the bundled node program (scripts/bundle-node-program.mjs
 * makes etcd3 call this instead of @grpc/proto-loader): from etcd's API parsed at build time (protobufjs JSON), each
 * method with the path, streaming flags, name and (de)serializers that @grpc/proto-loader gives it, with the same
 * options. What it leaves out is what only gRPC reflection reads: proto-loader also makes a descriptor of every
 * message and enum and encodes every file's descriptor, at once: 55-65 ms here against 15-20 ms for the services
 * alone, on a control plane's path to answering the CLI's init call (docs/workflows/mini.md, "How long it takes").
 * Written here because no package builds a service-only definition; its equality with proto-loader's, method by
 * method, is tested (test/cluster-store/etcd-grpc-api.test.ts).
 */
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';

/** proto-loader's conversion options that affect (de)serialization (etcd3 passes keepCase, longs, enums, defaults, oneofs). */
export type ConversionOptions = protobuf.IConversionOptions & { keepCase?: boolean };

/** A method's name as proto-loader gives it to grpc-js (lodash's camelCase): RangeRequest's Range → range, HashKV → hashKv. */
export function methodName(name: string): string {
  const words = name.match(/[A-Z]{2,}(?=[A-Z][a-z]|\d|$)|[A-Z]?[a-z]+|[A-Z]+|\d+/g) ?? [name];
  return words.map((w, i) => (i === 0 ? w.toLowerCase() : w[0]!.toUpperCase() + w.slice(1).toLowerCase())).join('');
}

/** The package definition of every service in `json` (a protobufjs Root's toJSON()), keyed by full name. */
export function grpcServiceDefinitions(
  json: protobuf.INamespace,
  options: ConversionOptions,
): Record<string, ServiceDefinition> {
  const root = protobuf.Root.fromJSON(json);
  root.resolveAll();
  const services: Record<string, ServiceDefinition> = {};
  const visit = (namespace: protobuf.NamespaceBase, prefix: string) => {
    for (const nested of namespace.nestedArray) {
      const name = prefix ? `${prefix}.${nested.name}` : nested.name;
      if (nested instanceof protobuf.Service) services[name] = serviceDefinition(nested, name, options);
      else if (nested instanceof protobuf.Namespace) visit(nested, name);
    }
  };
  visit(root, '');
  return services;
}

function serviceDefinition(service: protobuf.Service, name: string, options: ConversionOptions): ServiceDefinition {
  const methods: Record<string, MethodDefinition<object, object>> = {};
  for (const method of service.methodsArray) {
    const request = method.resolvedRequestType!;
    const response = method.resolvedResponseType!;
    methods[method.name] = {
      path: `/${name}/${method.name}`,
      requestStream: !!method.requestStream,
      responseStream: !!method.responseStream,
      requestSerialize: serializer(request),
      requestDeserialize: deserializer(request, options),
      responseSerialize: serializer(response),
      responseDeserialize: deserializer(response, options),
      originalName: methodName(method.name),
    };
  }
  return methods;
}

// As proto-loader's createSerializer and createDeserializer.
function serializer(type: protobuf.Type): (value: object) => Buffer {
  return (value) => {
    if (Array.isArray(value))
      throw new Error(`Failed to serialize message: expected object with ${type.name} structure, got array instead`);
    return type.encode(type.fromObject(value)).finish() as Buffer;
  };
}

function deserializer(type: protobuf.Type, options: ConversionOptions): (bytes: Buffer) => object {
  return (bytes) => type.toObject(type.decode(bytes), options);
}
