// The client against a real leaseapi on Postgres: every call, the errors it
// throws, its retries, and every answer checked against the spec.

import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';

import { Client, LeaseApiError } from '../src/index.js';
import { freePort, quietLogger, useServer } from './harness.js';

const b = useServer('client');
let n = 0;
const jobId = (name) => `node-client-${name}-${process.pid}-${n++}`;

async function rejects(promise, code) {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof LeaseApiError, `not a LeaseApiError: ${err}`);
    assert.equal(err.code, code, err.message);
    return err;
  }
  assert.fail(`resolved, wanted a ${code} error`);
}

test('acquire, heartbeat, release, and the lease as Dates', async () => {
  const id = jobId('cycle');
  const tick = new Date(Math.floor(Date.now() / 1000) * 1000);
  const lease = await b.client.acquire(id, { owner: 'a', ttlMs: 5000, tick });
  assert.equal(lease.state, 'held');
  assert.equal(lease.owner, 'a');
  assert.ok(lease.acquiredAt instanceof Date && lease.expiresAt instanceof Date);
  assert.equal(lease.tick.getTime(), tick.getTime());
  assert.deepEqual(lease.fieldErrors, {});
  assert.equal(typeof lease.raw.acquiredAt, 'string');

  const again = await b.client.acquire(id, { owner: 'a', ttlMs: 5000, tick });
  assert.equal(again.token, lease.token, 'the same owner and tick is an idempotent retry');

  const held = await rejects(b.client.acquire(id, { owner: 'b', tick }), 'lease_held');
  assert.equal(held.status, 409);
  assert.ok(held.notAcquired);
  assert.ok(held.retryAfter >= 1, `Retry-After ${held.retryAfter}`);
  assert.equal(held.lease.owner, 'a');
  assert.ok(held.lease.expiresAt instanceof Date);

  const beat = await b.client.heartbeat(id, { owner: 'a', token: lease.token, ttlMs: 5000 });
  assert.equal(beat.token, lease.token);
  const lost = await rejects(b.client.heartbeat(id, { owner: 'b', token: lease.token }), 'lease_lost');
  assert.equal(lost.lease.owner, 'a');

  const released = await b.client.release(id, { owner: 'a', token: lease.token, outcome: 'succeeded' });
  assert.equal(released.state, 'released');
  assert.equal(released.lastCompletedTick.getTime(), tick.getTime());
  const done = await rejects(b.client.acquire(id, { owner: 'b', tick }), 'tick_done');
  assert.ok(done.notAcquired);

  const { runs } = await b.client.runs(id, { limit: 10 });
  assert.equal(runs.length, 1);
  assert.equal(runs[0].outcome, 'succeeded');
  assert.ok(runs[0].startedAt instanceof Date && runs[0].endedAt instanceof Date);
});

test('reading: get, list page by page, leases, recent runs, stats, whoami, not_found', async () => {
  const prefix = jobId('list');
  for (let i = 0; i < 5; i++) {
    const l = await b.client.acquire(`${prefix}-${i}`, { owner: 'lister', ttlMs: 5000 });
    await b.client.release(`${prefix}-${i}`, { owner: 'lister', token: l.token, outcome: i % 2 ? 'failed' : 'succeeded' });
  }
  const page = await b.client.list({ prefix, limit: 2 });
  assert.equal(page.leases.length, 2);
  assert.ok(page.nextCursor);
  assert.ok(page.serverTime instanceof Date);
  const all = [];
  for await (const l of b.client.leases({ prefix, limit: 2 })) {
    all.push(l.jobId);
  }
  assert.deepEqual(all, [0, 1, 2, 3, 4].map((i) => `${prefix}-${i}`));
  assert.equal((await b.client.get(`${prefix}-0`)).lastOutcome, 'succeeded');
  const recent = await b.client.recentRuns({ outcomes: ['failed'], limit: 50 });
  assert.ok(recent.runs.some((r) => r.jobId === `${prefix}-1`));
  assert.ok(recent.runs.every((r) => r.outcome === 'failed'));
  const stats = await b.client.stats();
  assert.ok(stats.serverTime instanceof Date);
  assert.equal((await b.client.whoami()).role, 'lease');
  await rejects(b.client.get(jobId('missing')), 'not_found');
});

