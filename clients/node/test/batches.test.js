// Batches against a real leaseapi on Postgres: the client's per-item
// results and errors and its retry of the items answered 429; the runner's
// acquires and heartbeats of many jobs at one tick in fewer requests than
// jobs, each job run once; the switch that turns batching off; and the
// fallback to single calls against a leaseapi without the batch routes (a
// stub that answers them 404 and forwards the rest).

import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';

import { Client, LeaseApiError, Runner } from '../src/index.js';
import { LEASE_TOKEN, quietLogger, useServer } from './harness.js';

const b = useServer('batches');
let n = 0;
const jobId = (name) => `node-batch-${name}-${process.pid}-${n++}`;
const TICK = new Date('2026-11-30T07:00:00.000Z');

/** leaseapi_http_requests_total summed over the codes, by route. */
async function requestsByRoute() {
  const counts = {};
  for (const m of (await b.client.metrics()).matchAll(/^leaseapi_http_requests_total\{code="\d+",route="([^"]+)"\} (\S+)$/gm)) {
    counts[m[1]] = (counts[m[1]] ?? 0) + Number(m[2]);
  }
  return counts;
}

const delta = (before, after, route) => (after[route] ?? 0) - (before[route] ?? 0);

function client(token = LEASE_TOKEN, options = {}) {
  return new Client(b.server.url, { token, retryForMs: 10_000, onExchange: b.recorder.onExchange, logger: quietLogger(), ...options });
}

test('acquireBatch answers each item as its single call', async () => {
  const id = jobId('acq');
  const held = await b.client.acquire(`${id}.held`, { owner: 'replica-b', ttlMs: 30_000, tick: TICK });
  const done = await b.client.acquire(`${id}.done`, { owner: 'replica-b', ttlMs: 30_000, tick: TICK });
  await b.client.release(`${id}.done`, { owner: 'replica-b', token: done.token });

  const results = await b.client.acquireBatch(
    [
      { jobId: `${id}.free`, schedule: '0 7 * * *' },
      { jobId: `${id}.held` },
      { jobId: `${id}.done` },
      { jobId: `${id}.own`, owner: 'replica-c', ttlMs: 7000 },
      { jobId: `${id}.bad`, schedule: 'not a cron spec' },
    ],
    { owner: 'replica-a', ttlMs: 5000, tick: TICK },
  );
  assert.equal(results.length, 5);
  const [free, refused, ran, own, bad] = results;
  assert.ok(!(free instanceof LeaseApiError), String(free));
  assert.deepEqual([free.owner, free.tick.getTime(), free.ttlMs, free.schedule], ['replica-a', TICK.getTime(), 5000, '0 7 * * *']);
  assert.ok(refused instanceof LeaseApiError && refused.code === 'lease_held' && refused.status === 409 && refused.notAcquired);
  assert.ok(refused.retryAfter >= 1, `retryAfter ${refused.retryAfter}`);
  assert.equal(refused.lease.owner, 'replica-b');
  assert.equal(refused.lease.token, held.token);
  assert.ok(refused.requestId, 'the batch answer names its request id');
  assert.ok(ran instanceof LeaseApiError && ran.code === 'tick_done');
  assert.equal(ran.lease.lastCompletedTick.getTime(), TICK.getTime());
  assert.deepEqual([own.owner, own.ttlMs], ['replica-c', 7000], "an item's own fields win over the defaults");
  assert.ok(bad instanceof LeaseApiError && bad.code === 'invalid_request' && bad.status === 400 && /schedule/.test(bad.detail));

  // The same error as the single call throws.
  const single = await b.client.acquire(`${id}.held`, { owner: 'replica-a', tick: TICK }).catch((err) => err);
  assert.deepEqual([single.code, single.status, single.detail], [refused.code, refused.status, refused.detail]);

  assert.throws(() => b.client.acquireBatch([{ jobId: id }, { jobId: id }], { owner: 'a' }), /once per batch/);
  assert.throws(() => b.client.acquireBatch([{ jobId: id, tik: TICK }], { owner: 'a' }), /unknown acquire field "tik"/);
});

