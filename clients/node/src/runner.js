// The runner: a job run under a lease, with heartbeats, a local deadline,
// an AbortSignal, release by result, and owed-tick polling. It behaves as
// the Go runner (package jobs) does.

import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

import { checkOwner, jitter, MAX_BATCH_ITEMS, retrying } from './client.js';
import { LeaseApiError, NOT_ACQUIRED } from './errors.js';
import { jsonLogger } from './log.js';
import { formatTime } from './models.js';

/**
 * Codes of a refused acquire that are retried after their Retry-After, with
 * jitter, instead of skipping the tick at once: `group_full` (every slot of
 * the job's concurrency group is in use), retried while the tick is within
 * its grace (see groupFullUntil); then the tick is skipped.
 */
export const RETRIED_REFUSALS = new Set(['group_full']);

/**
 * Until when (epoch milliseconds) an acquire refused `group_full` is
 * retried: the tick plus its grace (`graceMs` given, else the grace the
 * refusal's lease holds), never past that lease's next tick. Without a
 * tick (nearestTick) the grace counts from `now`, the first refusal;
 * without a grace the acquire is retried for `acquireWaitMs`.
 */
export function groupFullUntil({ tick, graceMs, refusal, now, acquireWaitMs }) {
  const lease = refusal.lease;
  const grace = graceMs ?? lease?.graceMs ?? undefined;
  if (grace === undefined || grace === null) {
    return now + acquireWaitMs;
  }
  let until = (tick instanceof Date ? tick.getTime() : now) + grace;
  if (lease?.nextTick instanceof Date && lease.nextTick.getTime() < until) {
    until = lease.nextTick.getTime();
  }
  return until;
}

/** Why the runner aborted a job's signal (`signal.reason`). */
export class RunStoppedError extends Error {
  /**
   * `reason` is `lease_lost` (revoked, or expired and taken over: `cause`
   * is the heartbeat's LeaseApiError), `deadline` (the local deadline passed
   * without a successful heartbeat), `max_run_time`, `shutdown` or
   * `abandoned` (the job did not return after it was told to stop).
   */
  constructor(reason, message, cause) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'RunStoppedError';
    this.reason = reason;
  }
}

/** `<hostname>/<pid>`: unique per process, so each process is its own owner. */
export function defaultOwner() {
  const host = [...os.hostname()].filter((c) => c >= '!' && c <= '~').join('').slice(0, 100) || 'host';
  return `${host}/${process.pid}`;
}

/**
 * Runs jobs under leaseapi leases; one per process is enough.
 *
 * Options: `owner` (this replica, 1-128 printable ASCII characters without
 * spaces; default defaultOwner()), `ttlMs` (the TTL of every grant and
 * heartbeat, default 30 s: how long a replica that died keeps a job from
 * running), `heartbeatIntervalMs` (default TTL/3, at most TTL/2),
 * `marginMs` (taken off the local deadline, default TTL/10, at most TTL/4),
 * `requestTimeoutMs` (default the heartbeat interval), `acquireWaitMs`
 * (how long an acquire is retried while leaseapi answers 429/503 or
 * nothing, default 10 s), `owedPollIntervalMs` (how often the jobs
 * registered with watchOwed() ask what they owe, jittered; default 10 s,
 * 0 for never), `logger` and `batch` (default true: see below; false sends
 * one request per call).
 *
 * The acquires that the runners of one Client issue in one turn of the
 * event loop go together as one POST /acquire (at most 1000, one per job),
 * and so do their heartbeats (POST /heartbeat): the jobs that fire at one
 * tick take one request, not one each. A call alone goes as its single
 * call. Each run gets what its single call would have: the same lease or
 * error, retried the same way. A leaseapi that answers the batch routes 404
 * or 405 (a version without them) gets single calls from then on.
 */
export class Runner {
  #running = new Map();
  #shuttingDown = false;
  #owedJobs = new Map();
  #owedTimer;
  // Aborted by shutdown: ends the waits before retrying group_full.
  #shutdown = new AbortController();

