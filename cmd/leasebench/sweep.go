package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
)

// The sweep scenario: the cost of one pass of the tick sweep with many
// scheduled jobs of which few are due, against a pass over only the due
// ones. The store's contract (leaseapi.Store.SweepTicks) says the cost
// grows with the due jobs, never with all jobs.

// seedScheduledQuery adds $1 scheduled jobs sweep-0000001 … in one
// statement, as the acquires and sweeps before would have left them: each
// registered a daily cron spec an hour ago (or a minute ago, for ticks
// further ahead) with a grant that was released at once, and its next
// undecided tick is the first one after that. $2 of them, spread evenly
// over the key space, are due: their tick was 30–39 minutes ago and its
// one-minute grace has passed. Each due job has a due index k, 1 … $2,
// and what it is follows from k (sweepDueMix says the same in Go): an even
// k has a grant for the tick, so it ran, an odd one missed it; of the
// missed ones, k % 4 = 1 has catch-up latest, so it owes the missed tick
// afterwards; k % 10 = 1 owes a manual tick that nobody claimed in time (its
// claimable time ended 15 minutes ago, so the pass records it missed and
// forgets it, before a catch-up job's decision owes the missed tick), and
// k % 10 = 5 one that is still claimable (a catch-up job then owes it, not
// the missed tick); half of each have catch-up latest. Every other job's tick is 20 minutes to 23 h 20 min
// ahead, one spec per minute of the day, so decide_at spreads over the
// index. Each job has the run of its registering grant, and a ran job the
// run of the due tick. Run with the triggers off: the runs are written
// here, finished.
const seedScheduledQuery = `
WITH s AS (
	SELECT 'sweep-' || lpad(i::text, 7, '0') AS job_id, 'replica-' || (i % 200) AS owner,
		d.due, CASE WHEN d.due THEN i * $2::bigint / $1::bigint END AS k,
		CASE WHEN d.due THEN date_trunc('minute', now()) - (30 + i % 10) * interval '1 minute'
			ELSE date_trunc('minute', now()) + (20 + i % 1380) * interval '1 minute' END AS t
	FROM generate_series(1, $1::bigint) AS i,
		LATERAL (SELECT i * $2::bigint / $1::bigint <> (i - 1) * $2::bigint / $1::bigint AS due) AS d
), j AS (
	SELECT s.*, COALESCE(s.k % 2 = 0, false) AS ran, COALESCE(s.k % 4 = 1, false) AS catch_up,
		CASE s.k % 10 WHEN 1 THEN now() - interval '20 minutes' WHEN 5 THEN now() - interval '1 minute' END AS manual,
		LEAST(s.t - interval '1 hour', now() - interval '1 minute') AS since
	FROM s
), g AS (
	SELECT j.*, CASE WHEN j.ran THEN j.t ELSE date_trunc('minute', j.since) END AS grant_tick,
		CASE WHEN j.ran THEN j.t + interval '1 second' ELSE j.since END AS grant_at
	FROM j
), l AS (
	INSERT INTO leases (job_id, owner, token, tick, ttl_ms, acquired_at, renewed_at, expires_at,
		released_at, last_completed_tick, last_outcome,
		schedule, grace_ms, schedule_since, next_tick, decide_at, catch_up,
		owed_tick, owed_reason, owed_by, owed_until, manual_tick)
	SELECT job_id, owner, CASE WHEN ran THEN 2 ELSE 1 END, grant_tick, 30000, grant_at, grant_at,
		grant_at + interval '30 seconds', grant_at + interval '1 second', grant_tick, 'succeeded',
		to_char(t AT TIME ZONE 'UTC', 'FMMI FMHH24') || ' * * *', 60000, since, t, t + interval '1 minute',
		CASE WHEN catch_up THEN 'latest' ELSE 'none' END,
		manual, CASE WHEN manual IS NOT NULL THEN 'manual' END, CASE WHEN manual IS NOT NULL THEN 'bench' END,
		manual + interval '5 minutes', manual
	FROM g
)
INSERT INTO runs (job_id, token, owner, tick, started_at, ended_at, outcome)
SELECT job_id, 1, owner, date_trunc('minute', since), since, since + interval '1 second', 'succeeded' FROM g
UNION ALL
SELECT job_id, 2, owner, t, t + interval '1 second', t + interval '2 seconds', 'succeeded' FROM g WHERE ran`

