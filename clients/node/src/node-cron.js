// node-cron (>= 4.4) run coordination backed by leaseapi: one run of each
// task per fire time across every process that schedules it.

import { RunStoppedError } from './runner.js';

// node-cron's coordinator key: `${task name}:${fire time as toISOString()}`.
const KEY = /^(.+):(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)$/;

/**
 * A node-cron RunCoordinator backed by a leaseapi Runner.
 *
 * node-cron asks shouldRun(`${name}:${fireTime}`) before each run of a
 * `distributed` task; this acquires the lease of the job named `name` for
 * that fire time (sending the task's schedule), starts heartbeating, and
 * answers true on this process only. The task runs with an AbortSignal
 * aborted on lease loss; its lease is released succeeded or failed by how it
 * ended. Schedule tasks with schedule(), which wraps the task and registers
 * its schedule and owed-tick polling:
 *
 *     const coordinator = new LeaseCoordinator(runner);
 *     coordinator.schedule(cron, '0 7 * * *', 'nightly-report', async ({ signal, token }) => { ... });
 */
export class LeaseCoordinator {
  #runner;
  #tasks = new Map();
  #grants = new Map();

  constructor(runner) {
    this.#runner = runner;
  }

  /**
   * Schedules `fn` with node-cron (`cron`: the node-cron module or its
   * default export) as the distributed task `name`, which is also the job
   * id (or `options.jobId`). `fn` gets node-cron's context plus `signal`,
   * `lease`, `token` and `tick`. Options: node-cron's TaskOptions
   * (`timezone` becomes the schedule's CRON_TZ=), and `graceMs`, `catchUp`,
   * `catchUpWindowMs`, `group` (the job's concurrency group),
   * `maxRunTimeMs` for the runner. Returns node-cron's
   * ScheduledTask.
   */
  schedule(cron, expression, name, fn, options = {}) {
    const { jobId = name, graceMs, catchUp, catchUpWindowMs, group, maxRunTimeMs, ...taskOptions } = options;
    if (typeof name !== 'string' || name === '') {
      throw new TypeError('a leased node-cron task needs a name (its job id unless options.jobId is given)');
    }
    const schedule = taskOptions.timezone ? `CRON_TZ=${taskOptions.timezone} ${expression}` : expression;
    const runOptions = { schedule, graceMs, catchUp, catchUpWindowMs, group, maxRunTimeMs };
    this.#tasks.set(name, { jobId, runOptions });
    this.#runner.watchOwed(jobId, (ctx) => fn({ ...ctx, date: ctx.tick, dateLocalIso: ctx.tick.toISOString(), triggeredAt: new Date(), reason: 'owed' }), runOptions);
    return cron.schedule(expression, (context) => this.#runTask(name, fn, context), {
      ...taskOptions,
      name,
      distributed: true,
      runCoordinator: this,
      distributedLease: this.#runner.ttlMs,
    });
  }

  /** node-cron's question: may this process run the task of `key`? Acquires the lease of that fire time. */
  async shouldRun(key) {
    const m = KEY.exec(key);
    if (m === null) {
      throw new Error(`node-cron coordinator key ${JSON.stringify(key)} is not "name:fire time": give the task a name`);
    }
    const [, name, fireTime] = m;
    const task = this.#tasks.get(name) ?? { jobId: name, runOptions: {} };
    let grant;
    try {
      grant = await this.#runner.acquire(task.jobId, { ...task.runOptions, tick: new Date(fireTime) });
    } catch (err) {
      if (err instanceof RunStoppedError) {
        return false; // shutting down: no new runs
      }
      throw err; // node-cron logs it and skips the run (fail-closed)
    }
    if (grant.result === 'skipped') {
      return false;
    }
    this.#grants.set(key, grant);
    return true;
  }

  /** node-cron's notice that the run of `key` ended: gives back a lease whose task did not run. */
  async onComplete(key) {
    const grant = this.#grants.get(key);
    if (grant === undefined) {
      return;
    }
    this.#grants.delete(key);
    await grant.abandon('node-cron did not run the task');
  }

  async #runTask(name, fn, context) {
    const key = `${name}:${context.date.toISOString()}`;
    const grant = this.#grants.get(key);
    const job = (ctx) => fn({ ...context, ...ctx });
    // A run node-cron did not coordinate (task.execute()) runs under the
    // job's lease with no tick: a plain mutex.
    const report = grant === undefined ? await this.#runner.run(this.#tasks.get(name).jobId, job) : await grant.execute(job);
    if (report.result === 'skipped' || report.result === 'succeeded') {
      return report.value;
    }
    // node-cron reports the failure (execution:failed).
    throw report.error;
  }
}