  constructor(client, { owner = defaultOwner(), ttlMs = 30_000, heartbeatIntervalMs, marginMs, requestTimeoutMs, acquireWaitMs = 10_000, owedPollIntervalMs = 10_000, logger, batch = true } = {}) {
    this.client = client;
    this.batch = batch;
    this.owner = checkOwner(owner);
    if (!Number.isInteger(ttlMs) || ttlMs < 1) {
      throw new RangeError(`ttlMs ${ttlMs} must be a whole number of milliseconds of at least 1`);
    }
    this.ttlMs = ttlMs;
    this.heartbeatIntervalMs = heartbeatIntervalMs ?? ttlMs / 3;
    if (!(this.heartbeatIntervalMs > 0 && this.heartbeatIntervalMs <= ttlMs / 2)) {
      throw new RangeError(`heartbeatIntervalMs ${this.heartbeatIntervalMs} must be above zero and at most ttlMs/2 (${ttlMs / 2})`);
    }
    this.marginMs = marginMs ?? ttlMs / 10;
    if (!(this.marginMs >= 0 && this.marginMs <= ttlMs / 4)) {
      throw new RangeError(`marginMs ${this.marginMs} must not be negative and at most ttlMs/4 (${ttlMs / 4})`);
    }
    this.requestTimeoutMs = requestTimeoutMs ?? this.heartbeatIntervalMs;
    this.acquireWaitMs = acquireWaitMs;
    this.owedPollIntervalMs = owedPollIntervalMs;
    for (const [name, v] of Object.entries({ requestTimeoutMs: this.requestTimeoutMs, acquireWaitMs, owedPollIntervalMs })) {
      if (!Number.isFinite(v) || v < 0 || (name === 'requestTimeoutMs' && v === 0)) {
        throw new RangeError(`${name} ${v} must be a number of milliseconds above zero`);
      }
    }
    this.log = logger ?? jsonLogger();
  }

  /**
   * Runs `fn({signal, lease, token, slot, slotToken, tick, jobId, owner})`
   * once under the lease of `jobId` and resolves to a report of how the run
   * ended: {jobId, owner, token, slot, slotToken, tick, startedAt, endedAt,
   * result, error, releaseError, value}, `result` being `succeeded` (fn resolved and the
   * release was acknowledged: the tick is done), `failed` (fn threw, or was
   * stopped by its max run time or shutdown; released failed) or `lost`
   * (the lease was lost before fn finished, or a succeeded run's release was
   * not acknowledged).
   *
   * A refused acquire is a quiet skip, not an error: the report is
   * {jobId, owner, result: 'skipped', code, error} with `code` lease_held
   * (another replica runs it, or this process runs the job already),
   * tick_done (it ran), job_paused, tick_ahead (this host's clock is fast:
   * logged as a warning), too_soon (the job's previous run started less
   * than `minIntervalMs` ago) or group_full (the job's concurrency group stayed
   * full while the tick was within its grace: the acquire is retried after
   * each refusal's Retry-After, with jitter, until then). Other failures of
   * the acquire reject.
   *
   * Options: `tick` (a Date: the fire time), `nearestTick` (the server picks
   * the tick of `schedule`), `schedule`, `graceMs`, `catchUp`,
   * `catchUpWindowMs`, `group` (the job's concurrency group; `''` takes it
   * out; sent with the acquire), `minIntervalMs` (the least time between
   * two runs of the job, by the server's clock: for a job run without a
   * tick on hosts whose clocks differ), `maxRunTimeMs`. In a group, `slot` and
   * `slotToken` are the group's slot the grant took and its fencing token
   * (strictly increasing per group); null outside a group.
   */
  async run(jobId, fn, options = {}) {
    const grant = await this.acquire(jobId, options);
    return grant.result === 'skipped' ? grant : grant.execute(fn);
  }