// dueMix is what a pass over the seeded due jobs decides and leaves, by
// the rules of seedScheduledQuery.
type dueMix struct {
	Ran, Missed int64
	// Unclaimed are the manual ticks nobody claimed (SweepResult.Unclaimed,
	// and as many manual missed runs); Claimable those still owed after it.
	Unclaimed, Claimable int64
	// OwedCatchUp are the jobs that owe their missed tick after the pass.
	OwedCatchUp int64
}

// sweepDueMix is the dueMix of due seeded due jobs.
func sweepDueMix(due int) dueMix {
	var m dueMix
	for k := 1; k <= due; k++ {
		if k%2 == 0 {
			m.Ran++
		} else {
			m.Missed++
		}
		switch k % 10 {
		case 1:
			m.Unclaimed++
		case 5:
			m.Claimable++
		}
		if k%4 == 1 && k%10 != 5 {
			m.OwedCatchUp++
		}
	}
	return m
}

// explainDueJobsQuery is repo's dueJobsQuery (the sweep's read of the due
// jobs), EXPLAINed here; TestExplainDueJobsQueryIsRepos keeps it in step.
const explainDueJobsQuery = `SELECT job_id, schedule, grace_ms, schedule_since, next_tick, decide_at, paused_at, token, expires_at,
	tick, acquired_at, COALESCE(released_at, revoked_at) AS grant_ended_at, grant_trigger, group_name FROM leases
WHERE decide_at <= statement_timestamp() ORDER BY decide_at LIMIT $1`

// sweepCheckQuery is what the database says after the pass: jobs still
// due, the tick counters, the missed runs recorded (of ticks of the
// schedule, and of manual ticks nobody claimed), the jobs that owe their
// missed tick (a due tick is a day before its next one) and those that
// still owe a claimable manual tick.
const sweepCheckQuery = `
SELECT count(*) FILTER (WHERE decide_at <= clock_timestamp()), COALESCE(sum(missed_ticks), 0),
	COALESCE(sum(skipped_ticks), 0),
	(SELECT count(*) FROM runs WHERE outcome = 'missed' AND trigger = 'schedule'),
	(SELECT count(*) FROM runs WHERE outcome = 'missed' AND trigger = 'manual'),
	count(*) FILTER (WHERE owed_reason = 'catch-up' AND owed_tick = next_tick - interval '1 day'),
	count(*) FILTER (WHERE owed_reason = 'manual' AND owed_until > clock_timestamp())
FROM leases`

// tableStatsQuery reads the access counters of leases and runs and of the
// sweep's index. A session reports them when it ends (or lazily while it
// lives), so they are read once the measured sessions have ended.
const tableStatsQuery = `
SELECT t.relname, t.seq_scan, t.seq_tup_read, COALESCE(t.idx_scan, 0), COALESCE(t.idx_tup_fetch, 0),
	t.n_tup_ins, t.n_tup_upd,
	COALESCE(io.heap_blks_read, 0) + COALESCE(io.heap_blks_hit, 0),
	COALESCE(io.idx_blks_read, 0) + COALESCE(io.idx_blks_hit, 0)
FROM pg_stat_user_tables AS t JOIN pg_statio_user_tables AS io USING (relid)
WHERE t.relname IN ('leases', 'runs')
UNION ALL
SELECT indexrelname, 0, 0, idx_scan, idx_tup_read, 0, 0, 0, 0
FROM pg_stat_user_indexes WHERE indexrelname = 'leases_decide_at_idx'`

// TableDelta is what one table's (or index's) counters grew by.
type TableDelta struct {
	SeqScans    int64 `json:"seqScans"`
	SeqTupRead  int64 `json:"seqTuplesRead"`
	IdxScans    int64 `json:"idxScans"`
	IdxTupFetch int64 `json:"idxTuplesFetched"` // for the index: entries read
	Inserted    int64 `json:"inserted"`
	Updated     int64 `json:"updated"`
	HeapBlocks  int64 `json:"heapBlocks"` // read + hit
	IdxBlocks   int64 `json:"indexBlocks"`
}

