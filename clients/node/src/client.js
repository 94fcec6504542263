// The HTTP client of leaseapi: every operation of api/openapi.yaml, on
// node:http and node:https (no dependency), with bounded retries.

import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';

import { LeaseApiError } from './errors.js';
import { jsonLogger } from './log.js';
import { decode, formatTime, parseTime } from './models.js';

// Backoff of a retried call whose answer names no Retry-After (no answer):
// from 50 ms, doubling, up to 2 s, each wait jittered to [d/2, d).
const MIN_BACKOFF_MS = 50;
const MAX_BACKOFF_MS = 2000;
// The largest answer the client reads (the metrics of many jobs are the
// largest leaseapi sends); a longer one is a protocol error.
const MAX_ANSWER_BYTES = 64 << 20;
const OUTCOMES = new Set(['succeeded', 'failed']);
/** The most items one POST /acquire or POST /heartbeat takes; a longer batch goes as several requests. */
export const MAX_BATCH_ITEMS = 1000;

/** A wait of d/2 to d milliseconds: replicas that failed together do not retry together. */
export function jitter(d) {
  return d / 2 + (Math.random() * d) / 2;
}

// The code of an answer that is not leaseapi's problem document (a proxy
// or load balancer answered), by status.
const CODE_BY_STATUS = { 400: 'invalid_request', 401: 'unauthorized', 403: 'forbidden', 404: 'not_found', 429: 'rate_limited', 503: 'unavailable' };

/**
 * A client of one leaseapi service.
 *
 * `url` is the service's base URL (`https://leaseapi.internal`). Options:
 * `token` (the bearer token, sent with every call), `ca` (PEM of the CA
 * that signed an https server's certificate: a string, Buffer or a list of
 * them), `timeoutMs` (bounds each request, default 10 s), `retryForMs` (how
 * long 429, 503 and calls without an answer are retried after the answer's
 * Retry-After, else a jittered backoff; default 30 s, 0 for one attempt),
 * `logger` (see jsonLogger), `userAgent`, and `onExchange`, called after
 * every answer with {method, path, requestBody, status, headers, body} (for
 * tracing, or to check answers against the spec). Every method takes
 * {retryForMs, timeoutMs, signal} last to override them per call.
 * Redirects are never followed: a 3xx is a `protocol_error`, so the token
 * never travels elsewhere. Call close() to drop idle connections.
 */
export class Client {
  #token;
  #agent;
  #transport;
  #log;
  #onExchange;
  #userAgent;

  constructor(url, { token, ca, timeoutMs = 10_000, retryForMs = 30_000, logger, userAgent = 'leaseapi-node/0.1', onExchange } = {}) {
    let base;
    try {
      base = new URL(url);
    } catch {
      throw new TypeError(`leaseapi url ${JSON.stringify(url)} is not a URL`);
    }
    if ((base.protocol !== 'http:' && base.protocol !== 'https:') || base.host === '') {
      throw new TypeError(`leaseapi url ${JSON.stringify(url)} must be an http:// or https:// URL`);
    }
    if (base.search !== '' || base.hash !== '' || base.username !== '' || base.password !== '') {
      throw new TypeError(`leaseapi url ${JSON.stringify(url)} must have no query, fragment or user information`);
    }
    if (token !== undefined && (typeof token !== 'string' || token === '' || /\s/.test(token))) {
      throw new TypeError('token must be a non-empty string without white space');
    }
    if (ca !== undefined && base.protocol !== 'https:') {
      throw new TypeError('ca is for an https:// url');
    }
    checkDuration('timeoutMs', timeoutMs, 1);
    checkDuration('retryForMs', retryForMs, 0);
    this.url = base.href.replace(/\/+$/, '');
    this.timeoutMs = timeoutMs;
    this.retryForMs = retryForMs;
    this.#token = token;
    this.#transport = base.protocol === 'https:' ? https : http;
    // Keep-alive, so a runner's heartbeats reuse one connection; idle
    // sockets do not keep the process alive.
    this.#agent = new this.#transport.Agent({ keepAlive: true, ...(ca === undefined ? {} : { ca }) });
    this.#log = logger ?? jsonLogger();
    this.#onExchange = onExchange;
    this.#userAgent = userAgent;
  }

  /** Closes idle connections; calls still work afterwards (on new ones). */
  close() {
    this.#agent.destroy();
  }