  /**
   * The first half of run(): acquires the lease and starts heartbeating.
   * Resolves to a skip report (see run) or to a grant whose execute(fn)
   * runs the job and resolves to its report, and whose abandon() gives the
   * lease back (released failed) without running it. For integrations whose
   * library asks "may I run?" before it runs the job (node-cron).
   */
  async acquire(jobId, { tick, nearestTick, schedule, graceMs, catchUp, catchUpWindowMs, group, minIntervalMs, maxRunTimeMs } = {}) {
    if (maxRunTimeMs !== undefined && !(maxRunTimeMs > 0)) {
      throw new RangeError('maxRunTimeMs must be above zero');
    }
    const attrs = { job_id: jobId, owner: this.owner, ...(tick ? { tick: formatTime(tick) } : {}) };
    if (this.#shuttingDown) {
      throw new RunStoppedError('shutdown', 'runner is shutting down: no new runs');
    }
    if (this.#running.has(jobId)) {
      // leaseapi would grant this owner the lease again as an idempotent
      // retry: one process must not run a job twice at once.
      this.log.debug('tick skipped: the job runs in this process already', attrs);
      return skip(jobId, this.owner, 'lease_held', undefined);
    }
    this.#running.set(jobId, null);
    let sent;
    let lease;
    let until;
    try {
      for (;;) {
        try {
          const item = { jobId, owner: this.owner, ttlMs: this.ttlMs, tick, nearestTick, schedule, graceMs, catchUp, catchUpWindowMs, group, minIntervalMs };
          // The send time of the attempt that got the lease starts the
          // local deadline: the last attempt's, not the first's.
          ({ sent, lease } = await retrying(
            () => (this.batch ? batchersOf(this).acquires.call(item, this.requestTimeoutMs) : acquireSingle(this.client, item, this.requestTimeoutMs)),
            { retryForMs: this.acquireWaitMs, log: this.log, what: `acquire of ${jobId}` },
          ));
          break;
        } catch (err) {
          if (!(err instanceof LeaseApiError) || !RETRIED_REFUSALS.has(err.code)) {
            throw err;
          }
          until ??= groupFullUntil({ tick, graceMs, refusal: err, now: Date.now(), acquireWaitMs: this.acquireWaitMs });
          const retryAfterMs = (err.retryAfter > 0 ? err.retryAfter : 1) * 1000;
          const wait = retryAfterMs + (Math.random() * retryAfterMs) / 4;
          if (Date.now() + wait >= until || this.#shuttingDown) {
            throw err;
          }
          this.log.debug('group full, retrying', { ...attrs, group: err.group?.name, retry_in_ms: Math.round(wait) });
          try {
            await sleep(wait, undefined, { signal: this.#shutdown.signal });
          } catch {
            throw new RunStoppedError('shutdown', 'runner is shutting down: no new runs');
          }
        }
      }
    } catch (err) {
      this.#running.delete(jobId);
      if (err instanceof LeaseApiError && NOT_ACQUIRED.has(err.code)) {
        if (err.code === 'tick_ahead') {
          const fast = err.now ? (Date.now() - err.now.getTime()) / 1000 : undefined;
          this.log.warn("tick skipped: this host's clock is fast; fix it (NTP)", { ...attrs, clock_fast_seconds: fast, server_time: err.now });
        } else {
          this.log.debug('tick skipped', { ...attrs, code: err.code });
        }
        return skip(jobId, this.owner, err.code, err);
      }
      throw err;
    }
    const grant = new Grant(this, lease, sent, maxRunTimeMs, () => this.#running.delete(jobId));
    this.#running.set(jobId, grant);
    if (this.#shuttingDown) {
      grant.stop(new RunStoppedError('shutdown', 'runner is shutting down: the job was not started'));
    }
    return grant;
  }

  /**
   * Registers `fn` to run the ticks `jobId` owes (a catch-up tick, or a
   * manual one: run now): every owedPollIntervalMs (jittered) the runner
   * asks leaseapi what its registered jobs owe (POST /owed) and runs each
   * owed tick with `options` (as run's; `tick` is the owed one), unless the
   * job runs in this process already. The cron integrations register their
   * jobs; the polling timer does not keep the process alive.
   */
  watchOwed(jobId, fn, options = {}) {
    const { nearestTick: _n, tick: _t, ...rest } = options;
    this.#owedJobs.set(jobId, { fn, options: rest });
    if (this.owedPollIntervalMs > 0 && this.#owedTimer === undefined && !this.#shuttingDown) {
      // The first poll comes after a random share of one interval, so that a
      // fleet restarted at once spreads its polls.
      this.#scheduleOwedPoll(Math.random() * this.owedPollIntervalMs);
    }
  }

  #scheduleOwedPoll(wait) {
    this.#owedTimer = setTimeout(async () => {
      await this.pollOwed();
      if (!this.#shuttingDown) {
        this.#scheduleOwedPoll(this.owedPollIntervalMs * 0.8 + Math.random() * this.owedPollIntervalMs * 0.4);
      }
    }, wait);
    this.#owedTimer.unref();
  }

