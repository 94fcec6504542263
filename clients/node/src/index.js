// leaseapi: the Node.js client of the leaseapi lease service, its runner,
// and the integrations of node-cron ('leaseapi/node-cron') and croner
// ('leaseapi/croner').

export { Client, jitter, MAX_BATCH_ITEMS } from './client.js';
export { LeaseApiError, NOT_ACQUIRED } from './errors.js';
export { jsonLogger } from './log.js';
export { decode, formatTime, parseTime, SCHEMAS } from './models.js';
export { defaultOwner, groupFullUntil, RETRIED_REFUSALS, Runner, RunStoppedError } from './runner.js';
export { LeaseCoordinator } from './node-cron.js';
export { leased } from './croner.js';
