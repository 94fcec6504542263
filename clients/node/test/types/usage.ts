// Compiled by tsc in schema.test.js (never run): the declarations describe
// a program written against them, and agree with src/schema.d.ts.

import { Client, LeaseApiError, LeaseCoordinator, leased, Runner } from '../../src/index.js';

export async function example(): Promise<number> {
  const client = new Client('https://leaseapi.internal', { token: 'id.secret', retryForMs: 5000 });
  const lease = await client.acquire('nightly', { owner: 'pod-a', ttlMs: 30000, tick: new Date(), schedule: '0 7 * * *' });
  const when: Date | null = lease.expiresAt;
  const errs: Record<string, string> = lease.fieldErrors;
  await client.release('nightly', { owner: 'pod-a', token: lease.token, outcome: 'succeeded' });
  const page = await client.list({ state: 'held', limit: 10 });
  for (const l of page.leases) {
    void l.tick?.toISOString();
  }
  const runner = new Runner(client, { owner: 'pod-a', ttlMs: 30000 });
  const report = await runner.run('nightly', async ({ signal, token }) => (signal.aborted ? 0 : token), { nearestTick: true, schedule: '0 7 * * *' });
  if (report.result === 'skipped') {
    return report.code === 'lease_held' ? 1 : 2;
  }
  new LeaseCoordinator(runner);
  leased(runner, { job: 'nightly' }, async ({ signal }) => signal.aborted);
  const group = await client.putGroup('warehouse', { limit: 2 });
  const expires: Date | null = group.holders[0]?.expiresAt ?? null;
  for await (const g of client.groups({ prefix: 'ware' })) {
    void g.createdAt?.toISOString();
  }
  const soon = await runner.run('backup', () => 0, { minIntervalMs: 3_600_000 });
  if (soon.result === 'skipped' && soon.code === 'too_soon') {
    return soon.error?.retryAfter ?? 7;
  }
  await client.acquire('backup', { owner: 'pod-a', minIntervalMs: 3_600_000 });
  const inGroup = await runner.run('report', ({ slot, slotToken }) => (slot ?? 0) + (slotToken ?? 0), { group: 'warehouse' });
  if (inGroup.result === 'skipped' && inGroup.code === 'group_full') {
    return inGroup.error?.group?.limit ?? 4;
  }
  void expires;
  const policy = await client.putPolicy('nightly', { consecutiveFailures: 3, failureRate: { threshold: 0.5, runs: 10 }, realertAfterMs: 3_600_000 });
  const since: Date | null = policy.statusSince;
  if (policy.status === 'alerting' && lease.alerting) {
    return policy.alertReasons.includes('failures') ? 5 : (since?.getTime() ?? 6);
  }
  const results = await client.acquireBatch([{ jobId: 'a', tick: new Date() }, { jobId: 'b', owner: 'pod-b' }], { owner: 'pod-a', ttlMs: 30000, schedule: '0 7 * * *' });
  for (const r of results) {
    if (r instanceof LeaseApiError) {
      void r.notAcquired;
    } else {
      void r.expiresAt?.getTime();
    }
  }
  const beats = await client.heartbeatBatch([{ jobId: 'a', token: 1 }], { owner: 'pod-a' });
  void beats.length;
  new Runner(client, { batch: false });
  await client.deletePolicy('nightly');
  try {
    await client.get('nightly');
  } catch (err) {
    if (err instanceof LeaseApiError && err.code === 'not_found') {
      return 3;
    }
  }
  return (report.value ?? 0) + (when?.getTime() ?? 0) + Object.keys(errs).length;
}