  // The operations of api/openapi.yaml, by operationId, and the method that
  // calls each (a test fails when the spec gains one that is not here).
  static OPERATIONS = Object.freeze({
    acquireLease: 'acquire',
    heartbeatLease: 'heartbeat',
    acquireBatch: 'acquireBatch',
    heartbeatBatch: 'heartbeatBatch',
    releaseLease: 'release',
    getLease: 'get',
    listLeases: 'list',
    listRuns: 'runs',
    listRecentRuns: 'recentRuns',
    getStats: 'stats',
    whoami: 'whoami',
    owedTicks: 'owed',
    revokeLease: 'revoke',
    pauseJob: 'pause',
    resumeJob: 'resume',
    repairJob: 'repair',
    triggerJob: 'trigger',
    cancelTrigger: 'cancelTrigger',
    forgetSchedule: 'forgetSchedule',
    createCredential: 'createCredential',
    listCredentials: 'credentials',
    deleteCredential: 'deleteCredential',
    createWebhook: 'createWebhook',
    listWebhooks: 'webhooks',
    deleteWebhook: 'deleteWebhook',
    listWebhookDeliveries: 'webhookDeliveries',
    putGroup: 'putGroup',
    getGroup: 'getGroup',
    listGroups: 'listGroups',
    deleteGroup: 'deleteGroup',
    leaveGroup: 'leaveGroup',
    putPolicy: 'putPolicy',
    getPolicy: 'policy',
    deletePolicy: 'deletePolicy',
    healthz: 'healthz',
    readyz: 'readyz',
    metrics: 'metrics',
    openapi: 'openapi',
  });

  // Operations of the spec that are not API calls, and why.
  static NOT_CALLS = Object.freeze({
    consoleRedirect: 'the operations console, for a browser',
    consoleRedirectSlash: 'the operations console, for a browser',
    consoleAsset: 'the operations console, for a browser',
    receiveWebhookEvent: 'a callback leaseapi sends to a webhook receiver',
  });

  // Leases: what a replica calls.

  /**
   * Acquires the lease of `jobId` for `owner` (POST /leases/{jobId}/acquire),
   * or renews it when `owner` holds it for the same tick. `tick` (a Date) is
   * the fire time the grant is for; `nearestTick: true` lets the server pick
   * the tick of the schedule nearest its clock (the answer's `tick` says
   * which). `schedule` (a cron spec), `graceMs`, `catchUp` and
   * `catchUpWindowMs` register the job's schedule. `group` puts the job in
   * that concurrency group from this grant on (`''` takes it out); the
   * lease's `slot` and `slotToken` say which slot the grant took.
   * `minIntervalMs` (0 to 31 days; 0 or undefined: none) refuses a new grant
   * sooner than that after the job's previous grant started, by the
   * server's clock (too_soon): for a job run without ticks on hosts whose
   * clocks differ. A refusal throws a LeaseApiError whose `notAcquired` is
   * true (lease_held, tick_done, job_paused, tick_ahead, too_soon,
   * group_full); `feature_disabled` (400) answers `minIntervalMs` while the
   * server's upgrade to a release that knows it is not finalized.
   */
  acquire(jobId, { owner, ttlMs, tick, nearestTick, schedule, graceMs, catchUp, catchUpWindowMs, group, minIntervalMs } = {}, opts) {
    const body = acquireFields({ owner: checkOwner(owner), ttlMs, tick, nearestTick, schedule, graceMs, catchUp, catchUpWindowMs, group, minIntervalMs });
    return this.#call('POST', `${leasePath(jobId)}/acquire`, { body, schema: 'Lease' }, opts);
  }

  /**
   * Acquires the leases of several jobs in one request (POST /acquire),
   * each decided exactly as its acquire() would be. `items` are
   * {jobId, ...acquire's options}; `defaults` (acquire's options) hold for
   * every item that does not set its own, and an item with `tick` or
   * `nearestTick` takes neither from them. Resolves to one result per
   * item, in item order: the Lease, or the LeaseApiError its single call
   * would have thrown (lease_held, forbidden, ...), not thrown. Items
   * answered 429 or 503 are sent again, together, as a single call would
   * be, until `retryForMs` ends. Rejects only for the request as a whole: a
   * TypeError for a job given twice, and the error of an answer that is not
   * 200 (no answer, 401, 503 for every item, or 404/405 from a leaseapi
   * without the batch routes). More than 1000 items go as several requests.
   */
  acquireBatch(items, defaults = {}, opts) {
    const bodies = batchItems(items).map(({ jobId, ...fields }) => ({ jobId, ...acquireFields(fields) }));
    return this.#batch('/acquire', acquireFields(defaults), bodies, opts);
  }

