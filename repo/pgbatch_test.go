package repo_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestPostgresBatchedCycles has many callers acquire and release jobs of
// their own at once, so that their calls meet in batches, and checks every
// answer and every job's run history: each grant its own token, each
// release its own run, none lost or merged.
func TestPostgresBatchedCycles(t *testing.T) {
	t.Parallel()
	store, err := repo.OpenPostgres(t.Context(), repo.PostgresConfig{DSN: repotest.PostgresURL(t), MaxOpenConns: 4})
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
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
