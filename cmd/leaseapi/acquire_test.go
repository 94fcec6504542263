package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestServedStore checks the wiring of LEASEAPI_MAX_IN_FLIGHT and of the
// benchmark's naive baseline with a limit of one call: while an acquire of a job
// waits at the store, a second acquire of the same job is coalesced with it
// in fast mode (it waits for the next call instead of being refused) and
// refused as overloaded in naive mode, and an acquire of another job is
// refused as overloaded in both.
func TestServedStore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode      string
		wantNaive bool
	}{
		{mode: "Served", wantNaive: false},
		{mode: "NaiveBaseline", wantNaive: true},
	}
	if naiveAcquire() {
		t.Errorf("naiveAcquire() = true in a build without -tags leasebench")
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			gate := repotest.NewGateStore()
			store := servedStore(gate, 1, leaseapi.DefaultMaxTickAhead, tt.wantNaive)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound, not a measurement
			defer cancel()
			acquire := func(job, owner string) chan error {
				done := make(chan error, 1)
				go func() {
					_, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Second})
					done <- err
				}()
				return done
			}

			first := acquire("a", "one")
			<-gate.Started // the only slot is taken
			if err := <-acquire("b", "two"); !errors.Is(err, leaseapi.ErrOverloaded) {
				t.Errorf("acquire of another job while the slot is taken: %v, want ErrOverloaded", err)
			}
			sameJob := acquire("a", "three")
			if tt.wantNaive {
				if err := <-sameJob; !errors.Is(err, leaseapi.ErrOverloaded) {
					t.Errorf("naive: acquire of the same job while the slot is taken: %v, want ErrOverloaded", err)
				}
			}
			go func() {
				for range gate.Started { // later calls pass the gate at once
				}
			}()
			close(gate.Unblock)
			if err := <-first; err != nil {
				t.Errorf("first acquire: %v", err)
			}
			if !tt.wantNaive {
				// Coalesced: decided by the next call, which the gate store
				// answers with a grant to the follower itself.
				if err := <-sameJob; err != nil {
					t.Errorf("fast: acquire of the same job queued behind the first: %v, want it coalesced, not refused", err)
				}
			}
			close(gate.Started)
		})
	}
}
