/** host:port handling for the endpoints the metadata hands out (a load balancer may come with or without a port). */
import { bindAddress } from './atls/server.js';

/** `endpoint` as host:port, with `port` added when it has none (IPv6 addresses get brackets). */
export function withPort(endpoint: string, port: number): string {
  if (/^\[.*\]:\d+$/.test(endpoint) || /^[^:]+:\d+$/.test(endpoint)) return endpoint;
  return bindAddress(endpoint, port);
}