test('acquireBatch checks the scopes of each item', async () => {
  const id = jobId('scope');
  const scope = `${id}.team.`;
  const cred = await b.admin.createCredential({ name: `${id}-team`, role: 'lease', scopes: [scope] });
  const scoped = client(cred.token);
  try {
    const [inside, outside] = await scoped.acquireBatch([{ jobId: `${scope}a` }, { jobId: `${id}.other.a` }], { owner: 'replica-a', tick: TICK });
    assert.ok(!(inside instanceof LeaseApiError), String(inside));
    assert.ok(outside instanceof LeaseApiError && outside.code === 'forbidden' && outside.status === 403, `403 for one item does not fail the others: ${outside.jobId ?? outside.code}`);
  } finally {
    scoped.close();
  }
});

test('acquireBatch sends the items beyond the rate again until granted', async () => {
  const id = jobId('rate');
  const cred = await b.admin.createCredential({ name: `${id}-slow`, role: 'lease', scopes: [`${id}.`], ratePerSecond: 2 });
  const items = [0, 1, 2, 3, 4].map((i) => ({ jobId: `${id}.${i}` }));
  const once = client(cred.token, { retryForMs: 0 });
  const patient = client(cred.token, { retryForMs: 30_000 });
  try {
    const first = await once.acquireBatch(items, { owner: 'replica-a', tick: TICK });
    const limited = first.filter((r) => r instanceof LeaseApiError);
    assert.ok(limited.length > 0 && limited.every((r) => r.code === 'rate_limited' && r.status === 429 && r.retryable), 'the items beyond the bucket are 429');
    assert.ok(first.some((r) => !(r instanceof LeaseApiError)));

    const results = await patient.acquireBatch(items, { owner: 'replica-a', tick: TICK });
    assert.ok(results.every((r) => !(r instanceof LeaseApiError)), String(results.find((r) => r instanceof LeaseApiError)));
    assert.deepEqual(results.map((r) => r.jobId), items.map((i) => i.jobId));
  } finally {
    once.close();
    patient.close();
  }
});

test('heartbeatBatch renews, and answers lease_lost and not_found in place', async () => {
  const id = jobId('beat');
  const a = await b.client.acquire(`${id}.a`, { owner: 'replica-a', ttlMs: 5000, tick: TICK });
  const gone = await b.client.acquire(`${id}.b`, { owner: 'replica-a', ttlMs: 5000, tick: TICK });
  await b.admin.revoke(`${id}.b`);
  const [renewed, lost, unknown] = await b.client.heartbeatBatch(
    [
      { jobId: `${id}.a`, token: a.token },
      { jobId: `${id}.b`, token: gone.token },
      { jobId: `${id}.never`, token: 1, owner: 'replica-z', ttlMs: 4000 },
    ],
    { owner: 'replica-a', ttlMs: 6000 },
  );
  assert.deepEqual([renewed.token, renewed.ttlMs], [a.token, 6000]);
  assert.ok(lost instanceof LeaseApiError && lost.code === 'lease_lost' && lost.status === 409);
  assert.ok(unknown instanceof LeaseApiError && unknown.code === 'not_found' && unknown.status === 404);
});

/** Runs every job on every runner at once, each run holding its lease for holdMs; resolves to the reports. */
function runAtOnce(runners, jobs, holdMs) {
  return Promise.all(runners.flatMap((r) => jobs.map((j) => r.run(j, () => new Promise((resolve) => setTimeout(resolve, holdMs)), { tick: TICK }))));
}

test('runners send the acquires and heartbeats of one tick in batches, and run each job once', async () => {
  const id = jobId('tick');
  const jobs = Array.from({ length: 30 }, (_, i) => `${id}.${i}`);
  // Three replicas, each its own client and runner; runs of 2.5 s heartbeat
  // twice (every TTL/3 = 1 s).
  const clients = [0, 1, 2].map(() => client());
  const runners = clients.map((c, i) => new Runner(c, { owner: `replica-${i}`, ttlMs: 3000, logger: quietLogger() }));
  try {
    const before = await requestsByRoute();
    const reports = await runAtOnce(runners, jobs, 2500);
    const after = await requestsByRoute();

    const ran = reports.filter((r) => r.result !== 'skipped');
    assert.deepEqual(ran.map((r) => r.jobId).sort(), [...jobs].sort(), 'each job runs once');
    assert.ok(ran.every((r) => r.result === 'succeeded'), String(ran.find((r) => r.result !== 'succeeded')?.error));
    assert.ok(reports.every((r) => r.result === 'succeeded' || r.code === 'lease_held'));

    const acquires = delta(before, after, '/acquire') + delta(before, after, '/leases/{jobId}/acquire');
    assert.ok(delta(before, after, '/acquire') >= 1);
    assert.ok(acquires < jobs.length, `${jobs.length * runners.length} acquires took ${acquires} requests`);
    const heartbeats = delta(before, after, '/heartbeat') + delta(before, after, '/leases/{jobId}/heartbeat');
    assert.ok(delta(before, after, '/heartbeat') >= 1);
    assert.ok(heartbeats < jobs.length, `the heartbeats of ${jobs.length} runs took ${heartbeats} requests`);
  } finally {
    clients.forEach((c) => c.close());
  }
});

