// node-cron and croner replicas, each a process of its own, against a real
// leaseapi: every tick runs exactly once, and a killed replica's job is
// taken over only after its lease expired by the database clock.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { LEASE_TOKEN, PACKAGE, useServer, waitUntil } from './harness.js';

// How many ticks of one second the replicas run: the "15 s".
const TICKS = 15;
// Bounds each wait for the replicas (starting, ticking, taking over).
const WAIT_MS = 60_000;
const TTL_MS = 3_000;
// The zone each integration's tasks are scheduled in: sent as CRON_TZ=.
const TIMEZONE = { 'node-cron': 'Europe/Berlin', croner: 'Asia/Tokyo' };
const replicas = [];

// Registered before the server's hooks, so that it runs first: a replica
// left by a failed test is gone before the server stops.
after(() => {
  for (const r of replicas) {
    r.proc.kill('SIGKILL');
  }
});
const b = useServer('cron');
const { dir } = b;

function startReplica(name, kind, jobs, { hold = false } = {}) {
  const log = openSync(path.join(dir, `replica-${name}.log`), 'w');
  const cfg = {
    kind,
    url: b.server.url,
    token: LEASE_TOKEN,
    owner: `replica-${name}`,
    jobs,
    timezone: TIMEZONE[kind],
    ttlMs: TTL_MS,
    hold,
    recordFile: path.join(dir, `records-${name}.jsonl`),
    exchangesFile: path.join(dir, `exchanges-${name}.jsonl`),
    lifetimeMs: 2 * WAIT_MS,
  };
  const proc = spawn(process.execPath, [path.join(PACKAGE, 'test', 'replica.js'), JSON.stringify(cfg)], { stdio: ['ignore', log, log] });
  const r = { name, owner: cfg.owner, proc, cfg, exit: null };
  r.exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve((r.exit = { code, signal }))));
  replicas.push(r);
  return r;
}

function tail(r) {
  return `--- ${r.name} ---\n${readFileSync(path.join(dir, `replica-${r.name}.log`), 'utf8').split('\n').slice(-30).join('\n')}`;
}

async function stopReplicas(rs) {
  for (const r of rs) {
    r.proc.kill('SIGTERM');
  }
  for (const r of rs) {
    const exit = await r.exited;
    assert.equal(exit.code, 0, `replica ${r.name} did not exit 0 on SIGTERM: ${JSON.stringify(exit)}\n${tail(r)}`);
  }
}

function records(rs) {
  return rs.flatMap((r) => (existsSync(r.cfg.recordFile) ? readFileSync(r.cfg.recordFile, 'utf8').split('\n').slice(0, -1).map((l) => JSON.parse(l)) : []));
}

/** The grants (runs that are not missed ticks) of a job, oldest first. */
async function grants(jobId) {
  let runs;
  try {
    ({ runs } = await b.client.runs(jobId, { limit: 1000 }));
  } catch (err) {
    if (err.code === 'not_found') {
      return []; // no replica acquired it yet
    }
    throw err;
  }
  return runs.filter((r) => r.outcome !== 'missed').reverse();
}

/** Throws unless every value occurs once; the duplicates are named. */
function assertOnce(values, what) {
  const seen = new Map();
  for (const v of values) {
    seen.set(v, (seen.get(v) ?? 0) + 1);
  }
  const twice = [...seen].filter(([, k]) => k > 1);
  assert.deepEqual(twice, [], `${what}: ticks run more than once`);
}

