/** host:port handling for the endpoints the metadata hands out (a load balancer may come with or without a port). */

/** `endpoint` as host:port, with `port` added when it has none (IPv6 addresses get brackets). */
export function withPort(endpoint: string, port: number): string {
  if (/^\[.*\]:\d+$/.test(endpoint) || /^[^:]+:\d+$/.test(endpoint)) return endpoint;
  return endpoint.includes(':') ? `[${endpoint}]:${port}` : `${endpoint}:${port}`;
}

/** The address a gRPC server binds: host:port, IPv6 hosts in brackets. */
export function bindAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
