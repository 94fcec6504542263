// croner backed by leaseapi: leased() wraps a croner callback so that each
// tick runs once across every process that schedules it.

/**
 * Wraps `fn` as a croner callback run under the lease of `options.job`:
 *
 *     new Cron('0 7 * * *', { timezone: 'Europe/Berlin' }, leased(runner, { job: 'nightly-report' }, async ({ signal, token }) => { ... }));
 *
 * At each fire the runner acquires the lease for the fire time (the
 * Cron's newest target at or before the moment it called back, the same on
 * every process whatever its delay), sending the schedule:
 * `options.schedule`, else the Cron's pattern and timezone (as CRON_TZ=).
 * A Cron that cannot say its fire time lets leaseapi pick the tick of the
 * schedule nearest its clock (`nearestTick`). `fn` gets {signal, lease, token, tick,
 * jobId, owner, cron, context}. The callback resolves to the run's report
 * (see Runner.run) and never rejects: failures are logged and reported.
 * Other options (`graceMs`, `catchUp`, `catchUpWindowMs`, `group`,
 * `maxRunTimeMs`) go to the runner; the job's owed ticks are polled too.
 */
export function leased(runner, { job, schedule, ...runOptions } = {}, fn) {
  if (typeof job !== 'string' || job === '') {
    throw new TypeError('leased needs options.job, the job id');
  }
  if (typeof fn !== 'function') {
    throw new TypeError('leased needs the job function');
  }
  let spec = schedule;
  runner.watchOwed(job, (ctx) => fn({ ...ctx, cron: undefined, context: undefined }), { ...runOptions, schedule });
  return async (cron, context) => {
    spec ??= scheduleOf(cron);
    try {
      const tick = fireTime(cron);
      const at = tick === undefined ? { nearestTick: true } : { tick };
      return await runner.run(job, (ctx) => fn({ ...ctx, cron, context }), { ...runOptions, schedule: spec, ...at });
    } catch (err) {
      runner.log.error('croner tick not run', { job_id: job, owner: runner.owner, error: err });
      return { jobId: job, owner: runner.owner, result: 'error', error: err };
    }
  };
}

// croner calls back at or after its target, never before, and says when
// (currentRun); the target is the newest match before that instant + 1 ms.
function fireTime(cron) {
  const called = cron?.currentRun?.();
  if (!(called instanceof Date)) {
    return undefined;
  }
  const [target] = cron.previousRuns?.(1, new Date(called.getTime() + 1)) ?? [];
  return target instanceof Date ? target : undefined;
}

function scheduleOf(cron) {
  const pattern = cron?.getPattern?.();
  if (typeof pattern !== 'string') {
    throw new TypeError('leased: the Cron has no pattern (a one-off date?): pass options.schedule');
  }
  if (cron.options?.utcOffset !== undefined) {
    throw new TypeError('leased: a Cron with utcOffset has no CRON_TZ spelling: pass options.schedule');
  }
  return cron.options?.timezone ? `CRON_TZ=${cron.options.timezone} ${pattern}` : pattern;
}
