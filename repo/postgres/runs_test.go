package postgres_test

import (
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// wantRun is the run row a grant must leave.
type wantRun struct {
	token     int64
	owner     string
	tick      *time.Time
	started   time.Time
	ended     *time.Time // nil: running
	outcome   leaseapi.Outcome
	revokedBy string
}

// runsBundle holds what TestPostgresRunRows' subtests share: a batched
// store, an unbatched one, and a connection that reads the runs table.
type runsBundle struct {
	batched, single *postgres.Store
	db              *sql.DB
	prefix          string
}

func setupRuns(t *testing.T) *runsBundle {
	t.Helper()
	dsn := repotest.PostgresURL(t)
	b := &runsBundle{prefix: fmt.Sprintf("runrows-%d-", time.Now().UnixNano())}
	for _, s := range []struct {
		dst       **postgres.Store
		unbatched bool
	}{{&b.batched, false}, {&b.single, true}} {
		store, err := postgres.OpenVariant(t.Context(), postgres.Config{DSN: dsn}, false, s.unbatched)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = store.Close() })
		*s.dst = store
	}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b.db = db
	return b
}

// checkRuns compares the runs of job's grants (missed runs have no token)
// with want, in token order: exactly one row per granted token, with its
// outcome and times.
func (b *runsBundle) checkRuns(t *testing.T, job string, want ...wantRun) {
	t.Helper()
	rows, err := b.db.QueryContext(t.Context(), `
SELECT token, owner, tick, started_at, ended_at, outcome, revoked_by FROM runs
WHERE job_id = $1 AND token IS NOT NULL ORDER BY token, id`, job)
	if err != nil {
		t.Fatalf("read runs of %s: %v", job, err)
	}
	defer rows.Close()
	var got []wantRun
	for rows.Next() {
		var r wantRun
		var tick, ended sql.NullTime
		var revokedBy sql.NullString
		if err := rows.Scan(&r.token, &r.owner, &tick, &r.started, &ended, &r.outcome, &revokedBy); err != nil {
			t.Fatalf("scan run of %s: %v", job, err)
		}
		if tick.Valid {
			r.tick = &tick.Time
		}
		if ended.Valid {
			r.ended = &ended.Time
		}
		r.revokedBy = revokedBy.String
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read runs of %s: %v", job, err)
	}
	if len(got) != len(want) {
		t.Fatalf("runs of %s: got %d rows %+v, want %d %+v", job, len(got), got, len(want), want)
	}
	sameTime := func(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }
	for i, w := range want {
		g := got[i]
		if g.token != w.token || g.owner != w.owner || !sameTime(g.tick, w.tick) || !g.started.Equal(w.started) ||
			!sameTime(g.ended, w.ended) || g.outcome != w.outcome || g.revokedBy != w.revokedBy {
			t.Errorf("run %d of %s:\n got %+v\nwant %+v", i, job, g, w)
		}
	}
}

func acquire(t *testing.T, s leaseapi.Store, job, owner string, ttl time.Duration, tick *time.Time) leaseapi.Lease {
	t.Helper()
	l, err := s.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: ttl, Tick: tick})
	if err != nil {
		t.Fatalf("acquire %s by %s: %v", job, owner, err)
	}
	return l
}

func release(t *testing.T, s leaseapi.Store, l leaseapi.Lease, outcome leaseapi.Outcome) leaseapi.Lease {
	t.Helper()
	r, err := s.Release(t.Context(), &leaseapi.ReleaseParams{JobID: l.JobID, Owner: l.Owner, Token: l.Token, Outcome: outcome})
	if err != nil {
		t.Fatalf("release %s token %d: %v", l.JobID, l.Token, err)
	}
	return r
}

