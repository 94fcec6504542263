// The client and the runner against the answers a later leaseapi may give,
// which API v1 allows (docs/upgrading.md), from a scripted server: fields
// the client does not know (carried along, never in the way), values of an
// extensible enum it does not know (kept as the strings they are), and
// problem codes it does not know (read by their HTTP status: a
// LeaseApiError with the code and the status).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { LeaseApiError, Runner } from '../src/index.js';
import { quietLogger, scripted } from './harness.js';

const NEW = { someNewField: { since: 'a later release' } };
const LEASE = {
  jobId: 'j', owner: 'replica-a', token: 3, timeline: 1, state: 'held',
  acquiredAt: '2026-12-01T07:00:01.000Z', renewedAt: '2026-12-01T07:00:01.000Z', expiresAt: '2026-12-01T07:00:31.000Z',
  releasedAt: null, ttlMs: 30000, tick: '2026-12-01T07:00:00.000Z', lastCompletedTick: null, lastOutcome: null,
  schedule: null, graceMs: null, nextTick: null, paused: false, pausedAt: null, pausedBy: null, pausedReason: null,
  missedTicks: 0, skippedTicks: 0, revokedBy: null, catchUp: 'some_new_policy', catchUpWindowMs: 86400000,
  owedTick: '2026-12-01T07:00:00.000Z', owedReason: 'some_new_reason', group: null, slot: null, slotToken: null, alerting: false,
  ...NEW,
};

function problem(status, code, extra = {}) {
  return { type: `https://leaseapi.dev/problems/${code}`, title: 'Something new', status, detail: 'an answer of a later release', code, ...NEW, ...extra };
}

async function rejection(promise) {
  return promise.then(
    () => assert.fail('resolved, wanted a LeaseApiError'),
    (err) => {
      assert.ok(err instanceof LeaseApiError, `${err}`);
      return err;
    },
  );
}

test('fields and values it does not know', async () => {
  const run = {
    jobId: 'j', token: 3, owner: 'replica-a', tick: '2026-12-01T07:00:00.000Z', startedAt: '2026-12-01T07:00:01.000Z',
    endedAt: null, outcome: 'running', durationMs: null, revokedBy: null, trigger: 'some_new_trigger', triggeredBy: null, ...NEW,
  };
  await scripted([[200, LEASE], [200, { runs: [run], ...NEW }]], async (client) => {
    const lease = await client.get('j');
    assert.deepEqual([lease.owner, lease.token, lease.catchUp, lease.owedReason], ['replica-a', 3, 'some_new_policy', 'some_new_reason']);
    assert.equal(lease.expiresAt.toISOString(), '2026-12-01T07:00:31.000Z');
    assert.deepEqual(lease.fieldErrors, {});
    const { runs } = await client.runs('j');
    assert.deepEqual(runs.map((r) => [r.token, r.trigger, r.startedAt.toISOString()]), [[3, 'some_new_trigger', '2026-12-01T07:00:01.000Z']]);
  });
});

test('a refusal it does not know', async () => {
  await scripted([[409, problem(409, 'some_new_refusal', { lease: { ...LEASE, owner: 'replica-z' } })]], async (client, requests) => {
    const err = await rejection(client.acquire('j', { owner: 'replica-a' }));
    assert.deepEqual([err.code, err.status], ['some_new_refusal', 409]);
    assert.equal(err.notAcquired, false, 'not a refusal the runner would skip');
    assert.equal(err.retryable, false, 'a 409 is not retried');
    assert.equal(err.lease.owner, 'replica-z');
    assert.match(err.message, /409 some_new_refusal/);
    assert.equal(requests.length, 1);
  });
});

test('other codes it does not know, by their status', async () => {
  for (const status of [400, 401, 403, 404, 500]) {
    await scripted([[status, problem(status, 'some_new_code')]], async (client, requests) => {
      const err = await rejection(client.get('j'));
      assert.deepEqual([err.code, err.status, err.retryable], ['some_new_code', status, false]);
      assert.equal(requests.length, 1);
    });
  }
});

test('an outage or a limit it does not know is retried', async () => {
  const answers = [
    [503, problem(503, 'some_new_outage'), { 'Retry-After': '1' }],
    [429, problem(429, 'some_new_limit'), { 'Retry-After': '1' }],
    [200, LEASE],
  ];
  await scripted(answers, async (client, requests) => {
    assert.equal((await client.acquire('j', { owner: 'replica-a' })).token, 3);
    assert.equal(requests.length, 3);
  });
});

test('the runner', async () => {
  const answers = [
    [200, LEASE],
    [200, { ...LEASE, state: 'released' }],
    [409, problem(409, 'some_new_refusal', { lease: { ...LEASE, owner: 'replica-z' } })],
  ];
  await scripted(answers, async (client, requests) => {
    const runner = new Runner(client, { owner: 'replica-a', owedPollIntervalMs: 0, logger: quietLogger() });
    const called = [];
    const report = await runner.run('j', (ctx) => called.push(ctx.token));
    assert.equal(report.result, 'succeeded');
    const err = await rejection(runner.run('j', (ctx) => called.push(ctx.token)));
    assert.deepEqual([err.code, err.status, err.notAcquired], ['some_new_refusal', 409, false]);
    assert.deepEqual(called, [3], 'the refused run did not start');
    assert.equal(requests.length, 3);
  });
});
