package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestPostgresBatchedCycles has many callers acquire and release jobs of
// their own at once, so that their calls meet in batches, and checks every
// answer and every job's run history: each grant its own token, each
// release its own run, none lost or merged.
func TestPostgresBatchedCycles(t *testing.T) {
	t.Parallel()
	store, err := postgres.Open(t.Context(), postgres.Config{DSN: repotest.PostgresURL(t), MaxOpenConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer store.Close()
	const workers, cycles = 24, 15
	prefix := fmt.Sprintf("batched-%d", time.Now().UnixNano())
	base := time.Now().UTC().Truncate(time.Minute)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			job, owner := fmt.Sprintf("%s-%02d", prefix, w), fmt.Sprintf("owner-%d", w)
			for i := range cycles {
				tick := base.Add(time.Duration(i) * time.Second)
				l, err := store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Minute, Tick: &tick})
				if err != nil {
					t.Errorf("%s cycle %d: acquire: %v", job, i, err)
					return
				}
				if l.Token != int64(i+1) || l.Owner != owner || !l.Tick.Equal(tick) || l.State != leaseapi.StateHeld {
					t.Errorf("%s cycle %d: acquire gave token %d owner %q tick %v state %s", job, i, l.Token, l.Owner, l.Tick, l.State)
					return
				}
				outcome := leaseapi.OutcomeSucceeded
				if i%3 == 0 {
					outcome = leaseapi.OutcomeFailed
				}
				r, err := store.Release(t.Context(), &leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: outcome})
				if err != nil {
					t.Errorf("%s cycle %d: release: %v", job, i, err)
					return
				}
				if r.State != leaseapi.StateReleased || r.Token != l.Token || r.LastOutcome != outcome {
					t.Errorf("%s cycle %d: release gave state %s token %d outcome %s", job, i, r.State, r.Token, r.LastOutcome)
					return
				}
				// A stale release of the same grant is answered alone, as before.
				if _, err := store.Release(t.Context(), &leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: outcome}); err != nil {
					t.Errorf("%s cycle %d: retried release: %v", job, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for w := range workers {
		job := fmt.Sprintf("%s-%02d", prefix, w)
		runs, err := store.Runs(t.Context(), job, 100)
		if err != nil {
			t.Fatalf("runs of %s: %v", job, err)
		}
		if len(runs) != cycles {
			t.Fatalf("runs of %s: got %d, want %d", job, len(runs), cycles)
		}
		for _, r := range runs { // newest first
			i := int(r.Token) - 1
			want := leaseapi.OutcomeSucceeded
			if i%3 == 0 {
				want = leaseapi.OutcomeFailed
			}
			if r.Outcome != want || r.EndedAt == nil {
				t.Errorf("%s run of token %d: outcome %s, ended %v; want %s, ended", job, r.Token, r.Outcome, r.EndedAt, want)
			}
		}
	}
}

// TestPostgresBatchedHeartbeats: a batch of heartbeats answers each call
// with its own row, renewing only the grants whose owner and token match
// and that are still held; and heartbeats of many callers at once, which
// meet in batches, each get their own answer.
func TestPostgresBatchedHeartbeats(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, err := postgres.Open(ctx, postgres.Config{DSN: repotest.PostgresURL(t), MaxOpenConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer store.Close()
	prefix := fmt.Sprintf("batched-hb-%d", time.Now().UnixNano())

	t.Run("OneBatch", func(t *testing.T) {
		grants := make([]leaseapi.Lease, 5)
		for i := range grants {
			ttl := time.Minute
			if i == 4 {
				ttl = 20 * time.Millisecond
			}
			l, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: fmt.Sprintf("%s-one-%d", prefix, 5-i), Owner: "o", TTL: ttl})
			if err != nil {
				t.Fatalf("acquire: %v", err)
			}
			grants[i] = l
		}
		for range 500 { // bounded: until the database clock passes the short grant's expiry
			if l, err := store.Get(ctx, grants[4].JobID); err != nil || l.State == leaseapi.StateExpired {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		hs := []*leaseapi.HeartbeatParams{
			{JobID: grants[0].JobID, Owner: "o", Token: grants[0].Token},                       // renewed, keeps its TTL
			{JobID: grants[1].JobID, Owner: "o", Token: grants[1].Token, TTL: 2 * time.Minute}, // renewed with a new TTL
			{JobID: grants[2].JobID, Owner: "o", Token: grants[2].Token + 1},                   // wrong token
			{JobID: grants[3].JobID, Owner: "p", Token: grants[3].Token},                       // wrong owner
			{JobID: grants[4].JobID, Owner: "o", Token: grants[4].Token},                       // expired
			{JobID: prefix + "-one-unknown", Owner: "o", Token: 1},                             // no such job
		}
		got, err := store.HeartbeatAsOneBatch(ctx, hs)
		if err != nil {
			t.Fatalf("HeartbeatAsOneBatch: %v", err)
		}
		for i, wantTTL := range []time.Duration{time.Minute, 2 * time.Minute} {
			l := got[i]
			if l == nil {
				t.Fatalf("heartbeat %d: refused", i)
			}
			if l.JobID != grants[i].JobID || l.Token != grants[i].Token || l.TTL != wantTTL || !l.RenewedAt.After(grants[i].RenewedAt) ||
				!l.ExpiresAt.Equal(l.RenewedAt.Add(wantTTL)) || l.State != leaseapi.StateHeld {
				t.Errorf("heartbeat %d: got job %s token %d ttl %v renewed %v expires %v state %s", i, l.JobID, l.Token, l.TTL, l.RenewedAt, l.ExpiresAt, l.State)
			}
		}
		for i := 2; i < len(hs); i++ {
			if got[i] != nil {
				t.Errorf("heartbeat %d (%s token %d by %s): renewed, want refused", i, hs[i].JobID, hs[i].Token, hs[i].Owner)
			}
		}
		for i := 2; i < 5; i++ {
			cur, err := store.Get(ctx, grants[i].JobID)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if !cur.RenewedAt.Equal(grants[i].RenewedAt) || !cur.ExpiresAt.Equal(grants[i].ExpiresAt) {
				t.Errorf("refused heartbeat changed %s: renewed %v expires %v, was %v %v", cur.JobID, cur.RenewedAt, cur.ExpiresAt, grants[i].RenewedAt, grants[i].ExpiresAt)
			}
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		const workers, beats = 16, 10
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				job, owner := fmt.Sprintf("%s-c-%02d", prefix, w), fmt.Sprintf("owner-%d", w)
				l, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Minute})
				if err != nil {
					t.Errorf("%s: acquire: %v", job, err)
					return
				}
				last := l.RenewedAt
				for i := range beats {
					h, err := store.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: job, Owner: owner, Token: l.Token})
					if err != nil {
						t.Errorf("%s beat %d: %v", job, i, err)
						return
					}
					if h.JobID != job || h.Token != l.Token || h.Owner != owner || !h.RenewedAt.After(last) {
						t.Errorf("%s beat %d: got job %s token %d owner %s renewed %v after %v", job, i, h.JobID, h.Token, h.Owner, h.RenewedAt, last)
						return
					}
					last = h.RenewedAt
					if _, err := store.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: job, Owner: owner, Token: l.Token + 1}); !errors.Is(err, leaseapi.ErrLeaseLost) {
						t.Errorf("%s beat %d with a wrong token: %v, want lease_lost", job, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
}

// TestPostgresBatchTickAhead: in one batch statement, a new job's tick and
// a known job's tick two days ahead of the clock are refused, writing
// nothing, while the batch's other call is granted; each refused call,
// made alone, is answered tick_ahead.
func TestPostgresBatchTickAhead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, err := postgres.Open(ctx, postgres.Config{DSN: repotest.PostgresURL(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer store.Close()
	prefix := fmt.Sprintf("batch-ahead-%d", time.Now().UnixNano())
	fresh, known, fine := prefix+"-fresh", prefix+"-known", prefix+"-fine"
	now := time.Now().UTC().Truncate(time.Millisecond)
	past, future := now.Add(-time.Hour), now.Add(48*time.Hour)
	l, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: known, Owner: "a", TTL: time.Minute, Tick: &past})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	before, err := store.Release(ctx, &leaseapi.ReleaseParams{JobID: known, Owner: "a", Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	calls := []*leaseapi.AcquireParams{
		{JobID: fresh, Owner: "b", TTL: time.Minute, Tick: &future},
		{JobID: known, Owner: "b", TTL: time.Minute, Tick: &future},
		{JobID: fine, Owner: "b", TTL: time.Minute, Tick: &past},
	}
	got, err := store.AcquireAsOneBatch(ctx, calls)
	if err != nil {
		t.Fatalf("AcquireAsOneBatch: %v", err)
	}
	if got[0] != nil || got[1] != nil || got[2] == nil || !got[2].Tick.Equal(past) {
		t.Fatalf("AcquireAsOneBatch: got %v, want the two ticks ahead refused and the past one granted", got)
	}
	if _, err := store.Get(ctx, fresh); !errors.Is(err, leaseapi.ErrNotFound) {
		t.Errorf("Get(%s): got %v, want not_found (nothing written)", fresh, err)
	}
	if after, err := store.Get(ctx, known); err != nil || after.Token != before.Token || !after.RenewedAt.Equal(before.RenewedAt) {
		t.Errorf("Get(%s): got %+v, %v; want the lease unchanged (token %d)", known, after, err, before.Token)
	}
	for _, c := range calls[:2] {
		if _, err := store.Acquire(ctx, c); !errors.Is(err, leaseapi.ErrTickAhead) {
			t.Errorf("Acquire(%s) alone: got %v, want tick_ahead", c.JobID, err)
		}
	}
}

// TestPostgresBatchedGrantRowChanged: in a batch of grants, a row that
// changed between its read and the batch's write is not written, the
// others are, and that one call reads, decides and writes again.
func TestPostgresBatchedGrantRowChanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := repotest.PostgresURL(t)
	db := openDB(t, dsn)
	store, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer store.Close()
	prefix := fmt.Sprintf("batch-changed-%d", time.Now().UnixNano())
	jobs := []string{prefix + "-a", prefix + "-b", prefix + "-c"}
	changed := jobs[1]
	first := make(map[string]leaseapi.Lease)
	var calls []*leaseapi.AcquireParams
	for _, job := range jobs {
		l, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "a", TTL: time.Minute})
		if err != nil {
			t.Fatalf("Acquire(%s): %v", job, err)
		}
		if _, err := store.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "a", Token: l.Token, Outcome: leaseapi.OutcomeSucceeded}); err != nil {
			t.Fatalf("Release(%s): %v", job, err)
		}
		first[job] = l
		calls = append(calls, &leaseapi.AcquireParams{JobID: job, Owner: "b", TTL: time.Minute})
	}
	decisions := 0
	store.SetBeforeAcquireWrite(func() {
		decisions++
		if decisions == 1 {
			// A new row version that leaves the lease as it was: the
			// batch's write of this job must not be applied to it.
			if _, err := db.ExecContext(ctx, `UPDATE leases SET owner = owner WHERE job_id = $1`, changed); err != nil {
				t.Errorf("change %s: %v", changed, err)
			}
		}
	})
	got, err := store.AcquireAsOneBatch(ctx, calls)
	if err != nil {
		t.Fatalf("AcquireAsOneBatch: %v", err)
	}
	if decisions != 2 {
		t.Errorf("decisions before a write: %d, want 2 (the batch, then the changed job's second attempt)", decisions)
	}
	for i, job := range jobs {
		if got[i] == nil || got[i].Owner != "b" || got[i].Token != first[job].Token+1 {
			t.Errorf("grant of %s: got %+v, want b's, token %d", job, got[i], first[job].Token+1)
		}
		runs, err := store.Runs(ctx, job, 10)
		if err != nil {
			t.Fatalf("Runs(%s): %v", job, err)
		}
		if len(runs) != 2 || runs[0].Owner != "b" || runs[0].Outcome != leaseapi.OutcomeRunning {
			t.Errorf("runs of %s: got %+v, want b's running and a's", job, runs)
		}
	}
}