  /**
   * Asks once what the registered jobs owe and starts a claim of each owed
   * tick; resolves when the claims are started (their runs go on). Called
   * by the timer of watchOwed; tests call it directly.
   */
  async pollOwed() {
    const ids = [...this.#owedJobs.keys()];
    const claims = [];
    for (let i = 0; i < ids.length; i += 1000) {
      const batch = ids.slice(i, i + 1000);
      let answer;
      try {
        answer = await this.client.owed(batch, { retryForMs: 0, timeoutMs: this.requestTimeoutMs });
      } catch (err) {
        this.log.warn('owed ticks not polled', { owner: this.owner, jobs: batch.length, error: err });
        continue;
      }
      for (const o of answer.owed) {
        const job = this.#owedJobs.get(o.jobId);
        if (job === undefined || this.#running.has(o.jobId) || this.#shuttingDown) {
          continue;
        }
        if (o.tick === null) {
          this.log.error('owed tick skipped: its time is unreadable', { job_id: o.jobId, owner: this.owner, error: o.fieldErrors.tick });
          continue;
        }
        this.log.debug('claiming owed tick', { job_id: o.jobId, owner: this.owner, tick: o.tick, reason: o.reason });
        claims.push(
          this.run(o.jobId, job.fn, { ...job.options, tick: o.tick }).catch((err) => {
            this.log.warn('owed tick not claimed', { job_id: o.jobId, owner: this.owner, tick: o.tick, error: err });
          }),
        );
      }
    }
    return claims;
  }

  /**
   * Takes no new runs, stops owed polling and aborts the running jobs
   * (reason `shutdown`); each is released failed when it returns (its tick
   * may run again elsewhere). Resolves when every run has ended.
   */
  async shutdown() {
    this.#shuttingDown = true;
    this.#shutdown.abort();
    clearTimeout(this.#owedTimer);
    const grants = [...this.#running.values()].filter((g) => g !== null);
    for (const g of grants) {
      g.stop(new RunStoppedError('shutdown', 'runner is shutting down'));
    }
    await Promise.all(grants.map((g) => g.done));
  }
}

function skip(jobId, owner, code, error) {
  return { jobId, owner, result: 'skipped', code, error };
}

// How the lease was lost, if it was: it decides the release.
const NOT_LOST = 'not lost';
const LOST_DEADLINE = 'deadline';
const LOST_CONFLICT = 'conflict';

/**
 * A granted lease between its acquire and its report. The watcher (an
 * async loop) heartbeats, enforces the local deadline and the max run time,
 * and aborts the job's signal when it must stop.
 */
class Grant {
  #r;
  #controller = new AbortController();
  #wake = () => {};
  #job;
  #jobDone = false;
  #stopping = false;
  #giveUpAt = 0;
  #requestedStop;
  #loss = NOT_LOST;
  #cause;
  #validUntil;
  #nextHeartbeat;
  #backoff;
  #start;
  #maxRunTimeMs;
  #onEnd;
  #report;
  #resolveDone;

  constructor(runner, lease, sent, maxRunTimeMs, onEnd) {
    this.#r = runner;
    this.lease = lease;
    this.result = 'granted';
    this.#onEnd = onEnd;
    this.#maxRunTimeMs = maxRunTimeMs;
    this.#start = performance.now();
    this.startedAt = new Date();
    this.#validUntil = this.#validFrom(sent, lease);
    this.#nextHeartbeat = this.#start + runner.heartbeatIntervalMs;
    this.#backoff = runner.heartbeatIntervalMs / 8;
    this.attrs = { job_id: lease.jobId, owner: runner.owner, token: lease.token };
    /** Resolves to the run's report once the lease is released (or lost). */
    this.done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
    runner.log.debug('lease acquired', { ...this.attrs, tick: lease.tick });
    this.#watch();
  }

  /** The AbortSignal of the job: aborted when it must stop, `signal.reason` a RunStoppedError. */
  get signal() {
    return this.#controller.signal;
  }

  #validFrom(sent, lease) {
    // leaseapi set expiresAt = its now + ttl after it received the request,
    // so the lease is ours until at least sent + ttl by our clock.
    const ttl = lease.ttlMs > 0 ? lease.ttlMs : this.#r.ttlMs;
    return sent + ttl - this.#r.marginMs;
  }

  /** Runs fn with the grant's signal and lease, then releases by its result. */
  execute(fn) {
    if (this.#job !== undefined) {
      throw new Error('a grant runs one job');
    }
    if (this.#report !== undefined || this.#stopping || performance.now() >= this.#validUntil) {
      // Stopped before it started (shutdown, the deadline passed while the
      // acquire was answered or the library delayed the job): not run.
      this.#job = Promise.resolve();
      this.#jobReturned(undefined, undefined, false);
      return this.done;
    }
    const ctx = {
      signal: this.signal,
      lease: this.lease,
      token: this.lease.token,
      slot: this.lease.slot ?? null,
      slotToken: this.lease.slotToken ?? null,
      tick: this.lease.tick,
      jobId: this.lease.jobId,
      owner: this.#r.owner,
    };
    this.#job = (async () => fn(ctx))().then(
      (value) => this.#jobReturned(undefined, value, true),
      (err) => this.#jobReturned(err ?? new Error('job rejected without a reason'), undefined, true),
    );
    return this.done;
  }

  /** Gives the lease back without running the job (released failed). */
  abandon(reason = 'the job was not run') {
    if (this.#job === undefined) {
      this.#job = Promise.resolve();
      if (this.#cause === undefined) {
        this.#cause = new Error(reason);
      }
      this.#jobReturned(undefined, undefined, false);
    }
    return this.done;
  }

  /** Asks the watcher to stop the job (shutdown). */
  stop(cause) {
    if (this.#requestedStop === undefined) {
      this.#requestedStop = cause;
    }
    this.#wake();
  }

  #jobReturned(error, value, ran) {
    this.#jobDone = true;
    if (ran) {
      const now = performance.now();
      if (this.#loss !== NOT_LOST || this.#stopping) {
        // Lost or told to stop: that is the cause already.
      } else if (now >= this.#validUntil) {
        // It finished, but after the lease could have passed to another
        // replica: it cannot claim the tick.
        this.#loss = LOST_DEADLINE;
        this.#cause = new RunStoppedError('deadline', 'the job returned after the lease\'s local deadline');
      } else if (error !== undefined) {
        this.#cause = error;
        this.#r.log.warn('job failed', { ...this.attrs, error });
      }
    } else if (this.#cause === undefined && this.#requestedStop === undefined && this.#loss === NOT_LOST && performance.now() >= this.#validUntil) {
      this.#loss = LOST_DEADLINE;
      this.#cause = new RunStoppedError('deadline', 'the acquire was answered after the lease\'s local deadline');
    } else if (this.#cause === undefined) {
      this.#cause = this.#requestedStop ?? new Error('the job was not run');
    }
    this.value = value;
    this.#wake();
  }