test('three node-cron and three croner replicas, every second: each tick runs exactly once', async () => {
  const suffix = process.pid;
  const jobs = { 'node-cron': `node-cron-every-second-${suffix}`, croner: `croner-every-second-${suffix}` };
  const byKind = {};
  for (const kind of Object.keys(jobs)) {
    byKind[kind] = [1, 2, 3].map((i) => startReplica(`${kind}-${i}`, kind, [jobs[kind]]));
  }
  const all = Object.values(byKind).flat();
  // Wait for TICKS ticks after the first, of each job.
  for (const id of Object.values(jobs)) {
    await waitUntil(
      `${TICKS + 1} ticks of ${id}`,
      async () => {
        for (const r of all) {
          assert.equal(r.exit, null, `replica ${r.name} exited early\n${tail(r)}`);
        }
        return (await grants(id)).length >= TICKS + 1;
      },
      WAIT_MS,
      250,
    );
  }
  // The ticks decided before the stop: after it, a run may have been granted
  // but not yet started when its replica shut down.
  const cut = {};
  for (const [kind, id] of Object.entries(jobs)) {
    cut[kind] = Math.max(...(await grants(id)).map((g) => g.tick.getTime()));
  }
  // Those ticks' runs end before the replicas stop: a run still going at
  // the stop is released failed by the graceful shutdown, as it must be.
  for (const [kind, id] of Object.entries(jobs)) {
    await waitUntil(
      `the runs of ${id} up to its tick ${new Date(cut[kind]).toISOString()} ended`,
      async () => (await grants(id)).every((g) => g.tick.getTime() > cut[kind] || g.endedAt !== null),
      WAIT_MS,
      100,
    );
  }
  await stopReplicas(all);

  for (const [kind, id] of Object.entries(jobs)) {
    const history = (await grants(id)).filter((g) => g.tick.getTime() <= cut[kind]);
    const ticks = history.map((g) => g.tick.getTime());
    assertOnce(ticks, `${kind}: the server's run history`);
    // No tick in the stretch was left out: each second from the first to
    // the last ran, or was skipped by the server's rule because the grant of
    // an earlier tick was still held at it (by the database clock).
    const first = Math.min(...ticks);
    const ran = new Set(ticks);
    for (let t = first; t <= cut[kind]; t += 1000) {
      if (ran.has(t)) {
        continue;
      }
      const holder = history.find((g) => g.startedAt.getTime() <= t && (g.endedAt === null || t < g.endedAt.getTime()));
      assert.ok(holder, `${kind}: tick ${new Date(t).toISOString()} neither ran nor was held by an earlier grant`);
    }
    assert.ok(ran.size >= TICKS + 1, `${kind}: only ${ran.size} ticks ran`);
    for (const g of history) {
      assert.equal(g.outcome, 'succeeded', `${kind}: tick ${g.tick.toISOString()} ended ${g.outcome}`);
    }
    // The replicas' own records say the same: each tick once, by the owner
    // and with the token of its grant.
    const mine = records(byKind[kind]).filter((rec) => Date.parse(rec.tick) <= cut[kind]);
    assertOnce(mine.map((rec) => Date.parse(rec.tick)), `${kind}: the replicas' records`);
    const fromHistory = history.map((g) => `${g.tick.toISOString()} ${g.owner} ${g.token}`).sort();
    assert.deepEqual(mine.map((rec) => `${rec.tick} ${rec.owner} ${rec.token}`).sort(), fromHistory, `${kind}: records and run history differ`);
    // The integration sent the task's schedule, in its zone.
    assert.equal((await b.client.get(id)).schedule, `CRON_TZ=${TIMEZONE[kind]} * * * * * *`);
  }
});

for (const kind of ['node-cron', 'croner']) {
  test(`${kind}: a killed replica's job is taken over after its lease expired, never before`, async () => {
    const id = `${kind}-takeover-${process.pid}`;
    const rs = [1, 2, 3].map((i) => startReplica(`${kind}-takeover-${i}`, kind, [id], { hold: true }));
    let held;
    await waitUntil(
      `a replica holding ${id}`,
      async () => {
        held = (await grants(id)).find((g) => g.outcome === 'running');
        return held !== undefined;
      },
      WAIT_MS,
      100,
    );
    const victim = rs.find((r) => r.owner === held.owner);
    assert.ok(victim, `no replica owns ${held.owner}`);
    victim.proc.kill('SIGKILL');
    await victim.exited;

    let next;
    await waitUntil(
      `another replica taking ${id} over`,
      async () => {
        next = (await grants(id)).find((g) => g.token > held.token);
        return next !== undefined;
      },
      WAIT_MS,
      100,
    );
    await stopReplicas(rs.filter((r) => r !== victim));

    const killed = (await grants(id)).find((g) => g.token === held.token);
    assert.equal(killed.outcome, 'expired', 'the killed replica\'s run');
    assert.notEqual(next.owner, victim.owner);
    // By the database clock: the new grant started at or after the old one
    // expired (a run that expired ends at its expiry), and the old grant
    // lived its TTL.
    assert.ok(next.startedAt.getTime() >= killed.endedAt.getTime(), `taken over at ${next.startedAt.toISOString()}, before the expiry ${killed.endedAt.toISOString()}`);
    assert.ok(killed.endedAt.getTime() - killed.startedAt.getTime() >= TTL_MS, 'the killed grant ended before its TTL');
    // No other grant came between them.
    assert.equal(next.token, Math.min(...(await grants(id)).filter((g) => g.token > held.token).map((g) => g.token)));
  });
}
