package repo

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// TestTickSweeperPass: one pass decides every due tick, however many
// batches that takes, and Run stops when its context ends.
func TestTickSweeperPass(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "leaseapi.db")})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	jobs := []string{"a", "b", "c"}
	var since time.Time
	for _, job := range jobs {
		l, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "o", TTL: time.Hour, Schedule: "@every 1s", Grace: 10 * time.Millisecond})
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		if _, err := s.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "o", Token: l.Token, Outcome: leaseapi.OutcomeSucceeded}); err != nil {
			t.Fatalf("Release: %v", err)
		}
		since = l.AcquiredAt
	}
	sw, err := NewTickSweeper(s, TickSweeperConfig{Interval: time.Hour, BatchSize: 1}, nil)
	if err != nil {
		t.Fatalf("NewTickSweeper: %v", err)
	}
	// Past the second tick after the last registration (and its grace):
	// every job has at least one missed tick due.
	for time.Since(since) < 2100*time.Millisecond {
		time.Sleep(10 * time.Millisecond)
	}
	res, err := sw.runOnce(ctx)
	if err != nil {
		t.Fatalf("runOnce: %v", err)
	}
	if res.More || res.Missed < int64(len(jobs)) {
		t.Errorf("runOnce with batches of one job: got %+v, want every job's due ticks decided (missed >= %d, no more)", res, len(jobs))
	}
	for _, job := range jobs {
		if l, err := s.Get(ctx, job); err != nil || l.MissedTicks < 1 {
			t.Errorf("Get(%s): got %+v, %v, want at least one missed tick", job, l, err)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { sw.Run(runCtx); close(done) }()
	cancel()
	<-done
}

func TestTickSweeperConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []TickSweeperConfig{{Interval: -time.Second}, {BatchSize: -1}} {
		if _, err := NewTickSweeper(nil, cfg, nil); err == nil {
			t.Errorf("NewTickSweeper(%+v): got no error", cfg)
		}
	}
}