// TestPostgresAcquireBatchMakesItsFallbacksTogether sends a batch of jobs
// without a row, each of which the batch makes again as a single Acquire,
// and holds every write until all of them have read: made one after the
// other, as they were, a batch of 1,000 new jobs took 1,000 round trips
// and answered 503 past the request's deadline.
func TestPostgresAcquireBatchMakesItsFallbacksTogether(t *testing.T) {
	t.Parallel()
	store, err := postgres.Open(t.Context(), postgres.Config{DSN: repotest.PostgresURL(t), MaxOpenConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer store.Close()
	const jobs = 3
	var arrived sync.WaitGroup
	arrived.Add(jobs)
	allRead := make(chan struct{})
	go func() { arrived.Wait(); close(allRead) }()
	store.SetBeforeAcquireWrite(func() {
		arrived.Done()
		select {
		case <-allRead:
		case <-time.After(10 * time.Second): // a guard against a hang, not a measure
			t.Error("an acquire of the batch waited for its write while the others had not read: the fallbacks are made one after the other")
		}
	})
	prefix := fmt.Sprintf("fallbacks-%d", time.Now().UnixNano())
	tick := time.Now().UTC().Truncate(time.Minute)
	ps := make([]*leaseapi.AcquireParams, jobs)
	for i := range ps {
		ps[i] = &leaseapi.AcquireParams{JobID: fmt.Sprintf("%s-%d", prefix, i), Owner: "a", TTL: time.Minute, Tick: &tick}
	}
	for i, a := range store.AcquireBatch(t.Context(), ps) {
		if a.Err != nil || a.Lease.Token != 1 || a.Lease.Owner != "a" {
			t.Errorf("%s: got %+v, %v; want token 1 for a", ps[i].JobID, a.Lease, a.Err)
		}
	}
}
