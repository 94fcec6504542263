// Concurrency groups against a scripted server (node:http) that answers as
// api/openapi.yaml says: the group calls' methods, paths and bodies, the
// lease's slot, the group_full refusal, and the runner retrying it after
// Retry-After while the tick is within its grace.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { groupFullUntil, LeaseApiError, LeaseCoordinator, leased, RETRIED_REFUSALS, Runner } from '../src/index.js';
import { quietLogger, scripted } from './harness.js';

const GROUP = {
  name: 'reports', limit: 1, held: 1, createdBy: 'ops', createdAt: '2026-11-01T00:00:00.000Z',
  holders: [{ jobId: 'other', owner: 'replica-z', token: 4, slot: 1, slotToken: 9, expiresAt: '2026-12-01T07:00:31.000Z' }],
};
const LEASE = {
  jobId: 'j', owner: 'replica-a', token: 3, timeline: 1, state: 'held',
  acquiredAt: '2026-12-01T07:00:01.000Z', renewedAt: '2026-12-01T07:00:01.000Z', expiresAt: '2026-12-01T07:00:31.000Z',
  releasedAt: null, ttlMs: 30000, tick: '2026-12-01T07:00:00.000Z', lastCompletedTick: null, lastOutcome: null,
  schedule: '* * * * *', graceMs: 30000, nextTick: '2999-01-01T00:00:00.000Z', paused: false, pausedAt: null, pausedBy: null,
  pausedReason: null, missedTicks: 0, skippedTicks: 0, revokedBy: null, catchUp: 'none', catchUpWindowMs: 86400000,
  owedTick: null, owedReason: null, group: 'reports', slot: 1, slotToken: 10,
};

function groupFull(lease) {
  const body = {
    type: 'https://leaseapi.dev/problems/group_full', title: 'Group full', status: 409,
    detail: 'every slot of group "reports" is in use (1 of 1)', code: 'group_full', group: GROUP,
    ...(lease === undefined ? {} : { lease }),
  };
  return [409, body, { 'Retry-After': '1' }];
}

test('the group calls', async () => {
  const answers = [
    [200, GROUP],
    [200, GROUP],
    [200, { groups: [GROUP], nextCursor: 'c1' }],
    [200, { groups: [{ ...GROUP, name: 'reports-2', held: 0, holders: [] }], nextCursor: null }],
    [204],
    [200, { ...LEASE, state: 'released', group: null }],
  ];
  await scripted(answers, async (client, requests) => {
    const group = await client.putGroup('reports', { limit: 1 });
    assert.equal(group.name, 'reports');
    assert.equal(group.held, 1);
    assert.ok(group.createdAt instanceof Date);
    assert.equal(group.holders[0].slotToken, 9);
    assert.equal(group.holders[0].expiresAt.toISOString(), '2026-12-01T07:00:31.000Z');
    assert.equal((await client.getGroup('reports')).limit, 1);
    const names = [];
    for await (const g of client.groups({ prefix: 'rep', limit: 1 })) {
      names.push(g.name);
    }
    assert.deepEqual(names, ['reports', 'reports-2']);
    assert.equal(await client.deleteGroup('reports'), undefined);
    assert.equal((await client.leaveGroup('j')).group, null);
    assert.deepEqual(
      requests.map((r) => [r.method, r.path, r.body]),
      [
        ['PUT', '/groups/reports', { limit: 1 }],
        ['GET', '/groups/reports', undefined],
        ['GET', '/groups?prefix=rep&limit=1', undefined],
        ['GET', '/groups?prefix=rep&limit=1&cursor=c1', undefined],
        ['DELETE', '/groups/reports', undefined],
        ['DELETE', '/leases/j/group', undefined],
      ],
    );
  });
});

test('a group limit and name are checked before sending', async () => {
  await scripted([], async (client, requests) => {
    for (const limit of [0, 10001, 1.5, '2']) {
      assert.throws(() => client.putGroup('reports', { limit }), RangeError);
    }
    assert.throws(() => client.getGroup('two words'), TypeError);
    assert.throws(() => client.acquire('j', { owner: 'a', group: 'two words' }), TypeError);
    assert.equal(requests.length, 0);
  });
});

test('the acquire sends the group; the lease carries the slot; group_full carries the group', async () => {
  await scripted([[200, LEASE], groupFull({ ...LEASE, owner: 'replica-z' })], async (client, requests) => {
    const lease = await client.acquire('j', { owner: 'replica-a', group: 'reports' });
    assert.deepEqual([lease.group, lease.slot, lease.slotToken], ['reports', 1, 10]);
    const err = await client.acquire('j', { owner: 'replica-a', group: '' }).then(
      () => assert.fail('resolved, wanted group_full'),
      (e) => e,
    );
    assert.ok(err instanceof LeaseApiError);
    assert.equal(err.code, 'group_full');
    assert.ok(err.notAcquired);
    assert.ok(!err.retryable, 'group_full is the runner\'s to retry, not the client\'s');
    assert.equal(err.retryAfter, 1);
    assert.equal(err.group.name, 'reports');
    assert.equal(err.group.holders[0].jobId, 'other');
    assert.equal(err.lease.owner, 'replica-z');
    assert.deepEqual(requests.map((r) => r.body.group), ['reports', '']);
  });
});

