package repo_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestCoalescedBatchHerd sends, at each of several ticks, the acquires of
// every job from many owners at once as batches (each owner's items in an
// order of its own), alone or with single acquires of the same jobs,
// through the coalescer over Postgres, of one instance or two: each job is granted exactly once
// per tick, every other call is refused lease_held naming the winner, the
// tokens of a job's grants increase, and once the winners release, every
// call is refused tick_done. The context bounds the test: a deadlock
// would end in unavailable answers, not a hang.
func TestCoalescedBatchHerd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		instances int // stores over the database, each with its coalescer
		singles   int // owners that acquire each job with single calls
	}{
		{"batches", 1, 0},
		{"batches and single calls", 1, 3},
		{"two instances", 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testBatchHerd(t, tc.instances, tc.singles)
		})
	}
}

// herdCall is one acquire of the herd and its answer.
type herdCall struct {
	owner string
	job   int
	leaseapi.Answer
}

func testBatchHerd(t *testing.T, instances, singles int) {
	const jobs, batchOwners, ticks = 50, 8, 6
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stores := make([]leaseapi.Store, instances)
	for i := range stores {
		pg, err := postgres.Open(ctx, postgres.Config{DSN: repotest.PostgresURL(t)})
		if err != nil {
			t.Fatalf("OpenPostgres: %v", err)
		}
		stores[i] = repo.CoalesceAcquires(pg, 0)
		t.Cleanup(func() { _ = stores[i].Close() })
	}

	prefix := fmt.Sprintf("batchherd-%x", rand.Uint64())
	jobID := func(j int) string { return fmt.Sprintf("%s-%d", prefix, j) }
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, seed))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("item orders from seed %d", seed)
		}
	})

	// herd makes every owner's acquires of every job for tick at once
	// and returns their answers.
	herd := func(wave string, tick time.Time) []herdCall {
		var (
			mu    sync.Mutex
			calls []herdCall
			wg    sync.WaitGroup
		)
		record := func(c herdCall) { mu.Lock(); calls = append(calls, c); mu.Unlock() }
		start := make(chan struct{})
		for o := range batchOwners {
			owner := fmt.Sprintf("%s-batch-%d", wave, o)
			order := rng.Perm(jobs)
			ps := make([]*leaseapi.AcquireParams, jobs)
			for i, j := range order {
				ps[i] = &leaseapi.AcquireParams{JobID: jobID(j), Owner: owner, TTL: time.Hour, Tick: &tick}
			}
			wg.Go(func() {
				<-start
				answers := stores[o%instances].AcquireBatch(ctx, ps)
				if len(answers) != len(ps) {
					t.Errorf("batch of %s: got %d answers to %d items", owner, len(answers), len(ps))
				}
				for i, a := range answers {
					record(herdCall{owner, order[i], a})
				}
			})
		}
		for o := range singles {
			owner := fmt.Sprintf("%s-single-%d", wave, o)
			for j := range jobs {
				wg.Go(func() {
					<-start
					l, err := stores[o%instances].Acquire(ctx, &leaseapi.AcquireParams{JobID: jobID(j), Owner: owner, TTL: time.Hour, Tick: &tick})
					record(herdCall{owner, j, leaseapi.Answer{Lease: l, Err: err}})
				})
			}
		}
		close(start)
		wg.Wait()
		if want := jobs * (batchOwners + singles); len(calls) != want {
			t.Fatalf("%s: got %d answers, want %d", wave, len(calls), want)
		}
		return calls
	}

	lastToken := make([]int64, jobs)
	base := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	for k := range ticks {
		tick := base.Add(time.Duration(k) * time.Minute)
		wave := fmt.Sprintf("t%d", k)
		winners := make([]*herdCall, jobs)
		calls := herd(wave, tick)
		for i, c := range calls {
			if c.Err != nil {
				continue
			}
			if w := winners[c.job]; w != nil {
				t.Fatalf("%s: job %d granted to %s (token %d) and %s (token %d)", wave, c.job, w.owner, w.Lease.Token, c.owner, c.Lease.Token)
			}
			winners[c.job] = &calls[i]
		}
		for j, w := range winners {
			if w == nil {
				t.Fatalf("%s: job %d granted to nobody", wave, j)
			}
			if w.Lease.Owner != w.owner || w.Lease.State != leaseapi.StateHeld || !w.Lease.Tick.Equal(tick) {
				t.Errorf("%s: job %d: winner %s got owner %s, state %s, tick %s; want its own, held, %s",
					wave, j, w.owner, w.Lease.Owner, w.Lease.State, w.Lease.Tick, tick)
			}
			if w.Lease.Token <= lastToken[j] {
				t.Errorf("%s: job %d granted token %d after token %d, want a greater one", wave, j, w.Lease.Token, lastToken[j])
			}
			lastToken[j] = w.Lease.Token
		}
		refused := 0
		for _, c := range calls {
			if c.Err == nil {
				continue
			}
			w := winners[c.job]
			var conflict *leaseapi.ConflictError
			if !errors.Is(c.Err, leaseapi.ErrLeaseHeld) || !errors.As(c.Err, &conflict) ||
				conflict.Lease.Owner != w.owner || conflict.Lease.Token != w.Lease.Token {
				if refused++; refused <= 5 {
					t.Errorf("%s: job %d, %s: got %v, want lease_held naming the winner %s (token %d)",
						wave, c.job, c.owner, c.Err, w.owner, w.Lease.Token)
				}
			}
		}
		if t.Failed() {
			return
		}

		for j, w := range winners {
			if _, err := stores[0].Release(ctx, &leaseapi.ReleaseParams{JobID: jobID(j), Owner: w.owner,
				Token: w.Lease.Token, Outcome: leaseapi.OutcomeSucceeded}); err != nil {
				t.Fatalf("%s: release of job %d by %s: %v", wave, j, w.owner, err)
			}
		}
		// The tick is done: nobody gets it again, however many ask at once.
		for _, c := range herd(wave+"-again", tick) {
			if !errors.Is(c.Err, leaseapi.ErrTickDone) {
				t.Fatalf("%s, after the release: job %d, %s: got token %d, error %v, want tick_done",
					wave, c.job, c.owner, c.Lease.Token, c.Err)
			}
		}
	}
}