test('operating: pause, resume, trigger, owed, cancel, repair, forget schedule, revoke', async () => {
  const id = jobId('ops');
  const first = await b.client.acquire(id, { owner: 'a', ttlMs: 5000, nearestTick: true, schedule: '* * * * * *' });
  assert.ok(first.tick instanceof Date);
  assert.equal(first.schedule, '* * * * * *');
  await b.client.release(id, { owner: 'a', token: first.token });

  const paused = await b.admin.pause(id, { reason: 'node test' });
  assert.equal(paused.paused, true);
  await rejects(b.client.acquire(id, { owner: 'a' }), 'job_paused');
  await rejects(b.admin.trigger(id), 'job_paused');
  assert.equal((await b.admin.resume(id)).paused, false);

  const key = `node-${id}`;
  const triggered = await b.admin.trigger(id, { reason: 'run now', idempotencyKey: key });
  assert.ok(triggered.owedTick instanceof Date);
  assert.equal(triggered.owedReason, 'manual');
  assert.equal((await b.admin.trigger(id, { reason: 'run now', idempotencyKey: key })).owedTick.getTime(), triggered.owedTick.getTime());
  const { owed } = await b.client.owed([id, jobId('owes-nothing')]);
  assert.equal(owed.length, 1);
  assert.equal(owed[0].jobId, id);
  assert.equal(owed[0].tick.getTime(), triggered.owedTick.getTime());
  assert.equal((await b.admin.cancelTrigger(id)).owedTick, null);
  assert.equal((await b.client.owed([id])).owed.length, 0);

  assert.equal((await b.admin.repair(id, { reason: 'nothing ahead' })).jobId, id);
  assert.equal((await b.admin.forgetSchedule(id)).schedule, null);

  const held = await b.client.acquire(id, { owner: 'a', ttlMs: 5000 });
  const revoked = await b.admin.revoke(id);
  assert.equal(revoked.state, 'revoked');
  assert.ok(revoked.token > held.token);
  await rejects(b.client.heartbeat(id, { owner: 'a', token: held.token }), 'lease_lost');
  await rejects(b.client.revoke(id), 'forbidden');
});

test('credentials and webhooks', async () => {
  const name = jobId('cred');
  const created = await b.admin.createCredential({ name, role: 'read', scopes: ['node-scope:'] });
  assert.ok(created.token.includes('.'));
  assert.ok(created.createdAt instanceof Date);
  const { credentials } = await b.admin.credentials();
  assert.ok(credentials.some((c) => c.name === name));
  const reader = new Client(b.server.url, { token: created.token, onExchange: b.recorder.onExchange, logger: quietLogger() });
  assert.deepEqual((await reader.whoami()).scopes, ['node-scope:']);
  await rejects(reader.get('elsewhere'), 'forbidden');
  reader.close();
  assert.equal(await b.admin.deleteCredential(created.id), undefined);
  await rejects(b.admin.deleteCredential(created.id), 'not_found');

  const hook = await b.admin.createWebhook({ url: 'https://hooks.example.com/leaseapi', events: ['run.failed'], scopes: ['*'] });
  assert.ok(hook.secret);
  assert.ok((await b.admin.webhooks()).webhooks.some((w) => w.id === hook.id));
  assert.ok(Array.isArray((await b.admin.webhookDeliveries(hook.id)).deliveries));
  assert.equal(await b.admin.deleteWebhook(hook.id), undefined);
});

test('operations endpoints', async () => {
  const health = await b.client.healthz();
  assert.equal(health.status, 'ok');
  assert.match(health.version, /./);
  assert.equal((await b.client.readyz()).status, 'ok');
  assert.match(await b.client.metrics(), /leaseapi_/);
  assert.match(await b.client.openapi(), /^openapi: 3/);
});

test('errors: unauthorized, invalid_request, and bad arguments refused before a call', async () => {
  const stranger = new Client(b.server.url, { token: 'not-a-token', onExchange: b.recorder.onExchange, logger: quietLogger() });
  const err = await rejects(stranger.whoami(), 'unauthorized');
  assert.equal(err.status, 401);
  stranger.close();
  const bad = await rejects(b.client.acquire(jobId('ttl'), { owner: 'a', ttlMs: 10 }), 'invalid_request');
  assert.match(bad.detail, /ttl/i);
  assert.throws(() => b.client.acquire('bad id', { owner: 'a' }), TypeError);
  assert.throws(() => b.client.acquire('x', { owner: 'has space' }), TypeError);
  assert.throws(() => b.client.release('x', { owner: 'a', token: 1, outcome: 'maybe' }), TypeError);
  assert.throws(() => new Client('ftp://x'), TypeError);
});

test('a 429 is retried after its Retry-After', async () => {
  const limited = await b.admin.createCredential({ name: jobId('rate'), role: 'read', scopes: ['*'], ratePerSecond: 1 });
  const statuses = [];
  const c = new Client(b.server.url, {
    token: limited.token,
    logger: quietLogger(),
    onExchange: (e) => {
      statuses.push(e.status);
      b.recorder.onExchange(e);
    },
  });
  // Spend the allowance (bounded: a rate of 1/s allows a burst of a few).
  let refused;
  for (let i = 0; i < 50 && refused === undefined; i++) {
    try {
      await c.whoami({ retryForMs: 0 });
    } catch (err) {
      refused = err;
    }
  }
  assert.ok(refused, '50 calls of a credential limited to 1 per second were never answered 429');
  assert.equal(refused.code, 'rate_limited');
  assert.ok(refused.retryAfter >= 1);
  statuses.length = 0;
  await c.whoami({ retryForMs: 10_000 });
  assert.equal(statuses[0], 429, `the call was not refused first: ${statuses}`);
  assert.equal(statuses.at(-1), 200, `the call was not retried after its 429: ${statuses}`);
  c.close();
});