  async #watch() {
    const r = this.#r;
    for (;;) {
      if (this.#jobDone) {
        break;
      }
      const now = performance.now();
      if (this.#stopping && now >= this.#giveUpAt) {
        r.log.warn('job abandoned: it did not return after it was told to stop', { ...this.attrs, error: this.#cause });
        this.#cause = new RunStoppedError('abandoned', `${this.#cause.message}; the job did not return after it was told to stop`, this.#cause);
        break;
      }
      if (this.#loss === NOT_LOST && now >= this.#validUntil) {
        this.#loss = LOST_DEADLINE;
        this.#stop(now, new RunStoppedError('deadline', 'lease deadline passed without a successful heartbeat'));
        continue;
      }
      if (!this.#stopping) {
        if (this.#requestedStop !== undefined) {
          this.#stop(now, this.#requestedStop);
          continue;
        }
        if (this.#maxRunTimeMs !== undefined && this.#job !== undefined && now >= this.#start + this.#maxRunTimeMs) {
          this.#stop(now, new RunStoppedError('max_run_time', `job ran longer than its max run time of ${this.#maxRunTimeMs} ms`));
          continue;
        }
        if (now >= this.#nextHeartbeat) {
          await this.#heartbeat(now);
          continue;
        }
      }
      await this.#sleep(this.#nextEvent() - now);
    }
    await this.#finish();
  }

  #sleep(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(done, Math.max(0, ms));
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }

