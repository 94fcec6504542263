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

// sweepBatch is the production batch size (repo.TickSweeperConfig's default).
const sweepBatch = 100

// seedScheduledQuery adds $1 scheduled jobs sweep-0000001 … in one
// statement, as the acquires and sweeps before would have left them: each
// registered a daily cron spec an hour ago (or a minute ago, for ticks
// further ahead) with a grant that was released at once, and its next
// undecided tick is the first one after that. $2 of them, spread evenly
// over the key space, are due: their tick was 30–39 minutes ago and its
// one-minute grace has passed. Of the due ones, every second one (even
// due index) has a grant for the tick, so it ran; the others missed it.
// Every other job's tick is 20 minutes to 23 h 20 min ahead, one spec per
// minute of the day, so decide_at spreads over the index. Each job has the
// run of its registering grant, and a ran job the run of the due tick.
// Run with the triggers off: the runs are written here, finished.
const seedScheduledQuery = `
WITH s AS (
	SELECT 'sweep-' || lpad(i::text, 7, '0') AS job_id, 'replica-' || (i % 200) AS owner,
		d.due, d.due AND (i * $2::bigint / $1::bigint) % 2 = 0 AS ran,
		CASE WHEN d.due THEN date_trunc('minute', now()) - (30 + i % 10) * interval '1 minute'
			ELSE date_trunc('minute', now()) + (20 + i % 1380) * interval '1 minute' END AS t
	FROM generate_series(1, $1::bigint) AS i,
		LATERAL (SELECT i * $2::bigint / $1::bigint <> (i - 1) * $2::bigint / $1::bigint AS due) AS d
), j AS (
	SELECT s.*, LEAST(s.t - interval '1 hour', now() - interval '1 minute') AS since FROM s
), g AS (
	SELECT j.*, CASE WHEN j.ran THEN j.t ELSE date_trunc('minute', j.since) END AS grant_tick,
		CASE WHEN j.ran THEN j.t + interval '1 second' ELSE j.since END AS grant_at
	FROM j
), l AS (
	INSERT INTO leases (job_id, owner, token, tick, ttl_ms, acquired_at, renewed_at, expires_at,
		released_at, last_completed_tick, last_outcome,
		schedule, grace_ms, schedule_since, next_tick, decide_at)
	SELECT job_id, owner, CASE WHEN ran THEN 2 ELSE 1 END, grant_tick, 30000, grant_at, grant_at,
		grant_at + interval '30 seconds', grant_at + interval '1 second', grant_tick, 'succeeded',
		to_char(t AT TIME ZONE 'UTC', 'FMMI FMHH24') || ' * * *', 60000, since, t, t + interval '1 minute'
	FROM g
)
INSERT INTO runs (job_id, token, owner, tick, started_at, ended_at, outcome)
SELECT job_id, 1, owner, date_trunc('minute', since), since, since + interval '1 second', 'succeeded' FROM g
UNION ALL
SELECT job_id, 2, owner, t, t + interval '1 second', t + interval '2 seconds', 'succeeded' FROM g WHERE ran`

// sweepWantMissed is how many of due seeded due jobs missed their tick:
// those with an odd due index 1 … due.
func sweepWantMissed(due int) int64 { return int64(due+1) / 2 }

// explainDueJobsQuery is repo's dueJobsQuery (the sweep's read of the due
// jobs), EXPLAINed here; TestExplainDueJobsQueryIsRepos keeps it in step.
const explainDueJobsQuery = `SELECT job_id, schedule, grace_ms, schedule_since, next_tick, decide_at, paused_at, token, expires_at FROM leases
WHERE decide_at <= statement_timestamp() ORDER BY decide_at LIMIT $1`