test('no answer: retried within the retry window, then connection_failed', async () => {
  const port = await freePort(); // nothing listens there
  const lines = [];
  const c = new Client(`http://127.0.0.1:${port}`, { logger: quietLogger(lines), retryForMs: 400 });
  const err = await rejects(c.whoami(), 'connection_failed');
  assert.equal(err.status, undefined);
  assert.ok(lines.some((l) => l.msg === 'leaseapi call failed, retrying'), 'the call was not retried');
  await rejects(c.whoami({ retryForMs: 0 }), 'connection_failed');
  // An aborted call rejects with the signal's reason, and is not retried.
  const controller = new AbortController();
  controller.abort(new Error('caller gave up'));
  await assert.rejects(b.client.whoami({ signal: controller.signal, retryForMs: 10_000 }), /caller gave up/);
});

// A canned answer (node:http) for what a real leaseapi never sends: times
// the client cannot read, a redirect.
async function canned(handler, fn) {
  const srv = http.createServer(handler);
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  try {
    return await fn(`http://127.0.0.1:${srv.address().port}`);
  } finally {
    srv.closeAllConnections();
    await new Promise((resolve) => srv.close(resolve));
  }
}

function lease(jobId, times = {}) {
  return {
    jobId, owner: 'a', token: 1, timeline: 1, state: 'released',
    acquiredAt: '2026-12-01T00:16:03.603Z', renewedAt: '2026-12-01T00:16:03.603Z', expiresAt: '2026-12-01T00:16:33.603Z',
    releasedAt: null, ttlMs: 30000, tick: '2026-12-01T07:00:00.000Z', lastCompletedTick: null, lastOutcome: null,
    schedule: null, graceMs: null, nextTick: null, paused: false, pausedAt: null, pausedBy: null, pausedReason: null,
    missedTicks: 0, skippedTicks: 0, revokedBy: null, catchUp: 'none', catchUpWindowMs: 86400000, owedTick: null, owedReason: null,
    ...times,
  };
}

test('an unreadable time is an error of its field, never of the list', async () => {
  const leases = [
    lease('fine'),
    lease('year-10000', { nextTick: '10000-01-01T00:00:00.000Z', acquiredAt: '+010000-01-01T00:00:00.000Z' }),
    lease('offset', { pausedAt: '2026-01-01T00:00:00+25:00', owedTick: '2026-02-30T00:00:00.000Z' }),
    lease('garbage', { releasedAt: 'yesterday', renewedAt: 17 }),
  ];
  await canned(
    (req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ leases, nextCursor: null, serverTime: '2026-12-01T00:16:03.603Z' }));
    },
    async (url) => {
      const c = new Client(url, { logger: quietLogger() });
      const page = await c.list();
      c.close();
      assert.deepEqual(page.leases.map((l) => l.jobId), ['fine', 'year-10000', 'offset', 'garbage']);
      const byId = Object.fromEntries(page.leases.map((l) => [l.jobId, l]));
      assert.deepEqual(byId.fine.fieldErrors, {});
      assert.deepEqual(Object.keys(byId['year-10000'].fieldErrors).sort(), ['acquiredAt', 'nextTick']);
      assert.deepEqual(Object.keys(byId.offset.fieldErrors).sort(), ['owedTick', 'pausedAt']);
      assert.deepEqual(Object.keys(byId.garbage.fieldErrors).sort(), ['releasedAt', 'renewedAt']);
      assert.equal(byId.garbage.releasedAt, null);
      assert.equal(byId.garbage.raw.releasedAt, 'yesterday');
      assert.ok(byId.garbage.acquiredAt instanceof Date);
    },
  );
});

test('a redirect is refused, never followed', async () => {
  let calls = 0;
  await canned(
    (req, res) => {
      calls++;
      res.writeHead(307, { Location: 'http://127.0.0.1:1/elsewhere' });
      res.end();
    },
    async (url) => {
      const c = new Client(url, { token: 'secret-token', logger: quietLogger() });
      const err = await rejects(c.whoami(), 'protocol_error');
      assert.equal(err.status, 307);
      assert.match(err.message, /redirect/);
      c.close();
    },
  );
  assert.equal(calls, 1);
});