test('the runner retries group_full after Retry-After while the tick is within its grace', async () => {
  assert.ok(RETRIED_REFUSALS.has('group_full'));
  const tick = new Date(Math.floor(Date.now() / 1000) * 1000);
  // No graceMs given: the grace the refusal's lease holds (30 s) counts.
  const answers = [groupFull({ ...LEASE, tick: null }), groupFull({ ...LEASE, tick: null }), [200, LEASE], [200, { ...LEASE, state: 'released' }]];
  await scripted(answers, async (client, requests) => {
    const runner = new Runner(client, { owner: 'replica-a', logger: quietLogger() });
    const seen = [];
    const report = await runner.run('j', (ctx) => seen.push([ctx.slot, ctx.slotToken]), { tick, schedule: '* * * * *', group: 'reports' });
    assert.equal(report.result, 'succeeded');
    assert.deepEqual([report.slot, report.slotToken], [1, 10]);
    assert.deepEqual(seen, [[1, 10]]);
    const acquires = requests.filter((r) => r.path === '/leases/j/acquire');
    assert.equal(acquires.length, 3);
    assert.ok(acquires.every((r) => r.body.group === 'reports'));
    for (let i = 1; i < acquires.length; i++) {
      const gap = acquires[i].at - acquires[i - 1].at;
      assert.ok(gap >= 1000, `retried ${gap} ms after a refusal with Retry-After: 1`);
    }
  });
});

test('the runner skips a tick whose group stays full past its grace', async () => {
  await scripted([groupFull(), groupFull({ ...LEASE, graceMs: 500 })], async (client, requests) => {
    const runner = new Runner(client, { owner: 'replica-a', logger: quietLogger() });
    let called = false;
    // The grace ends within a second: a retry after Retry-After: 1 would come too late.
    const skip = await runner.run('j', () => (called = true), { tick: new Date(), schedule: '* * * * *', graceMs: 500, group: 'reports' });
    assert.equal(skip.result, 'skipped');
    assert.equal(skip.code, 'group_full');
    assert.equal(skip.error.group.name, 'reports');
    // nearestTick, as the integrations may acquire: the grace counts from the first refusal.
    const again = await runner.run('j', () => (called = true), { nearestTick: true, schedule: '* * * * *', group: 'reports' });
    assert.equal(again.code, 'group_full');
    assert.equal(called, false);
    assert.equal(requests.length, 2);
  });
});

test('groupFullUntil', () => {
  const now = Date.parse('2026-12-01T07:00:02.000Z');
  const tick = new Date('2026-12-01T07:00:00.000Z');
  const withLease = (over = {}) => ({ lease: { graceMs: 30000, nextTick: new Date('2999-01-01T00:00:00.000Z'), ...over } });
  assert.equal(groupFullUntil({ tick, graceMs: 10000, refusal: withLease(), now, acquireWaitMs: 5000 }), tick.getTime() + 10000);
  assert.equal(groupFullUntil({ tick, refusal: withLease(), now, acquireWaitMs: 5000 }), tick.getTime() + 30000);
  assert.equal(groupFullUntil({ refusal: withLease(), now, acquireWaitMs: 5000 }), now + 30000);
  assert.equal(groupFullUntil({ tick, refusal: {}, now, acquireWaitMs: 5000 }), now + 5000);
  const soon = new Date('2026-12-01T07:00:20.000Z');
  assert.equal(groupFullUntil({ tick, refusal: withLease({ nextTick: soon }), now, acquireWaitMs: 5000 }), soon.getTime());
});

test('the integrations send the group: node-cron\'s coordinator and croner\'s leased()', async () => {
  const fire = new Date('2026-12-01T07:00:00.000Z');
  await scripted([groupFull(), groupFull()], async (client, requests) => {
    const runner = new Runner(client, { owner: 'replica-a', owedPollIntervalMs: 0, logger: quietLogger() });
    const coordinator = new LeaseCoordinator(runner);
    const fakeCron = { schedule: (_expr, _fn, options) => options };
    const options = coordinator.schedule(fakeCron, '* * * * *', 'grouped', () => {}, { group: 'reports', graceMs: 500 });
    assert.equal(options.runCoordinator, coordinator);
    // The fire time's grace (0.5 s) is long past: one refusal, not run.
    assert.equal(await coordinator.shouldRun(`grouped:${fire.toISOString()}`), false);

    const croned = leased(runner, { job: 'croned', schedule: '* * * * *', graceMs: 500, group: 'reports' }, () => assert.fail('ran in a full group'));
    const report = await croned({ currentRun: () => fire, previousRuns: () => [fire] }, undefined);
    assert.equal(report.code, 'group_full');
    assert.deepEqual(
      requests.map((r) => [r.path, r.body.group, r.body.tick]),
      [
        ['/leases/grouped/acquire', 'reports', fire.toISOString()],
        ['/leases/croned/acquire', 'reports', fire.toISOString()],
      ],
    );
  });
});