  /**
   * Extends several grants in one request (POST /heartbeat), each as its
   * heartbeat() would: `items` are {jobId, token, owner?, ttlMs?},
   * `defaults` {owner, ttlMs}. Results, retries and errors as
   * acquireBatch(): a grant that is gone is a `lease_lost` in its place.
   */
  heartbeatBatch(items, { owner, ttlMs, ...unknown } = {}, opts) {
    checkKnown('heartbeatBatch defaults', unknown);
    const bodies = batchItems(items).map(({ jobId, token, owner: own, ttlMs: ttl, ...rest }) => {
      checkKnown(`heartbeat item ${jobId}`, rest);
      const body = { jobId, token: checkToken(token) };
      setIf(body, 'owner', own === undefined ? undefined : checkOwner(own));
      setIf(body, 'ttlMs', ttl);
      return body;
    });
    const defaults = {};
    setIf(defaults, 'owner', owner === undefined ? undefined : checkOwner(owner));
    setIf(defaults, 'ttlMs', ttlMs);
    return this.#batch('/heartbeat', defaults, bodies, opts);
  }

  /** Extends the grant `token` of `owner` (POST /leases/{jobId}/heartbeat); `lease_lost` when it is gone. */
  heartbeat(jobId, { owner, token, ttlMs } = {}, opts) {
    const body = { owner: checkOwner(owner), token: checkToken(token) };
    setIf(body, 'ttlMs', ttlMs);
    return this.#call('POST', `${leasePath(jobId)}/heartbeat`, { body, schema: 'Lease' }, opts);
  }

  /** Ends the grant `token` of `owner` with `outcome` (`succeeded`, the default, or `failed`); a succeeded tick is never granted again. */
  release(jobId, { owner, token, outcome = 'succeeded' } = {}, opts) {
    if (!OUTCOMES.has(outcome)) {
      throw new TypeError(`outcome ${JSON.stringify(outcome)} must be succeeded or failed`);
    }
    const body = { owner: checkOwner(owner), token: checkToken(token), outcome };
    return this.#call('POST', `${leasePath(jobId)}/release`, { body, schema: 'Lease' }, opts);
  }

  /** What the named jobs owe (POST /owed): {owed: [{jobId, tick, reason, triggeredBy, triggerReason}]}. */
  owed(jobIds, opts) {
    if (!Array.isArray(jobIds) || jobIds.length === 0) {
      throw new TypeError('owed needs a non-empty list of job ids');
    }
    return this.#call('POST', '/owed', { body: { jobs: jobIds.map(checkJobId) }, schema: 'OwedList' }, opts);
  }

  // Reading.

  /** The lease of `jobId` (GET /leases/{jobId}); `not_found` when it has none. */
  get(jobId, opts) {
    return this.#call('GET', leasePath(jobId), { schema: 'Lease' }, opts);
  }

  /** One page of leases sorted by job id (GET /leases): {leases, nextCursor, serverTime}. Filters: state, owner, prefix, paused, overdue, alerting, limit, cursor. */
  list({ state, owner, prefix, paused, overdue, alerting, limit, cursor } = {}, opts) {
    return this.#call('GET', '/leases', { query: { state, owner, prefix, paused, overdue, alerting, limit, cursor }, schema: 'LeaseList' }, opts);
  }

  /** Every lease matching the filters of list(), page after page (an async iterator). */
  async *leases(filters = {}, opts) {
    let cursor;
    for (;;) {
      const page = await this.list({ ...filters, cursor }, opts);
      yield* page.leases;
      if (page.nextCursor === null || page.nextCursor === undefined) {
        return;
      }
      cursor = page.nextCursor;
    }
  }

  /** The run history of `jobId`, newest first (GET /leases/{jobId}/runs): {runs}. */
  runs(jobId, { limit } = {}, opts) {
    return this.#call('GET', `${leasePath(jobId)}/runs`, { query: { limit }, schema: 'RunList' }, opts);
  }

  /** One page of the newest runs of every job in scope (GET /runs), optionally only those with one of `outcomes`. */
  recentRuns({ outcomes, limit, cursor } = {}, opts) {
    const outcome = outcomes === undefined ? undefined : outcomes.join(',');
    return this.#call('GET', '/runs', { query: { outcome, limit, cursor }, schema: 'RecentRunList' }, opts);
  }

  /** Counts of the jobs in scope and of their runs of the last 24 hours (GET /stats). */
  stats(opts) {
    return this.#call('GET', '/stats', { schema: 'Stats' }, opts);
  }

  /** The caller's credential (name, role, scopes), or open mode (GET /whoami). */
  whoami(opts) {
    return this.#call('GET', '/whoami', { schema: 'Whoami' }, opts);
  }

  // Operating (role admin).

  /** Force-releases a held lease (DELETE /leases/{jobId}): its holder's next heartbeat answers `lease_lost`. */
  revoke(jobId, opts) {
    return this.#call('DELETE', leasePath(jobId), { schema: 'Lease' }, opts);
  }

