package repo_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestLimitCalls fills every slot with calls that wait, then checks that
// each lease call is refused at once with ErrOverloaded (an unavailable
// error), every call of a batch too, that Ready still passes, and that calls
// pass again once the slots are free.
func TestLimitCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gate := repotest.NewGateStore()
	const limit = 2
	store := repo.LimitCalls(gate, limit)

	done := make(chan error, limit)
	for range limit {
		go func() {
			_, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: "j"})
			done <- err
		}()
		<-gate.Started
	}

	calls := map[string]func() error{
		"Acquire": func() error {
			_, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: "j"})
			return err
		},
		"Heartbeat": func() error { _, err := store.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: "j"}); return err },
		"Release":   func() error { _, err := store.Release(ctx, &leaseapi.ReleaseParams{JobID: "j"}); return err },
		"Revoke":    func() error { _, err := store.Revoke(ctx, &leaseapi.RevokeParams{JobID: "j"}); return err },
		"Get":       func() error { _, err := store.Get(ctx, "j"); return err },
		"List":      func() error { _, err := store.List(ctx, &leaseapi.ListParams{Limit: 1}); return err },
		"Runs":      func() error { _, err := store.Runs(ctx, "j", 1); return err },
		"RecentRuns": func() error {
			_, err := store.RecentRuns(ctx, &leaseapi.RecentRunsParams{Limit: 1})
			return err
		},
		"Pause":  func() error { _, err := store.Pause(ctx, &leaseapi.PauseParams{JobID: "j"}); return err },
		"Resume": func() error { _, err := store.Resume(ctx, "j"); return err },
		"Forget": func() error { _, err := store.ForgetSchedule(ctx, "j"); return err },
		"Stats":  func() error { _, err := store.Stats(ctx, ""); return err },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, leaseapi.ErrOverloaded) || !errors.Is(err, leaseapi.ErrUnavailable) {
			t.Errorf("%s with every slot taken: got %v, want ErrOverloaded wrapping ErrUnavailable", name, err)
		}
	}
	// A batch takes one slot: without one, each of its calls is refused.
	const items = 3
	batches := map[string]func() []leaseapi.Answer{
		"AcquireBatch": func() []leaseapi.Answer {
			return store.AcquireBatch(ctx, []*leaseapi.AcquireParams{{JobID: "a"}, {JobID: "b"}, {JobID: "c"}})
		},
		"HeartbeatBatch": func() []leaseapi.Answer {
			return store.HeartbeatBatch(ctx, []*leaseapi.HeartbeatParams{{JobID: "a"}, {JobID: "b"}, {JobID: "c"}})
		},
	}
	for name, batch := range batches {
		answers := batch()
		if len(answers) != items {
			t.Errorf("%s of %d calls with every slot taken: got %d answers, want %d", name, items, len(answers), items)
		}
		for i, a := range answers {
			if !errors.Is(a.Err, leaseapi.ErrOverloaded) {
				t.Errorf("%s with every slot taken, call %d: got %v, want ErrOverloaded", name, i, a.Err)
			}
		}
	}
	if err := store.Ready(ctx); err != nil {
		t.Errorf("Ready with every slot taken: %v, want nil (not limited)", err)
	}

	close(gate.Unblock)
	for range limit {
		if err := <-done; err != nil {
			t.Errorf("a call that held a slot: %v", err)
		}
	}
	go func() {
		for range gate.Started { // calls from now on pass the gate at once
		}
	}()
	defer close(gate.Started)
	for name, call := range calls {
		if err := call(); err != nil {
			t.Errorf("%s after the slots were freed: %v", name, err)
		}
	}
	for name, batch := range batches {
		for i, a := range batch() {
			if a.Err != nil {
				t.Errorf("%s after the slots were freed, call %d: %v", name, i, a.Err)
			}
		}
	}
}