test('a runner with batch: false sends single calls', async () => {
  const id = jobId('single');
  const jobs = Array.from({ length: 5 }, (_, i) => `${id}.${i}`);
  const c = client();
  try {
    const before = await requestsByRoute();
    const reports = await runAtOnce([new Runner(c, { owner: 'replica-a', ttlMs: 3000, logger: quietLogger(), batch: false })], jobs, 0);
    const after = await requestsByRoute();
    assert.ok(reports.every((r) => r.result === 'succeeded'));
    assert.equal(delta(before, after, '/acquire'), 0);
    assert.equal(delta(before, after, '/leases/{jobId}/acquire'), jobs.length);
  } finally {
    c.close();
  }
});

test('a runner falls back to single calls for good when the batch routes are missing', async () => {
  // A leaseapi as an older version answers: 404 for the batch routes,
  // everything else forwarded to the real one.
  const paths = [];
  const stub = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) {
      chunks.push(chunk);
    }
    paths.push(req.url);
    if (req.url === '/acquire' || req.url === '/heartbeat') {
      res.writeHead(404, { 'Content-Type': 'application/problem+json' });
      res.end(JSON.stringify({ type: 'https://leaseapi.dev/problems/not_found', title: 'Not found', status: 404, detail: 'no such route', code: 'not_found' }));
      return;
    }
    const headers = { authorization: req.headers.authorization, 'content-type': req.headers['content-type'] ?? 'application/json' };
    const answer = await fetch(b.server.url + req.url, { method: req.method, headers, body: chunks.length > 0 ? Buffer.concat(chunks) : undefined });
    res.writeHead(answer.status, { 'Content-Type': answer.headers.get('content-type') ?? 'application/json' });
    res.end(Buffer.from(await answer.arrayBuffer()));
  });
  await new Promise((resolve) => stub.listen(0, '127.0.0.1', resolve));
  const lines = [];
  const c = new Client(`http://127.0.0.1:${stub.address().port}`, { token: LEASE_TOKEN, logger: quietLogger() });
  const runner = new Runner(c, { owner: 'replica-a', ttlMs: 3000, logger: quietLogger(lines) });
  try {
    const id = jobId('old');
    const jobs = Array.from({ length: 8 }, (_, i) => `${id}.${i}`);
    const first = await runAtOnce([runner], jobs, 1500);
    assert.ok(first.every((r) => r.result === 'succeeded'), String(first.find((r) => r.result !== 'succeeded')?.error));
    assert.deepEqual(paths.filter((p) => p === '/acquire' || p === '/heartbeat'), ['/acquire'], 'one batch tried, then single calls');
    assert.equal(paths.filter((p) => p.endsWith('/acquire') && p !== '/acquire').length, jobs.length);
    assert.ok(paths.some((p) => p.endsWith('/heartbeat')), 'the runs heartbeat (single calls)');
    assert.equal(lines.filter((l) => /does not serve batches/.test(l.msg)).length, 1, 'logged once');

    const second = await runAtOnce([runner], jobs.map((j) => `${j}-again`), 0);
    assert.ok(second.every((r) => r.result === 'succeeded'));
    assert.deepEqual(paths.filter((p) => p === '/acquire' || p === '/heartbeat'), ['/acquire'], 'no batch is tried again');
  } finally {
    c.close();
    await new Promise((resolve) => stub.close(resolve));
  }
});