  /** Pauses a job: acquires answer `job_paused` until resume(). */
  pause(jobId, { reason } = {}, opts) {
    return this.#call('POST', `${leasePath(jobId)}/pause`, { body: withReason(reason), schema: 'Lease' }, opts);
  }

  /** Resumes a paused job. */
  resume(jobId, opts) {
    return this.#call('POST', `${leasePath(jobId)}/resume`, { body: {}, schema: 'Lease' }, opts);
  }

  /** Undoes what ticks ahead of the server's clock did to a job (POST /leases/{jobId}/repair). */
  repair(jobId, { reason } = {}, opts) {
    return this.#call('POST', `${leasePath(jobId)}/repair`, { body: withReason(reason), schema: 'Lease' }, opts);
  }

  /**
   * Run now: the job owes one manual tick (the answer's `owedTick`) that a
   * replica claims with an acquire of that tick. Send a fresh
   * `idempotencyKey` per intended run and the same one on its retries.
   */
  trigger(jobId, { reason, idempotencyKey } = {}, opts) {
    const headers = {};
    if (idempotencyKey !== undefined) {
      if (typeof idempotencyKey !== 'string' || !/^[ -~]{1,256}$/.test(idempotencyKey)) {
        throw new TypeError('idempotencyKey must be 1-256 printable ASCII characters');
      }
      headers['Idempotency-Key'] = idempotencyKey;
    }
    return this.#call('POST', `${leasePath(jobId)}/trigger`, { body: withReason(reason), headers, schema: 'Lease' }, opts);
  }

  /** Forgets the tick the job owes (DELETE /leases/{jobId}/trigger). */
  cancelTrigger(jobId, opts) {
    return this.#call('DELETE', `${leasePath(jobId)}/trigger`, { schema: 'Lease' }, opts);
  }

  /** Forgets the job's schedule: no missed-tick accounting until an acquire sends one again. */
  forgetSchedule(jobId, opts) {
    return this.#call('DELETE', `${leasePath(jobId)}/schedule`, { schema: 'Lease' }, opts);
  }

  // Concurrency groups.

  /** Creates the concurrency group `name` with `limit` (1-10000), or changes its limit (PUT /groups/{name}, role admin). */
  putGroup(name, { limit } = {}, opts) {
    if (!Number.isInteger(limit) || limit < 1 || limit > 10000) {
      throw new RangeError(`group limit ${limit} must be an integer from 1 to 10000`);
    }
    return this.#call('PUT', groupPath(name), { body: { limit }, schema: 'Group' }, opts);
  }

  /** The group `name` with the grants that hold its slots (GET /groups/{name}); `not_found` when there is none. */
  getGroup(name, opts) {
    return this.#call('GET', groupPath(name), { schema: 'Group' }, opts);
  }

  /** One page of groups sorted by name (GET /groups): {groups, nextCursor}. Filters: prefix, limit, cursor. */
  listGroups({ prefix, limit, cursor } = {}, opts) {
    return this.#call('GET', '/groups', { query: { prefix, limit, cursor }, schema: 'GroupList' }, opts);
  }

  /** Every group whose name starts with `prefix`, page after page (an async iterator). */
  async *groups({ prefix, limit } = {}, opts) {
    let cursor;
    for (;;) {
      const page = await this.listGroups({ prefix, limit, cursor }, opts);
      yield* page.groups;
      if (page.nextCursor === null || page.nextCursor === undefined) {
        return;
      }
      cursor = page.nextCursor;
    }
  }

  /** Deletes a group no job is in (DELETE /groups/{name}, role admin); `group_in_use` while one is, naming it. */
  deleteGroup(name, opts) {
    return this.#call('DELETE', groupPath(name), {}, opts);
  }

  /** Takes a retired job out of its group (DELETE /leases/{jobId}/group, role admin); a grant it holds keeps its slot until it ends. */
  leaveGroup(jobId, opts) {
    return this.#call('DELETE', `${leasePath(jobId)}/group`, { schema: 'Lease' }, opts);
  }

  // Alert policies.

