// The error every call of the client throws: LeaseApiError.

/**
 * An error of a leaseapi call.
 *
 * `code` is the problem's machine code (`lease_held`, `tick_done`,
 * `job_paused`, `tick_ahead`, `too_soon`, `lease_lost`, `not_found`,
 * `unavailable`, `feature_disabled` (a 400: the request sends a field the
 * server's upgrade is not finalized for; not retried), ...),
 * or one the client sets itself: `connection_failed` when leaseapi did not
 * answer (refused, reset, timed out, TLS failure: the outcome of a write is
 * unknown, and retrying it is safe) and `protocol_error` when it answered
 * something the client cannot read. `status` is the HTTP status (undefined
 * without an answer), `retryAfter` the seconds of the `Retry-After` header
 * (undefined without one), `lease` the lease a conflict (409) is about, `now`
 * the server's clock of a `tick_ahead`, `group` the concurrency group of a
 * `group_full` (with up to 10 holders), `requestId` the answer's
 * `X-Request-Id` (quote it to the operators).
 */
export class LeaseApiError extends Error {
  constructor(message, { code, status, title, detail, lease, now, group, retryAfter, requestId, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'LeaseApiError';
    this.code = code;
    this.status = status;
    this.title = title;
    this.detail = detail ?? message;
    this.lease = lease;
    this.now = now;
    this.group = group;
    this.retryAfter = retryAfter;
    this.requestId = requestId;
  }

  /** True for the refusals that mean "skip this tick": another replica runs it, it ran, the job is paused, the tick lies ahead of the server's clock, the job's previous run started less than the acquire's `minIntervalMs` ago (too_soon), or the job's concurrency group is full (the runner retries that one while the tick is within its grace). */
  get notAcquired() {
    return NOT_ACQUIRED.has(this.code);
  }

  /** True for what the client retries until a call's deadline: 429, 503 and no answer. */
  get retryable() {
    return RETRYABLE.has(this.code) || this.status === 429 || this.status === 503;
  }
}

/** The codes of a refused acquire that the runner skips quietly. */
export const NOT_ACQUIRED = new Set(['lease_held', 'tick_done', 'job_paused', 'tick_ahead', 'too_soon', 'group_full']);
const RETRYABLE = new Set(['rate_limited', 'unavailable', 'overloaded', 'connection_failed']);
