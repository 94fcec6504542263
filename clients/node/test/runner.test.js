// The runner against a real leaseapi: release by result, heartbeats, the
// AbortSignal on a revoked lease and on shutdown, quiet skips, owed ticks.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Runner, RunStoppedError } from '../src/index.js';
import { quietLogger, useServer, waitUntil } from './harness.js';

const b = useServer('runner');
// Bounds each wait of a test for something the runner must do.
const WAIT_MS = 20_000;
let n = 0;
const jobId = (name) => `node-runner-${name}-${process.pid}-${n++}`;

function runner(owner, options = {}) {
  return new Runner(b.client, { owner, ttlMs: 3_000, logger: quietLogger(), ...options });
}

/** Resolves when `signal` aborts; rejects after WAIT_MS (the test then fails). */
function aborted(signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`signal not aborted within ${WAIT_MS} ms`)), WAIT_MS);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve(signal.reason);
    }, { once: true });
    if (signal.aborted) {
      clearTimeout(timer);
      resolve(signal.reason);
    }
  });
}

const heartbeatsOf = (id) => b.recorder.exchanges.filter((e) => e.path === `/leases/${id}/heartbeat` && e.status === 200).length;

test('a run heartbeats while the job runs and is released succeeded with its value', async () => {
  const id = jobId('ok');
  const tick = new Date(Math.floor(Date.now() / 1000) * 1000);
  const report = await runner('r1').run(id, async ({ signal, token, tick: t }) => {
    assert.equal(signal.aborted, false);
    assert.equal(t.getTime(), tick.getTime());
    // Runs across two heartbeats (every TTL/3).
    await waitUntil('two heartbeats', () => heartbeatsOf(id) >= 2, WAIT_MS);
    return token;
  }, { tick });
  assert.equal(report.result, 'succeeded', String(report.error));
  assert.equal(report.value, report.token);
  const lease = await b.client.get(id);
  assert.equal(lease.state, 'released');
  assert.equal(lease.lastCompletedTick.getTime(), tick.getTime());
  assert.equal((await b.client.runs(id)).runs[0].outcome, 'succeeded');
});

test('a job that throws is released failed', async () => {
  const id = jobId('fail');
  const report = await runner('r1').run(id, () => {
    throw new Error('boom');
  });
  assert.equal(report.result, 'failed');
  assert.equal(report.error.message, 'boom');
  assert.equal((await b.client.runs(id)).runs[0].outcome, 'failed');
});

test('a revoked lease aborts the job with lease_lost, and the run is lost', async () => {
  const id = jobId('revoked');
  let reason;
  const report = await runner('r1').run(id, async ({ signal }) => {
    await b.admin.revoke(id);
    reason = await aborted(signal);
  });
  assert.ok(reason instanceof RunStoppedError);
  assert.equal(reason.reason, 'lease_lost');
  assert.equal(reason.cause.code, 'lease_lost');
  assert.equal(report.result, 'lost');
  assert.equal((await b.client.runs(id)).runs[0].outcome, 'revoked');
});

test('a server that stops answering: the job is aborted at the local deadline, and the run is lost', async () => {
  const id = jobId('deadline');
  let reason;
  const report = await runner('r1').run(id, async ({ signal }) => {
    b.server.freeze();
    try {
      reason = await aborted(signal);
    } finally {
      b.server.thaw();
    }
  });
  assert.ok(reason instanceof RunStoppedError);
  assert.equal(reason.reason, 'deadline');
  assert.equal(report.result, 'lost');
});

test('refused acquires are quiet skips: lease_held, tick_done, job_paused, and a job running in this process', async () => {
  const id = jobId('skip');
  const tick = new Date(Math.floor(Date.now() / 1000) * 1000);
  const other = await b.client.acquire(id, { owner: 'other', ttlMs: 5_000, tick });
  const r = runner('r1');
  const never = () => assert.fail('the job ran');
  assert.equal((await r.run(id, never, { tick })).code, 'lease_held');
  await b.client.release(id, { owner: 'other', token: other.token });
  assert.equal((await r.run(id, never, { tick })).code, 'tick_done');
  await b.admin.pause(id);
  const paused = await r.run(id, never, { tick: new Date(tick.getTime() + 1000) });
  assert.deepEqual([paused.result, paused.code], ['skipped', 'job_paused']);
  await b.admin.resume(id);
  // A tick past the server's clock plus its window (5 min): this host's clock
  // would be fast. Skipped, and said so in a warning.
  const lines = [];
  const ahead = await runner('r1', { logger: quietLogger(lines) }).run(id, never, { tick: new Date(Date.now() + 3_600_000) });
  assert.deepEqual([ahead.result, ahead.code], ['skipped', 'tick_ahead']);
  const warning = lines.find((l) => l.level === 'warn' && l.msg.includes('clock is fast'));
  assert.ok(warning, 'no warning about the fast clock');
  assert.equal(typeof warning.clock_fast_seconds, 'number', 'the warning says by how much');
  assert.ok(warning.server_time instanceof Date, 'the warning names the server\'s clock');

  const twice = jobId('twice');
  let release;
  const first = r.run(twice, () => new Promise((resolve) => {
    release = resolve;
  }));
  await waitUntil('the first run started', () => release !== undefined, WAIT_MS);
  assert.equal((await r.run(twice, never)).code, 'lease_held');
  release();
  assert.equal((await first).result, 'succeeded');
});

test('shutdown aborts the running job and releases it failed', async () => {
  const id = jobId('shutdown');
  const r = runner('r1');
  let started;
  const report = r.run(id, async ({ signal }) => {
    started = true;
    return (await aborted(signal)).reason;
  });
  await waitUntil('the job started', () => started, WAIT_MS);
  await r.shutdown();
  const rep = await report;
  assert.equal(rep.result, 'failed');
  assert.equal(rep.error.reason, 'shutdown');
  assert.equal((await b.client.get(id)).lastOutcome, 'failed');
  await assert.rejects(r.run(jobId('after'), () => {}), RunStoppedError);
});

test('an owed tick (run now) is claimed by one runner of three, with the owed tick', async () => {
  const id = jobId('owed');
  const first = await b.client.acquire(id, { owner: 'seed', ttlMs: 3_000, nearestTick: true, schedule: '0 0 1 1 *' });
  await b.client.release(id, { owner: 'seed', token: first.token });
  const triggered = await b.admin.trigger(id, { reason: 'node test' });
  const ran = [];
  const runners = ['o1', 'o2', 'o3'].map((owner) => {
    const r = runner(owner, { owedPollIntervalMs: 0 });
    r.watchOwed(id, ({ tick }) => ran.push({ owner, tick }));
    return r;
  });
  const claims = (await Promise.all(runners.map((r) => r.pollOwed()))).flat();
  await Promise.all(claims);
  assert.equal(ran.length, 1, `ran ${JSON.stringify(ran)}`);
  assert.equal(ran[0].tick.getTime(), triggered.owedTick.getTime());
  const run = (await b.client.runs(id)).runs[0];
  assert.equal(run.trigger, 'manual');
  assert.equal(run.outcome, 'succeeded');
  assert.equal((await b.client.owed([id])).owed.length, 0);
});