  /**
   * Sets the alert policy of `jobId` (PUT /leases/{jobId}/policy, role
   * admin), replacing the one it had: what is not given is not set. The
   * body is the spec's PolicyBody: `consecutiveFailures`, `failureRate`
   * ({threshold, runs}), `maxRuntimeMs`, `minRuntimeMs`, `missedTicks`
   * (at least one of these), `recoveryThreshold` and `realertAfterMs`. The
   * answer is the JobPolicy, decided at once (it may already be alerting);
   * `invalid_request` names the field of a value out of bounds, `not_found`
   * a job without a lease.
   */
  putPolicy(jobId, body = {}, opts) {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new TypeError('putPolicy needs a policy object');
    }
    const { consecutiveFailures, failureRate, maxRuntimeMs, minRuntimeMs, missedTicks, recoveryThreshold, realertAfterMs, ...unknown } = body;
    const extra = Object.keys(unknown);
    if (extra.length > 0) {
      throw new TypeError(`unknown policy field ${JSON.stringify(extra[0])}`);
    }
    if ([consecutiveFailures, failureRate, maxRuntimeMs, minRuntimeMs, missedTicks].every((v) => v === undefined)) {
      throw new TypeError('a policy needs at least one of consecutiveFailures, failureRate, maxRuntimeMs, minRuntimeMs, missedTicks');
    }
    return this.#call('PUT', `${leasePath(jobId)}/policy`, { body, schema: 'JobPolicy' }, opts);
  }

  /** The alert policy of `jobId` and where it stands (GET /leases/{jobId}/policy); `policy_not_found` when it has none, `not_found` for an unknown job. */
  policy(jobId, opts) {
    return this.#call('GET', `${leasePath(jobId)}/policy`, { schema: 'JobPolicy' }, opts);
  }

  /** Removes the alert policy of `jobId` (DELETE /leases/{jobId}/policy, role admin), telling no webhook; `policy_not_found` when it has none. */
  deletePolicy(jobId, opts) {
    return this.#call('DELETE', `${leasePath(jobId)}/policy`, {}, opts);
  }

  /** Creates a credential ({name, role, scopes, ratePerSecond}); the answer's `token` is shown this once. */
  createCredential({ name, role, scopes, ratePerSecond } = {}, opts) {
    const body = { name, role, scopes };
    setIf(body, 'ratePerSecond', ratePerSecond);
    return this.#call('POST', '/credentials', { body, schema: 'CreatedCredential' }, opts);
  }

  /** The credentials within the caller's scopes, never a secret: {credentials}. */
  credentials(opts) {
    return this.#call('GET', '/credentials', { schema: 'CredentialList' }, opts);
  }

  /** Revokes a credential. */
  deleteCredential(id, opts) {
    return this.#call('DELETE', `/credentials/${segment(id, 'credential id')}`, {}, opts);
  }

  /** Subscribes a URL to the events of the jobs in `scopes` ({url, events, scopes, format}); the answer's `secret` is shown this once. */
  createWebhook({ url, events, scopes, format } = {}, opts) {
    const body = { url, events, scopes };
    setIf(body, 'format', format);
    return this.#call('POST', '/webhooks', { body, schema: 'CreatedWebhook' }, opts);
  }

  /** The webhooks within the caller's scopes: {webhooks}. */
  webhooks(opts) {
    return this.#call('GET', '/webhooks', { schema: 'WebhookList' }, opts);
  }

  /** Deletes a webhook, its waiting events and its log. */
  deleteWebhook(id, opts) {
    return this.#call('DELETE', `/webhooks/${segment(id, 'webhook id')}`, {}, opts);
  }

  /** The last delivery attempts of a webhook, newest first: {deliveries}. */
  webhookDeliveries(id, opts) {
    return this.#call('GET', `/webhooks/${segment(id, 'webhook id')}/deliveries`, { schema: 'WebhookDeliveryList' }, opts);
  }

  // Operations endpoints.

  /** GET /healthz: {status: 'ok', version} while the process is alive. */
  healthz(opts) {
    return this.#call('GET', '/healthz', { schema: 'Health' }, opts);
  }

  /** GET /readyz: {status: 'ok'}, or an `unavailable` error naming why not. */
  readyz(opts) {
    return this.#call('GET', '/readyz', { schema: 'Status' }, { retryForMs: 0, ...opts });
  }

  /** GET /metrics: the Prometheus text exposition. */
  metrics(opts) {
    return this.#call('GET', '/metrics', { text: true }, opts);
  }

  /** GET /openapi.yaml: the spec the server implements, as YAML text. */
  openapi(opts) {
    return this.#call('GET', '/openapi.yaml', { text: true }, opts);
  }

  // The transport.

  async #call(method, path, { query, body, headers = {}, schema, text = false }, { retryForMs = this.retryForMs, timeoutMs = this.timeoutMs, signal } = {}) {
    checkDuration('retryForMs', retryForMs, 0);
    checkDuration('timeoutMs', timeoutMs, 1);
    const target = path + queryString(query);
    const answer = await retrying(() => this.#once(method, target, body, headers, timeoutMs, signal), {
      retryForMs,
      signal,
      log: this.#log,
      what: `${method} ${target}`,
    });
    if (answer.status === 204) {
      return undefined;
    }
    if (text) {
      return answer.body;
    }
    let data;
    try {
      data = JSON.parse(answer.body);
      return decode(schema, data);
    } catch (err) {
      throw new LeaseApiError(`${method} ${target}: ${answer.status} with an answer the client cannot read: ${err.message}`, {
        code: 'protocol_error',
        status: answer.status,
        requestId: answer.headers['x-request-id'],
        cause: err,
      });
    }
  }

  // Sends the items of a batch route with the defaults, at most
  // MAX_BATCH_ITEMS a request, and the items answered 429 or 503 again,
  // together, after their backoff, until the retry window ends.
  async #batch(path, defaults, items, { retryForMs = this.retryForMs, timeoutMs = this.timeoutMs, signal } = {}) {
    checkDuration('retryForMs', retryForMs, 0);
    checkDuration('timeoutMs', timeoutMs, 1);
    const deadline = performance.now() + retryForMs;
    const results = new Array(items.length);
    let pending = items.map((_, i) => i);
    let backoff = MIN_BACKOFF_MS;
    for (;;) {
      for (let start = 0; start < pending.length; start += MAX_BATCH_ITEMS) {
        const chunk = pending.slice(start, start + MAX_BATCH_ITEMS);
        const body = { ...defaults, items: chunk.map((i) => items[i]) };
        const answer = await retrying(() => this.#once('POST', path, body, {}, timeoutMs, signal), {
          retryForMs: Math.max(0, deadline - performance.now()),
          signal,
          log: this.#log,
          what: `POST ${path}`,
        });
        const read = batchResults(path, answer, chunk.map((i) => items[i].jobId));
        chunk.forEach((i, k) => {
          results[i] = read[k];
        });
      }
      const again = pending.filter((i) => results[i] instanceof LeaseApiError && results[i].retryable);
      if (again.length === 0) {
        return results;
      }
      const wait = Math.max(jitter(backoff), ...again.map((i) => (results[i].retryAfter ?? 0) * 1000));
      if (performance.now() + wait >= deadline || signal?.aborted) {
        return results;
      }
      this.#log.warn('leaseapi batch items failed, retrying them', {
        call: `POST ${path}`,
        failed: again.length,
        items: pending.length,
        retry_in_ms: Math.round(wait),
        error: results[again[0]].message,
      });
      await sleep(wait, undefined, { signal });
      backoff = Math.min(2 * backoff, MAX_BACKOFF_MS);
      pending = again;
    }
  }

  #once(method, path, body, extraHeaders, timeoutMs, signal) {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers = { Accept: 'application/json, application/problem+json', 'User-Agent': this.#userAgent, ...extraHeaders };
    if (payload !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = String(payload.length);
    }
    if (this.#token !== undefined) {
      headers.Authorization = `Bearer ${this.#token}`;
    }
    const what = `${method} ${this.url}${path}`;
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (err) => {
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        }
      };
      const noAnswer = (reason, cause) => new LeaseApiError(`${what}: ${reason}`, { code: 'connection_failed', cause });
      const req = this.#transport.request(this.url + path, { method, headers, agent: this.#agent }, (res) => {
        const chunks = [];
        let size = 0;
        res.on('data', (chunk) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) {
            req.destroy(new LeaseApiError(`${what}: an answer over ${MAX_ANSWER_BYTES} bytes`, { code: 'protocol_error', status: res.statusCode }));
            return;
          }
          chunks.push(chunk);
        });
        res.on('error', (err) => fail(err instanceof LeaseApiError ? err : noAnswer(err.message, err)));
        res.on('close', () => fail(noAnswer('the connection closed before the answer ended')));
        res.on('end', () => {
          if (settled) {
            return;
          }
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          const answer = { status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') };
          this.#onExchange?.({ method, path, requestBody: body, status: answer.status, headers: answer.headers, body: answer.body });
          if (answer.status >= 200 && answer.status < 300) {
            resolve(answer);
          } else {
            reject(problem(method, path, answer));
          }
        });
      });
      req.on('error', (err) => fail(signal?.aborted ? signal.reason : err instanceof LeaseApiError ? err : noAnswer(err.message, err)));
      const timer = setTimeout(() => req.destroy(noAnswer(`no answer within ${timeoutMs} ms`)), timeoutMs);
      const onAbort = () => req.destroy(signal.reason ?? new Error('aborted'));
      if (signal?.aborted) {
        onAbort();
      } else {
        signal?.addEventListener('abort', onAbort, { once: true });
      }
      req.end(payload);
    });
  }
}