// rowsRead is the table rows the statements read: sequentially or through
// an index.
func (d TableDelta) rowsRead() int64 { return d.SeqTupRead + d.IdxTupFetch }

func (d TableDelta) minus(o TableDelta) TableDelta {
	return TableDelta{d.SeqScans - o.SeqScans, d.SeqTupRead - o.SeqTupRead, d.IdxScans - o.IdxScans,
		d.IdxTupFetch - o.IdxTupFetch, d.Inserted - o.Inserted, d.Updated - o.Updated,
		d.HeapBlocks - o.HeapBlocks, d.IdxBlocks - o.IdxBlocks}
}

// SweepCounters are the counters of one measured pass.
type SweepCounters struct {
	Leases TableDelta `json:"leases"`
	Runs   TableDelta `json:"runs"`
	// DecideAtIdx: IdxScans are the scans of leases_decide_at_idx and
	// IdxTupFetch the index entries they read.
	DecideAtIdx TableDelta `json:"leasesDecideAtIdx"`
}

// rowsRead is the rows of leases and runs the pass read.
func (c SweepCounters) rowsRead() int64 { return c.Leases.rowsRead() + c.Runs.rowsRead() }

func (c SweepCounters) seqScans() int64 { return c.Leases.SeqScans + c.Runs.SeqScans }

// SweepDetail is what a sweep row measured beyond the common columns.
type SweepDetail struct {
	ScheduledJobs int     `json:"scheduledJobs"`
	DueJobs       int     `json:"dueJobs"`
	SeedSeconds   float64 `json:"seedSeconds"`
	Batch         int     `json:"batch"`
	Batches       int     `json:"batches"`
	// The pass's result (leaseapi.SweepResult) and what was seeded (Want).
	Decided   int    `json:"jobsDecided"`
	Ran       int64  `json:"ran"`
	Missed    int64  `json:"missed"`
	Unclaimed int64  `json:"unclaimed"`
	Want      dueMix `json:"want"`
	// Ticks are the ticks the pass decided (ran, paused, skipped, missed),
	// TicksPerSecond those over the pass's wall time.
	Ticks          int64   `json:"ticks"`
	TicksPerSecond float64 `json:"ticksPerSecond"`
	// By the database after the pass: the jobs still due, the missed
	// ticks counted, the missed runs recorded (of the schedule's ticks and
	// of the manual ticks nobody claimed) and what the jobs owe.
	StillDue         int64 `json:"stillDue"`
	MissedTicks      int64 `json:"dbMissedTicks"`
	SkippedTicks     int64 `json:"dbSkippedTicks"`
	MissedRuns       int64 `json:"dbMissedRuns"`
	ManualMissedRuns int64 `json:"dbManualMissedRuns"`
	OwedCatchUp      int64 `json:"dbOwedCatchUp"`
	OwedManual       int64 `json:"dbOwedManual"`

	Pass SweepCounters `json:"pass"`
	// The idle pass is one SweepTicks call right after, with nothing due,
	// on a store of its own (its counters are Idle; IdleSeconds its time):
	// what every interval costs between ticks. IdleMs are the times of
	// idlePasses more on one store, as a sweeper makes them every interval.
	IdleSeconds float64       `json:"idlePassSeconds"`
	Idle        SweepCounters `json:"idlePass"`
	IdleMs      []float64     `json:"idlePassesMs"`
	// EXPLAIN (ANALYZE, BUFFERS) of the due-jobs read with the production
	// limit, before the pass (due jobs waiting) and after it (none).
	ExplainDue  []string `json:"explainDue"`
	ExplainIdle []string `json:"explainIdle"`
}

// idlePasses is how many idle passes a sweep row times after the first.
const idlePasses = 21

// idleMedianMs is the median of the idle passes' times.
func (d *SweepDetail) idleMedianMs() float64 {
	if len(d.IdleMs) == 0 {
		return 0
	}
	ms := slices.Clone(d.IdleMs)
	slices.Sort(ms)
	return ms[len(ms)/2]
}

