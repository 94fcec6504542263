package main

import (
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestSetMemoryLimit: a container limit becomes a soft memory limit of 90%
// of it; no cgroup means no limit. Not parallel: the limit is the process's.
func TestSetMemoryLimit(t *testing.T) {
	for _, k := range []string{"GOMEMLIMIT", "AUTOMEMLIMIT"} { // either in the environment would win
		t.Setenv(k, "") // restores the old value after the test
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	logger := slog.New(slog.DiscardHandler)

	setMemoryLimit(logger, memlimit.Limit(100<<20))
	if got, want := debug.SetMemoryLimit(-1), int64(90<<20); got != want {
		t.Errorf("with a 100 MiB container limit: GOMEMLIMIT %d, want %d (90%%)", got, want)
	}
	for _, err := range []error{memlimit.ErrNoCgroup, memlimit.ErrCgroupsNotSupported, memlimit.ErrNoLimit} {
		setMemoryLimit(logger, func() (uint64, error) { return 0, err })
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("provider error %v: GOMEMLIMIT %d, want no limit", err, got)
		}
	}
	setMemoryLimit(logger, func() (uint64, error) { return 0, errors.New("unreadable cgroup") })
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("unreadable cgroup: GOMEMLIMIT %d, want the previous one (no limit)", got)
	}
}
