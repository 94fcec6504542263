// Concurrency groups against a real leaseapi: the group calls, the slot of
// a grant, group_full naming the holder, and the runner waiting out a full
// group within the tick's grace; every answer checked against the spec.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { LeaseApiError, Runner } from '../src/index.js';
import { quietLogger, useServer } from './harness.js';

const b = useServer('groups');
let n = 0;
const name = (what) => `node-groups-${what}-${process.pid}-${n++}`;

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

test('put, get, list, delete and leave a group', async () => {
  const group = name('calls');
  const job = name('job');
  await rejects(b.client.putGroup(group, { limit: 2 }), 'forbidden');
  const made = await b.admin.putGroup(group, { limit: 2 });
  assert.deepEqual([made.name, made.limit, made.held, made.holders], [group, 2, 0, []]);
  assert.ok(made.createdAt instanceof Date);

  const lease = await b.client.acquire(job, { owner: 'a', ttlMs: 5000, group });
  assert.deepEqual([lease.group, lease.slot], [group, 1]);
  assert.ok(lease.slotToken >= 1);
  const got = await b.client.getGroup(group);
  assert.equal(got.held, 1);
  assert.deepEqual([got.holders[0].jobId, got.holders[0].slot, got.holders[0].slotToken], [job, 1, lease.slotToken]);
  assert.ok(got.holders[0].expiresAt instanceof Date);
  const names = [];
  for await (const g of b.client.groups({ prefix: group })) {
    names.push(g.name);
  }
  assert.deepEqual(names, [group]);

  const inUse = await rejects(b.admin.deleteGroup(group), 'group_in_use');
  assert.match(inUse.detail, new RegExp(job));
  const left = await b.admin.leaveGroup(job);
  assert.equal(left.group, null);
  assert.equal(await b.admin.deleteGroup(group), undefined);
  await rejects(b.client.getGroup(group), 'not_found');
});

test('a full group refuses group_full naming its holder; past the grace the tick is skipped', async () => {
  const group = name('full');
  await b.admin.putGroup(group, { limit: 1 });
  const holder = name('holder');
  await b.client.acquire(holder, { owner: 'a', ttlMs: 60_000, group });

  const waiter = name('waiter');
  const full = await rejects(b.client.acquire(waiter, { owner: 'b', group }), 'group_full');
  assert.ok(full.notAcquired);
  assert.ok(full.retryAfter >= 1, `Retry-After ${full.retryAfter}`);
  assert.equal(full.group.name, group);
  assert.deepEqual([full.group.limit, full.group.held, full.group.holders[0].jobId], [1, 1, holder]);

  // The tick's grace (1 s) ends before Retry-After (about a minute): skipped.
  const runner = new Runner(b.client, { owner: 'b', ttlMs: 3000, logger: quietLogger() });
  const now = Date.now();
  const tick = new Date(now - (now % 60_000));
  let called = false;
  const report = await runner.run(waiter, () => (called = true), { tick, schedule: '* * * * *', graceMs: 1000, group });
  assert.equal(report.result, 'skipped');
  assert.equal(report.code, 'group_full');
  assert.equal(report.error.group.holders[0].jobId, holder);
  assert.equal(called, false);
});

test('the runner retries group_full after Retry-After and wins the slot its holder let expire', async () => {
  const group = name('retry');
  await b.admin.putGroup(group, { limit: 1 });
  const held = await b.client.acquire(name('holder'), { owner: 'a', ttlMs: 1500, group });
  // No tick nor grace: retried for acquireWaitMs (10 s), far beyond the
  // holder's expiry.
  const runner = new Runner(b.client, { owner: 'b', ttlMs: 3000, logger: quietLogger() });
  const waiter = name('waiter');
  const report = await runner.run(waiter, ({ slot, slotToken }) => [slot, slotToken], { group });
  assert.equal(report.result, 'succeeded', String(report.error));
  assert.equal(report.value[0], 1);
  assert.ok(report.value[1] > held.slotToken, `slot token ${report.value[1]} after ${held.slotToken}`);
  assert.deepEqual([report.slot, report.slotToken], report.value);
  const refused = b.recorder.exchanges.filter((e) => e.path === `/leases/${waiter}/acquire` && e.status === 409);
  assert.ok(refused.length >= 1, 'the first acquire was refused group_full');
});