// correct reports whether the pass decided exactly the seeded due jobs
// as seeded, by its result and by the database.
func (d *SweepDetail) correct() bool {
	w := d.Want
	return d.Decided == d.DueJobs && d.Missed == w.Missed && d.Ran == w.Ran && d.Unclaimed == w.Unclaimed &&
		d.Ticks == int64(d.DueJobs) && d.StillDue == 0 && d.MissedTicks == w.Missed && d.SkippedTicks == 0 &&
		d.MissedRuns == w.Missed && d.ManualMissedRuns == w.Unclaimed && d.OwedCatchUp == w.OwedCatchUp &&
		d.OwedManual == w.Claimable
}

// problem says how d differs from what was seeded.
func (d *SweepDetail) problem() string {
	w := d.Want
	return fmt.Sprintf("the pass decided %d jobs, %d ticks (%d ran, %d missed), forgot %d unclaimed manual ticks; "+
		"the database has %d jobs still due, %d missed and %d skipped ticks, %d missed runs, %d manual missed runs, %d jobs owing their missed tick, %d a manual tick; "+
		"want %d decided (%d ran, %d missed), %d unclaimed, none due after, %d owing their missed tick, %d a manual tick",
		d.Decided, d.Ticks, d.Ran, d.Missed, d.Unclaimed, d.StillDue, d.MissedTicks, d.SkippedTicks, d.MissedRuns, d.ManualMissedRuns,
		d.OwedCatchUp, d.OwedManual, d.DueJobs, w.Ran, w.Missed, w.Unclaimed, w.OwedCatchUp, w.Claimable)
}

// sweepScenario names a sweep row.
func sweepScenario(jobs, due int) string {
	return fmt.Sprintf("sweep-%s-jobs-%s-due", sizeName(jobs), sizeName(due))
}

// sweeps measures a pass with -sweep-due jobs due, first with no other
// jobs, then among -sweep-jobs scheduled jobs.
func (b *bench) sweeps(ctx context.Context) error {
	o := b.opts
	sizes := []int{o.sweepDue}
	if o.sweepJobs != o.sweepDue {
		sizes = append(sizes, o.sweepJobs)
	}
	for _, n := range sizes {
		if err := b.sweep(ctx, n, o.sweepDue); err != nil {
			return err
		}
	}
	// The next phase should not vacuum a million rows it has no use for.
	return b.db.truncate(ctx)
}

