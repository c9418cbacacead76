/**
 * The join service's answer to the standard gRPC health check (proto/grpc/health/v1/health.proto), on its own port:
 * SERVING while the cluster store answers a read of the join configuration (what every join needs first),
 * NOT_SERVING while it cannot (no quorum, or no answer within the timeout). The join service's name or "" are the
 * services it knows; any other name is NOT_FOUND, as the protocol says. Watch is not offered (UNIMPLEMENTED).
 */
import { status, type sendUnaryData, type ServerUnaryCall, type UntypedServiceImplementation } from '@grpc/grpc-js';
import type { ClusterStore } from '../lib/cluster-store/types.js';
import type { Logger } from '../lib/logging/index.js';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthService,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from '../proto/gen/grpc/health/v1/health.js';

export const JOIN_SERVICE_NAME = 'constellation.join.v1.JoinService';
const STORE_TIMEOUT_MS = 2_000;

export function joinServiceHealth(
  store: ClusterStore,
  logger: Logger,
  timeoutMs = STORE_TIMEOUT_MS,
): { service: typeof HealthService; implementation: UntypedServiceImplementation } {
  const check = async (
    call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>,
    callback: sendUnaryData<HealthCheckResponse>,
  ) => {
    if (call.request.service !== '' && call.request.service !== JOIN_SERVICE_NAME) {
      callback({
        code: status.NOT_FOUND,
        details: `unknown service ${JSON.stringify(call.request.service.slice(0, 100))}`,
      });
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the cluster store did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([store.readJoinConfig(), timeout]);
      callback(null, { status: ServingStatus.SERVING });
    } catch (err) {
      logger.warn('health check: not serving', { reason: (err as Error).message });
      callback(null, { status: ServingStatus.NOT_SERVING });
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    service: HealthService,
    implementation: {
      check: (
        call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>,
        callback: sendUnaryData<HealthCheckResponse>,
      ) => void check(call, callback),
    },
  };
}