// ran is the run a grant g left when it ended as end says (nil: running).
func ran(g leaseapi.Lease, end *leaseapi.Lease, outcome leaseapi.Outcome) wantRun {
	w := wantRun{token: g.Token, owner: g.Owner, tick: g.Tick, started: g.AcquiredAt, outcome: outcome}
	if end != nil {
		w.ended = end.ReleasedAt
		if end.ReleasedAt == nil { // revoked: revoked_at = expires_at
			e := end.ExpiresAt
			w.ended = &e
		}
	}
	return w
}

// waitExpired polls, bounded, until the database clock has passed l's expiry.
func waitExpired(t *testing.T, s leaseapi.Store, l leaseapi.Lease) {
	t.Helper()
	for range 500 {
		cur, err := s.Get(t.Context(), l.JobID)
		if err != nil {
			t.Fatalf("get %s: %v", l.JobID, err)
		}
		if cur.State == leaseapi.StateExpired {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: lease never expired", l.JobID)
}

// TestPostgresRunRows: every path that grants, renews or ends a grant
// leaves exactly one run row per granted token, with its outcome and
// times: the single statements, the batched ones, coalesced acquires, a
// takeover of an expired grant (single and batched), a revocation, the
// sweep's missed runs, and a release that waited for the commit of the
// grant it names.
func TestPostgresRunRows(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	base := time.Now().UTC().Truncate(time.Minute)
	tick1, tick2 := base, base.Add(time.Minute)

	// The store's sessions tell the trigger that their statements write
	// every run row; without it the trigger would write them again (and
	// skip them), costing what the statements save.
	t.Run("SessionSetting", func(t *testing.T) {
		t.Parallel()
		if v, err := b.batched.Setting(t.Context(), "leaseapi.run_rows"); err != nil || v != "decided" {
			t.Fatalf("leaseapi.run_rows of a store session: %q, %v; want decided", v, err)
		}
	})

	t.Run("Single", func(t *testing.T) {
		t.Parallel()
		job := b.prefix + "single"
		g1 := acquire(t, b.single, job, "a", time.Minute, &tick1) // insert
		if again := acquire(t, b.single, job, "a", time.Minute, &tick1); again.Token != g1.Token {
			t.Fatalf("renewal: token %d, want %d", again.Token, g1.Token)
		}
		r1 := release(t, b.single, g1, leaseapi.OutcomeSucceeded)
		release(t, b.single, g1, leaseapi.OutcomeSucceeded)       // retried: nothing changes
		g2 := acquire(t, b.single, job, "b", time.Minute, &tick2) // grant after a release
		r2 := release(t, b.single, g2, leaseapi.OutcomeFailed)
		g3 := acquire(t, b.single, job, "a", time.Minute, nil)
		b.checkRuns(t, job, ran(g1, &r1, leaseapi.OutcomeSucceeded), ran(g2, &r2, leaseapi.OutcomeFailed),
			ran(g3, nil, leaseapi.OutcomeRunning))
	})

	t.Run("Batched", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		const n = 4
		params := func(tick *time.Time) []*leaseapi.AcquireParams {
			ps := make([]*leaseapi.AcquireParams, n)
			for i := range ps {
				ps[i] = &leaseapi.AcquireParams{JobID: fmt.Sprintf("%sbatch-%d", b.prefix, n-i), Owner: "o", TTL: time.Minute, Tick: tick}
			}
			return ps
		}
		releases := func(gs []*leaseapi.Lease, outcome leaseapi.Outcome) []*leaseapi.ReleaseParams {
			rs := make([]*leaseapi.ReleaseParams, len(gs))
			for i, g := range gs {
				rs[i] = &leaseapi.ReleaseParams{JobID: g.JobID, Owner: g.Owner, Token: g.Token, Outcome: outcome}
			}
			return rs
		}
		must := func(what string) func([]*leaseapi.Lease, error) []*leaseapi.Lease {
			return func(ls []*leaseapi.Lease, err error) []*leaseapi.Lease {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				for i, l := range ls {
					if l == nil {
						t.Fatalf("%s: call %d got no row", what, i)
					}
				}
				return ls
			}
		}
		g1 := must("first grants")(b.batched.AcquireAsOneBatch(ctx, params(&tick1)))
		renewed := must("renewals")(b.batched.AcquireAsOneBatch(ctx, params(&tick1)))
		for i := range renewed {
			if renewed[i].Token != g1[i].Token {
				t.Fatalf("renewal of %s: token %d, want %d", g1[i].JobID, renewed[i].Token, g1[i].Token)
			}
		}
		r1 := must("releases")(b.batched.ReleaseBatch(ctx, releases(g1, leaseapi.OutcomeSucceeded)))
		g2 := must("grants after release")(b.batched.AcquireAsOneBatch(ctx, params(&tick2)))
		// A stale release (of g1[0]) is refused by its decision, the right
		// releases of the other jobs go as one batch; job 0 is then
		// released alone.
		rs := releases(g2, leaseapi.OutcomeFailed)
		rs[0] = releases(g1[:1], leaseapi.OutcomeSucceeded)[0]
		r2, err := b.batched.ReleaseBatch(ctx, rs)
		if err != nil {
			t.Fatalf("second releases: %v", err)
		}
		if r2[0] != nil {
			t.Fatalf("stale release of %s token %d: released", rs[0].JobID, rs[0].Token)
		}
		last := release(t, b.batched, *g2[0], leaseapi.OutcomeFailed)
		r2[0] = &last
		for i := range g1 {
			b.checkRuns(t, g1[i].JobID, ran(*g1[i], r1[i], leaseapi.OutcomeSucceeded), ran(*g2[i], r2[i], leaseapi.OutcomeFailed))
		}
	})

	t.Run("Coalesced", func(t *testing.T) {
		t.Parallel()
		job := b.prefix + "coalesced"
		store := repo.CoalesceAcquires(b.batched, 0)
		var wg sync.WaitGroup
		grants := make([]leaseapi.Lease, 8)
		for i := range grants {
			wg.Go(func() {
				l, err := store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: "o", TTL: time.Minute, Tick: &tick1})
				if err != nil {
					t.Errorf("acquire: %v", err)
				}
				grants[i] = l
			})
		}
		wg.Wait()
		for _, g := range grants {
			if g.Token != grants[0].Token {
				t.Fatalf("coalesced acquires of one owner and tick: tokens %d and %d", g.Token, grants[0].Token)
			}
		}
		r := release(t, store, grants[0], leaseapi.OutcomeSucceeded)
		b.checkRuns(t, job, ran(grants[0], &r, leaseapi.OutcomeSucceeded))
	})

	t.Run("Takeover", func(t *testing.T) {
		t.Parallel()
		for _, batched := range []bool{false, true} {
			job := fmt.Sprintf("%stakeover-%t", b.prefix, batched)
			g1 := acquire(t, b.single, job, "a", 20*time.Millisecond, &tick1)
			waitExpired(t, b.single, g1)
			var g2 leaseapi.Lease
			if batched {
				ls, err := b.batched.AcquireAsOneBatch(t.Context(), []*leaseapi.AcquireParams{
					{JobID: job, Owner: "b", TTL: time.Minute, Tick: &tick1},
					{JobID: job + "-other", Owner: "b", TTL: time.Minute},
				})
				if err != nil || ls[0] == nil {
					t.Fatalf("batched takeover: %v, %v", ls, err)
				}
				g2 = *ls[0]
			} else {
				g2 = acquire(t, b.single, job, "b", time.Minute, &tick1)
			}
			if g2.Token != g1.Token+1 || g2.LastOutcome != leaseapi.OutcomeExpired {
				t.Fatalf("takeover: token %d, last outcome %s", g2.Token, g2.LastOutcome)
			}
			// A release of the expired grant now fails and changes nothing.
			if _, err := b.single.Release(t.Context(), &leaseapi.ReleaseParams{JobID: job, Owner: "a", Token: g1.Token, Outcome: leaseapi.OutcomeSucceeded}); err == nil {
				t.Fatal("release of a grant taken over: no error")
			}
			expired := ran(g1, nil, leaseapi.OutcomeExpired)
			expired.ended = &g1.ExpiresAt
			b.checkRuns(t, job, expired, ran(g2, nil, leaseapi.OutcomeRunning))
		}
	})

	t.Run("Revoke", func(t *testing.T) {
		t.Parallel()
		job := b.prefix + "revoke"
		g1 := acquire(t, b.batched, job, "a", time.Minute, &tick1)
		rv, err := b.batched.Revoke(t.Context(), &leaseapi.RevokeParams{JobID: job, By: "admin"})
		if err != nil {
			t.Fatalf("revoke: %v", err)
		}
		g2 := acquire(t, b.batched, job, "b", time.Minute, &tick1) // grant after a revocation
		r2 := release(t, b.batched, g2, leaseapi.OutcomeSucceeded)
		revoked := ran(g1, &rv, leaseapi.OutcomeRevoked)
		revoked.revokedBy = "admin"
		b.checkRuns(t, job, revoked, ran(g2, &r2, leaseapi.OutcomeSucceeded))
		if g2.Token != g1.Token+2 {
			t.Errorf("grant after revocation: token %d, want %d", g2.Token, g1.Token+2)
		}
	})

	t.Run("SweepMissed", func(t *testing.T) {
		t.Parallel()
		job := b.prefix + "missed"
		g, err := b.batched.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: "a", TTL: time.Minute,
			Schedule: "@every 1s", Grace: 50 * time.Millisecond})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		r := release(t, b.batched, g, leaseapi.OutcomeSucceeded)
		var missed int64
		for range 100 {
			if _, err := b.batched.SweepTicks(t.Context(), 100); err != nil {
				t.Fatalf("SweepTicks: %v", err)
			}
			if err := b.db.QueryRowContext(t.Context(),
				`SELECT count(*) FROM runs WHERE job_id = $1 AND outcome = 'missed' AND token IS NULL`, job).Scan(&missed); err != nil {
				t.Fatalf("count missed runs: %v", err)
			}
			if missed >= 2 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		var ticks int64
		if err := b.db.QueryRowContext(t.Context(),
			`SELECT count(DISTINCT tick) FROM runs WHERE job_id = $1 AND outcome = 'missed'`, job).Scan(&ticks); err != nil {
			t.Fatalf("count missed ticks: %v", err)
		}
		if missed < 2 || ticks != missed {
			t.Fatalf("missed runs: %d for %d ticks, want at least 2, one per tick", missed, ticks)
		}
		b.checkRuns(t, job, ran(g, &r, leaseapi.OutcomeSucceeded))
	})

	// A session that does not say its statements write the run rows (an
	// instance of an older version, during a rolling upgrade) gets them
	// written by the trigger; mixed with the store's statements, every
	// grant still has one run.
	t.Run("OlderVersionSession", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		job := b.prefix + "older"
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := b.db.ExecContext(ctx, q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		exec(`INSERT INTO leases (job_id, owner, token, tick, ttl_ms, acquired_at, renewed_at, expires_at)
VALUES ($1, 'old', 1, $2, 60000, clock_timestamp(), clock_timestamp(), clock_timestamp() + interval '1 minute')`, job, tick1)
		exec(`UPDATE leases SET (released_at, expires_at, last_outcome) = (clock_timestamp(), clock_timestamp(), 'succeeded') WHERE job_id = $1`, job)
		exec(`UPDATE leases SET (token, owner, tick, acquired_at, renewed_at, expires_at, released_at) =
	(token + 1, 'old', $2, clock_timestamp(), clock_timestamp(), clock_timestamp() + interval '1 minute', NULL) WHERE job_id = $1`, job, tick2)
		old := make([]leaseapi.Lease, 2)
		rows, err := b.db.QueryContext(ctx, `SELECT token, tick, started_at, ended_at FROM runs WHERE job_id = $1 ORDER BY token`, job)
		if err != nil {
			t.Fatalf("read runs: %v", err)
		}
		for i := 0; rows.Next(); i++ {
			if i == len(old) {
				t.Fatal("more than two runs for two grants")
			}
			var ended sql.NullTime
			var tick time.Time
			if err := rows.Scan(&old[i].Token, &tick, &old[i].AcquiredAt, &ended); err != nil {
				t.Fatalf("scan: %v", err)
			}
			old[i].JobID, old[i].Owner, old[i].Tick, old[i].ReleasedAt = job, "old", &tick, nil
			if ended.Valid {
				old[i].ReleasedAt = &ended.Time
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("read runs: %v", err)
		}
		_ = rows.Close()
		if old[0].ReleasedAt == nil || old[1].Token != 2 || old[1].ReleasedAt != nil {
			t.Fatalf("runs written by the trigger: %+v", old)
		}
		r2 := release(t, b.batched, old[1], leaseapi.OutcomeFailed)
		g3 := acquire(t, b.batched, job, "new", time.Minute, nil)
		b.checkRuns(t, job, ran(old[0], &old[0], leaseapi.OutcomeSucceeded), ran(old[1], &r2, leaseapi.OutcomeFailed),
			ran(g3, nil, leaseapi.OutcomeRunning))
	})

	// A release that waits for the lease row's lock (a heartbeat holds it,
	// and the sweep holds the run's) decides on the row as it is after the
	// wait, and closes the run it reads. A release naming a grant that is
	// not committed yet is refused and leaves that grant's run alone.
	t.Run("ReleaseWaitsForLock", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		job := b.prefix + "waits"
		g1 := acquire(t, b.single, job, "a", time.Minute, &tick1)
		r1 := release(t, b.single, g1, leaseapi.OutcomeSucceeded)

		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		defer func() { _ = tx.Rollback() }()
		token, acquired := grantInTx(t, b.single, tx, job, "a", tick2)
		if _, err := b.batched.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "a", Token: token, Outcome: leaseapi.OutcomeSucceeded}); !errors.Is(err, leaseapi.ErrLeaseLost) {
			t.Fatalf("release of a grant not committed yet: %v, want lease_lost", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}

		tx, err = b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		defer func() { _ = tx.Rollback() }()
		var pid int
		if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatalf("backend pid: %v", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE leases SET renewed_at = clock_timestamp() WHERE job_id = $1`, job); err != nil {
			t.Fatalf("renew in a transaction: %v", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET expiry_counted = true WHERE job_id = $1 AND token = $2`, job, token); err != nil {
			t.Fatalf("mark the run in a transaction: %v", err)
		}
		type result struct {
			l   leaseapi.Lease
			err error
		}
		done := make(chan result, 1)
		go func() {
			l, err := b.batched.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "a", Token: token, Outcome: leaseapi.OutcomeFailed})
			done <- result{l, err}
		}()
		waiting := false
		for range 1000 {
			var n int
			if err := b.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n); err != nil {
				t.Fatalf("blocked backends: %v", err)
			}
			if waiting = n > 0; waiting {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		if !waiting {
			t.Fatal("the release never waited for the row lock")
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		res := <-done
		if res.err != nil {
			t.Fatalf("release after the wait: %v", res.err)
		}
		g2 := leaseapi.Lease{Token: token, Owner: "a", Tick: &tick2, AcquiredAt: acquired}
		b.checkRuns(t, job, ran(g1, &r1, leaseapi.OutcomeSucceeded), ran(g2, &res.l, leaseapi.OutcomeFailed))
	})
}

// grantInTx grants the acquire in tx and returns the grant's token and
// start.
func grantInTx(t *testing.T, store *postgres.Store, tx *sql.Tx, job, owner string, tick time.Time) (int64, time.Time) {
	t.Helper()
	l, err := store.AcquireInTx(t.Context(), tx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Minute, Tick: &tick})
	if err != nil {
		t.Fatalf("grant in a transaction: %v", err)
	}
	return l.Token, l.AcquiredAt
}
