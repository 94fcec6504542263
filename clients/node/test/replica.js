// A cron replica for the tests: node-cron (through LeaseCoordinator) or
// croner (through leased) running jobs every second under leaseapi leases.
// Each run appends {jobId, owner, tick, token} to its record file when it
// starts; every exchange of its client goes to a JSON lines file the test
// checks against the spec. It exits 0 on SIGTERM (after a graceful
// shutdown), and by itself after its lifetime.
//
// Usage: node replica.js '<json config>' with {kind: 'node-cron' | 'croner',
// url, token, owner, jobs: [id...], timezone (of the schedule), ttlMs, hold
// (true: a run holds its lease until it is aborted), recordFile,
// exchangesFile, lifetimeMs}.

import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { Cron } from 'croner';
import cron from 'node-cron';

import { Client, jsonLogger, LeaseCoordinator, leased, Runner } from '../src/index.js';

const cfg = JSON.parse(process.argv[2]);
const logger = jsonLogger({ level: 'info' });
const client = new Client(cfg.url, {
  token: cfg.token,
  retryForMs: 2_000,
  logger,
  onExchange: (e) => appendFileSync(cfg.exchangesFile, JSON.stringify(e) + '\n'),
});
const runner = new Runner(client, { owner: cfg.owner, ttlMs: cfg.ttlMs, logger, owedPollIntervalMs: 0 });
const SCHEDULE = '* * * * * *';

async function job({ jobId, tick, token, signal }) {
  appendFileSync(cfg.recordFile, JSON.stringify({ jobId, owner: cfg.owner, tick: tick.toISOString(), token }) + '\n');
  if (cfg.hold) {
    // Hold the lease (heartbeating) until the runner aborts the job.
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    return;
  }
  await sleep(100, undefined, { signal });
}

const stops = [];
if (cfg.kind === 'node-cron') {
  const coordinator = new LeaseCoordinator(runner);
  for (const id of cfg.jobs) {
    const task = coordinator.schedule(cron, SCHEDULE, id, job, { timezone: cfg.timezone });
    stops.push(() => task.stop());
  }
} else if (cfg.kind === 'croner') {
  for (const id of cfg.jobs) {
    const c = new Cron(SCHEDULE, { timezone: cfg.timezone }, leased(runner, { job: id }, job));
    stops.push(() => c.stop());
  }
} else {
  throw new Error(`unknown kind ${cfg.kind}`);
}
logger.info('replica started', { kind: cfg.kind, owner: cfg.owner, jobs: cfg.jobs.join(',') });

let stopping = false;
async function stop(why) {
  if (stopping) {
    return;
  }
  stopping = true;
  logger.info('replica stopping', { owner: cfg.owner, why });
  for (const s of stops) {
    await s();
  }
  await runner.shutdown();
  client.close();
  process.exit(0);
}
process.on('SIGTERM', () => stop('SIGTERM'));
setTimeout(() => stop('lifetime over'), cfg.lifetimeMs).unref();
// Keeps the process alive until it is stopped (the cron timers may be unref'd).
setInterval(() => {}, 60_000);