  #nextEvent() {
    if (this.#stopping) {
      return this.#giveUpAt;
    }
    let next = Math.min(this.#validUntil, this.#nextHeartbeat);
    if (this.#maxRunTimeMs !== undefined) {
      next = Math.min(next, this.#start + this.#maxRunTimeMs);
    }
    return next;
  }

  #stop(now, cause) {
    if (this.#stopping) {
      return;
    }
    this.#stopping = true;
    this.#cause = cause;
    // Wait for the job until the lease would lapse anyway; a job that lost
    // its lease already gets the margin to return.
    this.#giveUpAt = this.#validUntil;
    if (this.#loss !== NOT_LOST || now >= this.#giveUpAt) {
      this.#giveUpAt = now + this.#r.marginMs;
    }
    this.#r.log.info('job told to stop', { ...this.attrs, reason: cause.reason, error: cause });
    this.#controller.abort(cause);
    if (this.#job === undefined) {
      // Not started (the library has not called execute yet): nothing to wait for.
      this.#jobDone = true;
    }
  }

  async #heartbeat(now) {
    const r = this.#r;
    const timeoutMs = Math.max(1, Math.min(r.requestTimeoutMs, this.#validUntil - now));
    let lease;
    try {
      const item = { jobId: this.lease.jobId, owner: r.owner, token: this.lease.token, ttlMs: r.ttlMs };
      ({ lease } = await (r.batch ? batchersOf(r).heartbeats.call(item, timeoutMs) : heartbeatSingle(r.client, item, timeoutMs)));
    } catch (err) {
      if (err instanceof LeaseApiError && (err.code === 'lease_lost' || err.code === 'not_found')) {
        // Revoked, or expired and taken over: another replica may run the
        // job now, so this one must stop and has nothing to release.
        this.#loss = LOST_CONFLICT;
        r.log.warn('lease lost', { ...this.attrs, error: err });
        this.#stop(performance.now(), new RunStoppedError('lease_lost', `lease lost: ${err.message}`, err));
        return;
      }
      // Unknown outcome: retry soon; the deadline decides when to give up.
      this.#nextHeartbeat = performance.now() + jitter(this.#backoff);
      this.#backoff = Math.min(2 * this.#backoff, r.heartbeatIntervalMs / 2);
      r.log.warn('heartbeat failed, retrying', { ...this.attrs, error: err });
      return;
    }
    this.#validUntil = Math.max(this.#validUntil, this.#validFrom(now, lease));
    this.#nextHeartbeat = now + r.heartbeatIntervalMs;
    this.#backoff = r.heartbeatIntervalMs / 8;
  }

  async #finish() {
    const r = this.#r;
    const loss = this.#loss;
    let cause = this.#cause;
    let result = loss !== NOT_LOST ? 'lost' : cause !== undefined ? 'failed' : 'succeeded';
    let releaseError;
    if (loss !== LOST_CONFLICT) {
      const outcome = result === 'succeeded' ? 'succeeded' : 'failed';
      // While the lease is ours the release is retried until the deadline;
      // after it, it is sent once in case it still is.
      const retryForMs = loss === NOT_LOST ? Math.max(0, this.#validUntil - performance.now()) : 0;
      try {
        await r.client.release(this.lease.jobId, { owner: r.owner, token: this.lease.token, outcome }, { retryForMs, timeoutMs: r.requestTimeoutMs });
      } catch (err) {
        if (result === 'succeeded') {
          // Not acknowledged: the tick may run again elsewhere.
          result = 'lost';
          cause = err;
        }
        r.log.warn('release failed, the lease expires by its TTL', { ...this.attrs, error: err });
        releaseError = err;
      }
    }
    this.#report = {
      jobId: this.lease.jobId,
      owner: r.owner,
      token: this.lease.token,
      slot: this.lease.slot ?? null,
      slotToken: this.lease.slotToken ?? null,
      tick: this.lease.tick,
      startedAt: this.startedAt,
      endedAt: new Date(),
      result,
      error: result === 'succeeded' ? undefined : cause,
      releaseError,
      value: result === 'succeeded' ? this.value : undefined,
    };
    if (result === 'succeeded') {
      r.log.info('run finished: succeeded', this.attrs);
    } else {
      r.log.info(`run finished: ${result}`, { ...this.attrs, error: cause });
    }
    this.#onEnd();
    // An abandoned job may still be running: its end is no longer awaited.
    this.#resolveDone(this.#report);
  }
}

// The acquire of `item` as a single call, once: its send time and lease.
async function acquireSingle(client, { jobId, ...body }, timeoutMs) {
  const sent = performance.now();
  return { sent, lease: await client.acquire(jobId, body, { retryForMs: 0, timeoutMs }) };
}

