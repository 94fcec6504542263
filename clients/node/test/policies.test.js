// Alert policies against a real leaseapi on Postgres: set, read, replace
// and delete a job's policy, the job alerting and ok again as its runs fail
// and succeed (on the policy and on the lease), and the errors. Every answer
// is checked against the spec when the file ends.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { LeaseApiError } from '../src/index.js';
import { useServer } from './harness.js';

const b = useServer('policies');
let n = 0;
const jobId = (name) => `node-policy-${name}-${process.pid}-${n++}`;
const TICK = Date.UTC(2026, 10, 30, 7, 0);
const DAY = 24 * 3600 * 1000;

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

/** One run of the job on day `day` after TICK, released with `outcome`; the release's answer. */
async function run(id, day, outcome) {
  const lease = await b.client.acquire(id, { owner: 'a', ttlMs: 30_000, tick: new Date(TICK + day * DAY) });
  return b.client.release(id, { owner: 'a', token: lease.token, outcome });
}

test('a policy set, decided as runs fail and succeed, replaced and deleted', async () => {
  const id = jobId('cycle');
  const first = await run(id, 0, 'succeeded');
  assert.equal(first.alerting, false, 'no policy, not alerting');

  const policy = await b.admin.putPolicy(id, { consecutiveFailures: 2, failureRate: { threshold: 0.5, runs: 10 }, maxRuntimeMs: 300_000, realertAfterMs: 3_600_000 });
  assert.equal(policy.jobId, id);
  assert.equal(policy.consecutiveFailures, 2);
  assert.deepEqual(policy.failureRate, { threshold: 0.5, runs: 10 });
  assert.equal(policy.maxRuntimeMs, 300_000);
  assert.equal(policy.minRuntimeMs, undefined, 'a condition not set is omitted');
  assert.equal(policy.recoveryThreshold, 1, 'the default, always present');
  assert.equal(policy.status, 'ok');
  assert.deepEqual(policy.alertReasons, []);
  assert.ok(policy.statusSince instanceof Date && policy.updatedAt instanceof Date);
  assert.equal(policy.lastAlertAt, null);
  assert.deepEqual(policy.fieldErrors, {});
  assert.deepEqual(await b.client.policy(id), policy, 'the read role reads it as it was set');

  await run(id, 1, 'failed');
  assert.equal((await b.client.policy(id)).status, 'ok', 'one failure of two');
  const second = await run(id, 2, 'failed');
  assert.equal(second.alerting, true, 'the release answers the job as its policy decided it');
  assert.deepEqual(second.alertReasons, ['failures']);
  const alerting = await b.client.policy(id);
  assert.equal(alerting.status, 'alerting');
  assert.deepEqual(alerting.alertReasons, ['failures']);
  assert.ok(alerting.lastAlertAt instanceof Date);
  assert.equal((await b.client.get(id)).alerting, true);

  const recovered = await run(id, 3, 'succeeded');
  assert.equal(recovered.alerting, false);
  assert.equal((await b.client.policy(id)).status, 'ok');

  const replaced = await b.admin.putPolicy(id, { missedTicks: 3, recoveryThreshold: 2 });
  assert.equal(replaced.missedTicks, 3);
  assert.equal(replaced.recoveryThreshold, 2);
  assert.equal(replaced.consecutiveFailures, undefined, 'a put replaces the whole policy');
  assert.equal(replaced.failureRate, undefined);

  assert.equal(await b.admin.deletePolicy(id), undefined);
  const none = await rejects(b.client.policy(id), 'policy_not_found');
  assert.equal(none.status, 404);
  await rejects(b.admin.deletePolicy(id), 'policy_not_found');
  assert.equal((await b.client.get(id)).alerting, false);
});

test('policy errors: role, unknown job, bounds, and arguments refused before a call', async () => {
  const id = jobId('errors');
  await run(id, 0, 'succeeded');
  await rejects(b.client.putPolicy(id, { consecutiveFailures: 3 }), 'forbidden');
  await rejects(b.admin.putPolicy(`${id}.never`, { consecutiveFailures: 3 }), 'not_found');
  await rejects(b.client.policy(`${id}.never`), 'not_found');
  // A value the spec's bounds allow but the service refuses (every request
  // is checked against the spec, so no value out of its bounds).
  const invalid = await rejects(b.admin.putPolicy(id, { maxRuntimeMs: 60_000, minRuntimeMs: 60_000 }), 'invalid_request');
  assert.equal(invalid.status, 400);
  assert.match(invalid.detail, /minRuntimeMs/);

  assert.throws(() => b.admin.putPolicy(id, { recoveryThreshold: 2 }), TypeError, 'no condition');
  assert.throws(() => b.admin.putPolicy(id, { consecutiveFailure: 2 }), TypeError, 'a misspelt field');
  assert.throws(() => b.admin.policy('bad job'), TypeError);
  await rejects(b.client.policy(id), 'policy_not_found');
});
