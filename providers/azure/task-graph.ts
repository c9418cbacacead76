/**
 * Moved to ../common/task-graph.ts (one task runner for every cloud provider). This re-export remains only because
 * bench/create-azure.bench.ts imports criticalPath from here; delete it once the bench imports from providers/common.
 */
export { criticalPath } from '../common/task-graph.js';