// sweep seeds jobs scheduled jobs of which due are due, and measures one
// full pass and one idle pass of the store's SweepTicks.
func (b *bench) sweep(ctx context.Context, jobs, due int) error {
	scenario := sweepScenario(jobs, due)
	d := &SweepDetail{ScheduledJobs: jobs, DueJobs: due, Batch: b.opts.sweepBatch, Want: sweepDueMix(due)}
	b.logf("%s: seeding %d scheduled jobs, %d due", scenario, jobs, due)
	if err := b.db.truncate(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.db.seedScheduled(ctx, jobs, due); err != nil {
		return err
	}
	d.SeedSeconds = time.Since(t0).Seconds()
	b.logf("  seeded and vacuumed in %s", time.Since(t0).Round(time.Millisecond))
	var err error
	if d.ExplainDue, err = b.db.explainDueJobs(ctx, b.opts.sweepBatch); err != nil {
		return err
	}

	// The full pass, as repo.TickSweeper does it: batches until none is left.
	var lat []time.Duration
	var res leaseapi.SweepResult
	var elapsed time.Duration
	pass, before, err := b.measureSweep(ctx, func(ctx context.Context, store *postgres.Store) error {
		start := time.Now()
		for {
			t := time.Now()
			r, err := store.SweepTicks(ctx, b.opts.sweepBatch)
			lat = append(lat, time.Since(t))
			if err != nil {
				return err
			}
			more := r.More
			r.More = false
			res.Add(r)
			if !more {
				break
			}
		}
		elapsed = time.Since(start)
		return nil
	})
	if err != nil {
		return err
	}
	d.Pass, d.Batches = pass, len(lat)
	d.Decided, d.Ran, d.Missed, d.Unclaimed = res.Jobs, res.Ran, res.Missed, res.Unclaimed
	d.Ticks = res.Ran + res.Paused + res.Skipped + res.Missed
	d.TicksPerSecond = float64(d.Ticks) / elapsed.Seconds()
	slices.Sort(lat)
	m := measurement{
		summary: summary{ops: int64(res.Jobs), p50: percentile(lat, 0.5), p99: percentile(lat, 0.99), max: lat[len(lat)-1]},
		elapsed: elapsed,
	}
	if m, err = b.countDB(ctx, m, before); err != nil {
		return err
	}

	// The idle pass: nothing is due any more.
	d.Idle, _, err = b.measureSweep(ctx, func(ctx context.Context, store *postgres.Store) error {
		t := time.Now()
		r, err := store.SweepTicks(ctx, b.opts.sweepBatch)
		d.IdleSeconds = time.Since(t).Seconds()
		if err == nil && r.Jobs != 0 {
			err = fmt.Errorf("the idle pass decided %d jobs, want 0", r.Jobs)
		}
		return err
	})
	if err != nil {
		return err
	}
	// More idle passes on one store, as a sweeper makes them: the first
	// pays for its connection's first statements.
	_, _, err = b.measureSweep(ctx, func(ctx context.Context, store *postgres.Store) error {
		for range idlePasses {
			t := time.Now()
			r, err := store.SweepTicks(ctx, b.opts.sweepBatch)
			d.IdleMs = append(d.IdleMs, float64(time.Since(t).Microseconds())/1000)
			if err != nil {
				return err
			}
			if r.Jobs != 0 {
				return fmt.Errorf("an idle pass decided %d jobs, want 0", r.Jobs)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if d.ExplainIdle, err = b.db.explainDueJobs(ctx, b.opts.sweepBatch); err != nil {
		return err
	}
	// In a session of its own: its sequential scan must not reach the
	// counters of the next measured pass.
	err = b.db.withSession(ctx, func(db *sql.DB) error {
		return db.QueryRowContext(ctx, sweepCheckQuery).Scan(&d.StillDue, &d.MissedTicks, &d.SkippedTicks, &d.MissedRuns,
			&d.ManualMissedRuns, &d.OwedCatchUp, &d.OwedManual)
	})
	if err != nil {
		return fmt.Errorf("check sweep: %w", err)
	}
	if !d.correct() {
		b.report.Bugs = append(b.report.Bugs, scenario+": "+d.problem())
	}

	row := newRow(scenario, "floor", "-", 1, m)
	row.Sweep = d
	row.Note = fmt.Sprintf("one pass of SweepTicks(batch %d) until !More over %d scheduled jobs, %d due; ops = jobs decided (one tick each), latencies per batch", b.opts.sweepBatch, jobs, due)
	b.add(row)
	b.logf("  pass %.3f s, %d batches, %.0f ticks/s, rows read %d (leases %d, runs %d), seq scans %d; idle pass %.1f ms (then median %.1f ms of %d, max %.1f), rows read %d",
		m.elapsed.Seconds(), d.Batches, d.TicksPerSecond, d.Pass.rowsRead(), d.Pass.Leases.rowsRead(), d.Pass.Runs.rowsRead(), d.Pass.seqScans(),
		1000*d.IdleSeconds, d.idleMedianMs(), len(d.IdleMs), slices.Max(d.IdleMs), d.Idle.rowsRead())
	return nil
}

// measureSweep runs fn on a store of its own and returns what the table
// counters grew by meanwhile, and the database counters from before it.
func (b *bench) measureSweep(ctx context.Context, fn func(ctx context.Context, store *postgres.Store) error) (SweepCounters, dbCounters, error) {
	// Earlier sessions (seeding, EXPLAIN) must have ended and reported
	// their counters.
	before, err := b.db.counters(ctx, true)
	if err != nil {
		return SweepCounters{}, dbCounters{}, err
	}
	s0, err := b.db.tableStats(ctx)
	if err != nil {
		return SweepCounters{}, dbCounters{}, err
	}
	store, err := postgres.Open(ctx, postgres.Config{DSN: b.db.dsn, MaxOpenConns: postgresMaxOpenConns})
	if err != nil {
		return SweepCounters{}, dbCounters{}, err
	}
	// Dial before the clock starts, with a statement that reads no table.
	if _, err := store.SynchronousCommit(ctx); err != nil {
		return SweepCounters{}, dbCounters{}, errors.Join(err, store.Close())
	}
	err = fn(ctx, store)
	if err := errors.Join(err, store.Close()); err != nil {
		return SweepCounters{}, dbCounters{}, fmt.Errorf("sweep: %w", err)
	}
	if _, err := b.db.counters(ctx, true); err != nil { // the store's sessions have ended and reported
		return SweepCounters{}, dbCounters{}, err
	}
	s1, err := b.db.tableStats(ctx)
	if err != nil {
		return SweepCounters{}, dbCounters{}, err
	}
	return SweepCounters{
		Leases:      s1.Leases.minus(s0.Leases),
		Runs:        s1.Runs.minus(s0.Runs),
		DecideAtIdx: s1.DecideAtIdx.minus(s0.DecideAtIdx),
	}, before, nil
}

// withSession runs fn on a database handle of its own that is closed
// afterwards, so that the session ends and reports its counters before a
// measured run reads them.
func (b *benchDB) withSession(ctx context.Context, fn func(db *sql.DB) error) error {
	db, err := sql.Open("postgres", b.dsn)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	return errors.Join(fn(db), db.Close())
}

// seedScheduled adds the scheduled jobs of seedScheduledQuery, then
// vacuums and analyzes leases and runs, as autovacuum would after a load.
func (b *benchDB) seedScheduled(ctx context.Context, jobs, due int) error {
	return b.withSession(ctx, func(db *sql.DB) error {
		conn, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("seed scheduled: %w", err)
		}
		defer conn.Close()
		for _, q := range []string{`SET session_replication_role = replica`, `SET work_mem = '256MB'`} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("seed scheduled: %s: %w", q, err)
			}
		}
		if _, err := conn.ExecContext(ctx, seedScheduledQuery, jobs, due); err != nil {
			return fmt.Errorf("seed %d scheduled jobs: %w", jobs, err)
		}
		if _, err := conn.ExecContext(ctx, `VACUUM (ANALYZE) leases, runs`); err != nil {
			return fmt.Errorf("seed scheduled: vacuum: %w", err)
		}
		return nil
	})
}

// explainDueJobs runs EXPLAIN (ANALYZE, BUFFERS) of the due-jobs read with
// the production limit (batch + 1) in a transaction it rolls back, so the
// rows it locks are free again.
func (b *benchDB) explainDueJobs(ctx context.Context, batch int) ([]string, error) {
	var plan []string
	err := b.withSession(ctx, func(db *sql.DB) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		rows, err := tx.QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+explainDueJobsQuery, batch+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan = append(plan, line)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("explain due jobs: %w", err)
	}
	return plan, nil
}

// sweepTableStats are the counters of tableStatsQuery at one instant.
type sweepTableStats struct {
	Leases, Runs, DecideAtIdx TableDelta
}

func (b *benchDB) tableStats(ctx context.Context) (sweepTableStats, error) {
	var s sweepTableStats
	rows, err := b.db.QueryContext(ctx, tableStatsQuery)
	if err != nil {
		return s, fmt.Errorf("read table counters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var d TableDelta
		if err := rows.Scan(&name, &d.SeqScans, &d.SeqTupRead, &d.IdxScans, &d.IdxTupFetch,
			&d.Inserted, &d.Updated, &d.HeapBlocks, &d.IdxBlocks); err != nil {
			return s, fmt.Errorf("read table counters: %w", err)
		}
		switch name {
		case "leases":
			s.Leases = d
		case "runs":
			s.Runs = d
		case "leases_decide_at_idx":
			s.DecideAtIdx = d
		}
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("read table counters: %w", err)
	}
	return s, nil
}

// planSummary is the lines of an EXPLAIN that tell how leases was read:
// the scan node, its condition or filter, the rows it removed, the buffers
// and the execution time.
func planSummary(plan []string) []string {
	var out []string
	for _, line := range plan {
		l := strings.TrimSpace(line)
		switch {
		case strings.Contains(l, " Scan ") || strings.HasPrefix(l, "->  Seq Scan"),
			strings.HasPrefix(l, "Index Cond:"), strings.HasPrefix(l, "Filter:"),
			strings.HasPrefix(l, "Rows Removed by Filter:"), strings.HasPrefix(l, "Execution Time:"):
			out = append(out, strings.TrimPrefix(l, "->  "))
		}
	}
	return out
}