// The heartbeat of `item` as a single call, once.
async function heartbeatSingle(client, { jobId, ...body }, timeoutMs) {
  const sent = performance.now();
  return { sent, lease: await client.heartbeat(jobId, body, { retryForMs: 0, timeoutMs }) };
}

// Codes of a batch refused as a whole for what one of its items carries:
// each item goes alone and gets its own answer.
const REFUSED_AS_A_WHOLE = new Set(['invalid_request', 'payload_too_large', 'unsupported_media_type']);

/**
 * One batch route's calls of the runners of one Client: the calls of one
 * turn of the event loop go together (flushed by setImmediate), in
 * batches of at most MAX_BATCH_ITEMS, one item per job (a second call of a
 * job goes in a batch of its own, as it would alone).
 */
class Batcher {
  #batchers;
  #route;
  #send;
  #single;
  #queue = [];

  constructor(batchers, route, send, single) {
    this.#batchers = batchers;
    this.#route = route;
    this.#send = send;
    this.#single = single;
  }

  /** Resolves to {sent, lease} as the single call of `item` would, or rejects with its error. */
  call(item, timeoutMs) {
    if (this.#batchers.singleOnly) {
      return this.#single(this.#batchers.client, item, timeoutMs);
    }
    return new Promise((resolve, reject) => {
      if (this.#queue.length === 0) {
        setImmediate(() => this.#flush());
      }
      this.#queue.push({ item, timeoutMs, resolve, reject });
    });
  }

  #flush() {
    let queue = this.#queue;
    this.#queue = [];
    while (queue.length > 0) {
      const batch = [];
      const rest = [];
      const jobs = new Set();
      for (const call of queue) {
        if (batch.length < MAX_BATCH_ITEMS && !jobs.has(call.item.jobId)) {
          jobs.add(call.item.jobId);
          batch.push(call);
        } else {
          rest.push(call);
        }
      }
      this.#sendBatch(batch);
      queue = rest;
    }
  }

  // Sends a batch and settles each of its calls, whatever happens. A batch
  // of one is its single call (the same answer, from a route that costs
  // leaseapi less).
  async #sendBatch(batch) {
    const alone = (call) => this.#single(this.#batchers.client, call.item, call.timeoutMs).then(call.resolve, call.reject);
    if (batch.length === 1 || this.#batchers.singleOnly) {
      batch.forEach(alone);
      return;
    }
    const sent = performance.now();
    let results;
    try {
      results = await this.#send(batch.map((c) => c.item), Math.min(...batch.map((c) => c.timeoutMs)));
    } catch (err) {
      if (err instanceof LeaseApiError && (err.status === 404 || err.status === 405)) {
        // A leaseapi without the batch routes: single calls for good.
        this.#batchers.stopBatching(err);
        batch.forEach(alone);
      } else if (err instanceof TypeError || err instanceof RangeError || (err instanceof LeaseApiError && REFUSED_AS_A_WHOLE.has(err.code))) {
        batch.forEach(alone);
      } else {
        // No answer, or one for every item (401, 503): each call gets it,
        // as its single call would have.
        batch.forEach((call) => call.reject(err));
      }
      return;
    }
    batch.forEach((call, k) => {
      const result = results[k];
      if (result instanceof LeaseApiError) {
        call.reject(result);
      } else {
        call.resolve({ sent, lease: result });
      }
    });
  }
}

/** The batchers of one Client, shared by its runners. */
class Batchers {
  constructor(client, log) {
    this.client = client;
    this.log = log;
    this.singleOnly = false;
    this.acquires = new Batcher(this, '/acquire', (items, timeoutMs) => client.acquireBatch(items, {}, { retryForMs: 0, timeoutMs }), acquireSingle);
    this.heartbeats = new Batcher(this, '/heartbeat', (items, timeoutMs) => client.heartbeatBatch(items, {}, { retryForMs: 0, timeoutMs }), heartbeatSingle);
  }

  stopBatching(err) {
    if (!this.singleOnly) {
      this.singleOnly = true;
      this.log.info('leaseapi does not serve batches: sending single calls from now on', { url: this.client.url, error: err.message });
    }
  }
}

const batchers = new WeakMap();

function batchersOf(runner) {
  let found = batchers.get(runner.client);
  if (found === undefined) {
    found = new Batchers(runner.client, runner.log);
    batchers.set(runner.client, found);
  }
  return found;
}