/**
 * Calls attempt() until it resolves, retrying the errors that are
 * `retryable` (429, 503, no answer; or as the predicate `retryable` says)
 * after their Retry-After, else a
 * jittered backoff, while the wait ends within `retryForMs`; then throws
 * the last error. An abort of `signal` ends the wait at once.
 */
export async function retrying(attempt, { retryForMs, signal, log, what, retryable = (err) => err.retryable }) {
  const deadline = performance.now() + retryForMs;
  let backoff = MIN_BACKOFF_MS;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (!(err instanceof LeaseApiError) || !retryable(err) || signal?.aborted) {
        throw err;
      }
      const wait = Math.max(jitter(backoff), (err.retryAfter ?? 0) * 1000);
      if (performance.now() + wait >= deadline) {
        throw err;
      }
      log.warn('leaseapi call failed, retrying', { call: what, retry_in_ms: Math.round(wait), error: err.message, code: err.code });
      await sleep(wait, undefined, { signal });
      backoff = Math.min(2 * backoff, MAX_BACKOFF_MS);
    }
  }
}

/** The LeaseApiError an answer that is not 2xx stands for. */
function problem(method, path, { status, headers, body }) {
  const retryAfter = parseRetryAfter(headers['retry-after']);
  const requestId = headers['x-request-id'];
  if (status >= 300 && status < 400) {
    return new LeaseApiError(`${method} ${path}: ${status} redirect to ${headers.location ?? 'nowhere'} refused (the client follows no redirect)`, {
      code: 'protocol_error',
      status,
      requestId,
    });
  }
  let doc;
  try {
    doc = JSON.parse(body);
  } catch {
    doc = undefined;
  }
  return problemError(method, path, status, doc, body.slice(0, 200).trim(), retryAfter, requestId);
}