// sweepCheckQuery is what the database says after the pass: jobs still
// due, the tick counters, and the missed runs recorded.
const sweepCheckQuery = `
SELECT count(*) FILTER (WHERE decide_at <= clock_timestamp()), COALESCE(sum(missed_ticks), 0),
	COALESCE(sum(skipped_ticks), 0), (SELECT count(*) FROM runs WHERE outcome = 'missed')
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
	// The pass's result (leaseapi.SweepResult) and what was seeded.
	Decided    int   `json:"jobsDecided"`
	Ran        int64 `json:"ran"`
	Missed     int64 `json:"missed"`
	WantMissed int64 `json:"wantMissed"`
	// By the database after the pass: the jobs still due, the missed
	// ticks counted and the missed runs recorded.
	StillDue    int64 `json:"stillDue"`
	MissedTicks int64 `json:"dbMissedTicks"`
	MissedRuns  int64 `json:"dbMissedRuns"`

	Pass SweepCounters `json:"pass"`
	// The idle pass is one SweepTicks call right after, with nothing due:
	// what every interval costs between ticks.
	IdleSeconds float64       `json:"idlePassSeconds"`
	Idle        SweepCounters `json:"idlePass"`
	// EXPLAIN (ANALYZE, BUFFERS) of the due-jobs read with the production
	// limit, before the pass (due jobs waiting) and after it (none).
	ExplainDue  []string `json:"explainDue"`
	ExplainIdle []string `json:"explainIdle"`
}

// correct reports whether the pass decided exactly the seeded due jobs
// as seeded, by its result and by the database.
func (d *SweepDetail) correct() bool {
	return d.Decided == d.DueJobs && d.Missed == d.WantMissed && d.Ran == int64(d.DueJobs)-d.WantMissed &&
		d.StillDue == 0 && d.MissedTicks == d.WantMissed && d.MissedRuns == d.WantMissed
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
	d := &SweepDetail{ScheduledJobs: jobs, DueJobs: due, Batch: sweepBatch, WantMissed: sweepWantMissed(due)}
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
	if d.ExplainDue, err = b.db.explainDueJobs(ctx); err != nil {
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
			r, err := store.SweepTicks(ctx, sweepBatch)
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
	d.Decided, d.Ran, d.Missed = res.Jobs, res.Ran, res.Missed
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
		r, err := store.SweepTicks(ctx, sweepBatch)
		d.IdleSeconds = time.Since(t).Seconds()
		if err == nil && r.Jobs != 0 {
			err = fmt.Errorf("the idle pass decided %d jobs, want 0", r.Jobs)
		}
		return err
	})
	if err != nil {
		return err
	}
	if d.ExplainIdle, err = b.db.explainDueJobs(ctx); err != nil {
		return err
	}
	var skippedTicks int64
	// In a session of its own: its sequential scan must not reach the
	// counters of the next measured pass.
	err = b.db.withSession(ctx, func(db *sql.DB) error {
		return db.QueryRowContext(ctx, sweepCheckQuery).Scan(&d.StillDue, &d.MissedTicks, &skippedTicks, &d.MissedRuns)
	})
	if err != nil {
		return fmt.Errorf("check sweep: %w", err)
	}
	if !d.correct() || skippedTicks != 0 {
		b.report.Bugs = append(b.report.Bugs, fmt.Sprintf(
			"%s: the pass decided %d jobs (%d ran, %d missed), the database has %d still due, %d missed and %d skipped ticks, %d missed runs; want %d decided, %d missed, 0 still due",
			scenario, d.Decided, d.Ran, d.Missed, d.StillDue, d.MissedTicks, skippedTicks, d.MissedRuns, due, d.WantMissed))
	}

	row := newRow(scenario, "floor", "-", 1, m)
	row.Sweep = d
	row.Note = fmt.Sprintf("one pass of SweepTicks(batch %d) until !More over %d scheduled jobs, %d due; ops = jobs decided, latencies per batch", sweepBatch, jobs, due)
	b.add(row)
	b.logf("  pass %.3f s, %d batches, rows read %d (leases %d, runs %d), seq scans %d; idle pass %.1f ms, rows read %d",
		m.elapsed.Seconds(), d.Batches, d.Pass.rowsRead(), d.Pass.Leases.rowsRead(), d.Pass.Runs.rowsRead(), d.Pass.seqScans(),
		1000*d.IdleSeconds, d.Idle.rowsRead())
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
func (b *benchDB) explainDueJobs(ctx context.Context) ([]string, error) {
	var plan []string
	err := b.withSession(ctx, func(db *sql.DB) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		rows, err := tx.QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+explainDueJobsQuery, sweepBatch+1)
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
