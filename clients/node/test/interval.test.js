// The minimum interval between two grants of a job (minIntervalMs): against
// a real leaseapi, the too_soon refusal of the client, of a batch item and
// of the runner; against a scripted server, the feature_disabled refusal of
// a server whose upgrade is not finalized.

import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';

import { Client, LeaseApiError, Runner } from '../src/index.js';
import { quietLogger, useServer } from './harness.js';

const b = useServer('interval');
let n = 0;
const jobId = (name) => `node-interval-${name}-${process.pid}-${n++}`;
const HOUR_MS = 3_600_000;

test('a grant too soon after the previous one is refused too_soon', async () => {
  const id = jobId('client');
  const first = await b.client.acquire(id, { owner: 'host-a', ttlMs: 30000, minIntervalMs: HOUR_MS });
  const renewed = await b.client.acquire(id, { owner: 'host-a', ttlMs: 30000, minIntervalMs: HOUR_MS });
  assert.equal(renewed.token, first.token, "the holder's renewal is not refused");
  await b.client.release(id, { owner: 'host-a', token: first.token });

  const err = await b.client.acquire(id, { owner: 'host-b', ttlMs: 30000, minIntervalMs: HOUR_MS }).then(
    () => assert.fail('granted'),
    (e) => e,
  );
  assert.ok(err instanceof LeaseApiError && err.code === 'too_soon' && err.status === 409 && err.notAcquired, String(err));
  assert.equal(err.lease.token, first.token);
  assert.equal(err.lease.acquiredAt.getTime(), first.acquiredAt.getTime());
  assert.ok(err.retryAfter >= 3590 && err.retryAfter <= 3600, `Retry-After ${err.retryAfter}`);
  assert.equal((await b.client.get(id)).token, first.token, 'a refusal writes nothing');

  const results = await b.client.acquireBatch([{ jobId: id }, { jobId: `${id}.new` }], { owner: 'host-b', ttlMs: 30000, minIntervalMs: HOUR_MS });
  assert.ok(results[0] instanceof LeaseApiError && results[0].code === 'too_soon' && results[0].retryAfter >= 3590, String(results[0]));
  assert.ok(!(results[1] instanceof LeaseApiError), "a job's first grant is never too soon");
  const again = await b.client.acquireBatch([{ jobId: id, minIntervalMs: 0 }], { owner: 'host-b', ttlMs: 30000, minIntervalMs: HOUR_MS });
  assert.equal(again[0].token, first.token + 1, "the item's own 0 wins over the default: no minimum");
});

test('the runner skips a run too soon after the previous one', async () => {
  const id = jobId('runner');
  const ran = [];
  const runner = (owner, options = {}) => new Runner(b.client, { owner, ttlMs: 3000, logger: quietLogger(), ...options });
  const first = await runner('host-a').run(id, () => ran.push('a'), { minIntervalMs: HOUR_MS });
  assert.equal(first.result, 'succeeded');
  for (const r of [runner('host-b'), runner('host-c', { batch: false })]) {
    const skip = await r.run(id, () => ran.push(r.owner), { minIntervalMs: HOUR_MS });
    assert.equal(skip.result, 'skipped');
    assert.equal(skip.code, 'too_soon');
    assert.equal(skip.error.lease.owner, 'host-a');
  }
  assert.deepEqual(ran, ['a']);
});

test('minIntervalMs out of range is refused before sending', () => {
  const client = new Client('http://127.0.0.1:9');
  for (const v of [-1, 1.5, 31 * 24 * HOUR_MS + 1, '60000']) {
    assert.throws(() => client.acquire('j', { owner: 'a', minIntervalMs: v }), RangeError);
  }
});

test('feature_disabled is a 400 that is neither retried nor a skip', async () => {
  const detail = 'minIntervalMs is off until every instance runs leaseapi 1.1.0 or later and `leaseapi upgrade finalize` has run ' +
    '(the database is finalized at feature level 0, minIntervalMs needs 1)';
  const bodies = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      bodies.push(JSON.parse(raw));
      const body = JSON.stringify({ type: 'https://leaseapi.dev/problems/feature_disabled', title: 'Feature disabled', status: 400, detail, code: 'feature_disabled' });
      res.writeHead(400, { 'Content-Type': 'application/problem+json', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const client = new Client(`http://127.0.0.1:${server.address().port}`, { retryForMs: 5000, logger: quietLogger() });
    const err = await client.acquire('nightly', { owner: 'host-a', minIntervalMs: 60000 }).then(
      () => assert.fail('granted'),
      (e) => e,
    );
    assert.ok(err instanceof LeaseApiError, String(err));
    assert.deepEqual([err.status, err.code, err.detail, err.notAcquired, err.retryable], [400, 'feature_disabled', detail, false, false]);
    assert.deepEqual(bodies, [{ owner: 'host-a', minIntervalMs: 60000 }], 'sent once');
    client.close();
  } finally {
    server.close();
  }
});