// The LeaseApiError of the problem document `doc` answered with `status`
// (a call's answer, or one item's in a batch); `text` stands in for a
// document that is not leaseapi's.
function problemError(method, path, status, doc, text, retryAfter, requestId) {
  if (doc === null || typeof doc !== 'object' || typeof doc.code !== 'string') {
    // Not leaseapi's problem document: a proxy or load balancer answered.
    const code = CODE_BY_STATUS[status] ?? (status >= 500 ? 'internal' : 'protocol_error');
    return new LeaseApiError(`${method} ${path}: ${status} ${text || http.STATUS_CODES[status] || 'no body'}`, { code, status, retryAfter, requestId });
  }
  let decoded;
  try {
    decoded = decode('Problem', doc);
  } catch (err) {
    return new LeaseApiError(`${method} ${path}: ${status} with a problem the client cannot read: ${err.message}`, {
      code: 'protocol_error',
      status,
      requestId,
      cause: err,
    });
  }
  const detail = String(doc.detail || doc.title || doc.code);
  return new LeaseApiError(`${method} ${path}: ${status} ${doc.code}: ${detail}${requestId ? ` (request id ${requestId})` : ''}`, {
    code: doc.code,
    status,
    title: doc.title,
    detail,
    lease: decoded.lease ?? undefined,
    // A `now` the client cannot read leaves the refusal without it.
    now: decoded.now ?? undefined,
    group: decoded.group ?? undefined,
    retryAfter,
    requestId,
  });
}

// The results of a batch's answer, one per job of `jobIds` in order: a
// Lease, or the LeaseApiError its single call would have thrown. An answer
// that does not match the items is a protocol_error.
function batchResults(path, answer, jobIds) {
  const requestId = answer.headers['x-request-id'];
  try {
    const { results } = JSON.parse(answer.body);
    if (!Array.isArray(results) || results.length !== jobIds.length) {
      throw new TypeError(`${jobIds.length} items sent, ${Array.isArray(results) ? results.length : 'no list of'} results answered`);
    }
    return results.map((result, k) => {
      if (result?.jobId !== jobIds[k]) {
        throw new TypeError(`result for job ${JSON.stringify(result?.jobId)} where job ${jobIds[k]} was sent`);
      }
      if (result.status === 200) {
        return decode('Lease', result.lease);
      }
      if (!Number.isInteger(result.status)) {
        throw new TypeError(`result of job ${jobIds[k]} without a status`);
      }
      const retryAfter = Number.isInteger(result.retryAfter) && result.retryAfter > 0 ? result.retryAfter : undefined;
      return problemError('POST', path, result.status, result.problem, '', retryAfter, requestId);
    });
  } catch (err) {
    throw new LeaseApiError(`POST ${path}: ${answer.status} with an answer the client cannot read: ${err.message}`, {
      code: 'protocol_error',
      status: answer.status,
      requestId,
      cause: err,
    });
  }
}

function parseRetryAfter(value) {
  // leaseapi sends whole seconds; an HTTP date (a proxy's) is ignored in
  // favour of the backoff.
  return typeof value === 'string' && /^\d{1,9}$/.test(value.trim()) ? Number(value.trim()) : undefined;
}

function queryString(query) {
  if (query === undefined) {
    return '';
  }
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null) {
      params.set(k, String(v));
    }
  }
  const s = params.toString();
  return s === '' ? '' : `?${s}`;
}

const JOB_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const OWNER = /^[!-~]{1,128}$/;

function checkJobId(jobId) {
  if (typeof jobId !== 'string' || !JOB_ID.test(jobId)) {
    throw new TypeError(`job id ${JSON.stringify(jobId)} must match ${JOB_ID}`);
  }
  return jobId;
}

/** Throws a TypeError unless `owner` is 1-128 printable ASCII characters without spaces. */
export function checkOwner(owner) {
  if (typeof owner !== 'string' || !OWNER.test(owner)) {
    throw new TypeError(`owner ${JSON.stringify(owner)} must be 1-128 printable ASCII characters without spaces`);
  }
  return owner;
}

// The fields of an acquire that are given, checked: a single call's body, a
// batch's defaults or one of its items.
function acquireFields({ owner, ttlMs, tick, nearestTick, schedule, graceMs, catchUp, catchUpWindowMs, group, minIntervalMs, ...unknown }) {
  checkKnown('acquire', unknown);
  if (tick !== undefined && nearestTick) {
    throw new TypeError('pass tick or nearestTick, not both');
  }
  const body = {};
  setIf(body, 'owner', owner === undefined ? undefined : checkOwner(owner));
  setIf(body, 'ttlMs', ttlMs);
  if (tick !== undefined) {
    body.tick = formatTime(tick);
  }
  if (nearestTick) {
    body.nearestTick = true;
  }
  setIf(body, 'schedule', schedule);
  setIf(body, 'graceMs', graceMs);
  setIf(body, 'catchUp', catchUp);
  setIf(body, 'catchUpWindowMs', catchUpWindowMs);
  if (group !== undefined && (typeof group !== 'string' || (group !== '' && !JOB_ID.test(group)))) {
    throw new TypeError(`group ${JSON.stringify(group)} must be '' or match ${JOB_ID}`);
  }
  setIf(body, 'group', group);
  if (minIntervalMs !== undefined && !(Number.isInteger(minIntervalMs) && minIntervalMs >= 0 && minIntervalMs <= MAX_MIN_INTERVAL_MS)) {
    throw new RangeError(`minIntervalMs ${minIntervalMs} must be an integer from 0 (none) to ${MAX_MIN_INTERVAL_MS} (31 days)`);
  }
  setIf(body, 'minIntervalMs', minIntervalMs);
  return body;
}

// The longest minimum interval between two grants of a job: 31 days.
const MAX_MIN_INTERVAL_MS = 31 * 24 * 3600 * 1000;

// The items of a batch, checked: a list of objects naming distinct valid jobs.
function batchItems(items) {
  if (!Array.isArray(items)) {
    throw new TypeError('a batch needs a list of items');
  }
  const seen = new Map();
  items.forEach((item, i) => {
    checkJobId(item?.jobId);
    if (seen.has(item.jobId)) {
      throw new TypeError(`items[${seen.get(item.jobId)}] and items[${i}] are both job ${item.jobId}; send each job once per batch`);
    }
    seen.set(item.jobId, i);
  });
  return items;
}

function checkKnown(what, unknown) {
  const extra = Object.keys(unknown).filter((k) => unknown[k] !== undefined);
  if (extra.length > 0) {
    throw new TypeError(`unknown ${what} field ${JSON.stringify(extra[0])}`);
  }
}

function checkToken(token) {
  if (!Number.isSafeInteger(token) || token < 1) {
    throw new TypeError(`token ${JSON.stringify(token)} must be a positive integer`);
  }
  return token;
}

function checkDuration(name, value, min) {
  if (!Number.isFinite(value) || value < min) {
    throw new RangeError(`${name} ${value} must be a number of milliseconds of at least ${min}`);
  }
}

function leasePath(jobId) {
  // Job ids use only characters a path segment keeps as they are.
  return `/leases/${checkJobId(jobId)}`;
}

function groupPath(name) {
  // Group names have the syntax of job ids.
  if (typeof name !== 'string' || !JOB_ID.test(name)) {
    throw new TypeError(`group name ${JSON.stringify(name)} must match ${JOB_ID}`);
  }
  return `/groups/${name}`;
}

function segment(id, what) {
  if (typeof id !== 'string' || id === '') {
    throw new TypeError(`${what} must be a non-empty string`);
  }
  return encodeURIComponent(id);
}

function setIf(body, key, value) {
  if (value !== undefined) {
    body[key] = value;
  }
}

function withReason(reason) {
  return reason === undefined ? {} : { reason };
}

export { parseTime, formatTime };
