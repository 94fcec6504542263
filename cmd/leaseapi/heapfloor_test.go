package main

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		live, floor uint64
		want        int
	}{
		{0, 16 * mib, 400},
		{1 * mib, 16 * mib, 400},   // the runtime's 4 MiB minimum, scaled, reaches 16 MiB first
		{3 * mib, 16 * mib, 400},   // 3 MiB × 5 = 15 MiB < 16 MiB = 4 MiB × 4
		{6 * mib, 16 * mib, 166},   // 6 MiB × 2.66 = 16 MiB
		{8 * mib, 16 * mib, 100},   // doubling reaches the floor
		{100 * mib, 16 * mib, 100}, // a large heap keeps the default
	}
	for _, c := range cases {
		got := gcPercentFor(c.live, c.floor)
		if got != c.want {
			t.Errorf("gcPercentFor(%d MiB live, %d MiB floor) = %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
		goal := max(c.live*uint64(100+got)/100, runtimeHeapMinimum*uint64(got)/100)
		if goal < c.floor*99/100 { // the percentage is rounded down
			t.Errorf("live %d MiB: GOGC %d gives a goal of %d bytes, under the floor %d", c.live/mib, got, goal, c.floor)
		}
	}
}

// TestKeepHeapFloor: the floor raises GOGC at start and again after a
// collection that finds it reset; once stopped, GOGC is 100 and stays so.
// GOGC in the environment turns it off. Not parallel: GOGC is the process's.
func TestKeepHeapFloor(t *testing.T) {
	t.Setenv("GOGC", "") // restores the old value after the test
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	logger := slog.New(slog.DiscardHandler)
	const floor = 1 << 30 // far above this test binary's live heap

	stop := keepHeapFloor(logger, floor)
	if got := gogc(t); got <= 100 {
		t.Fatalf("after keepHeapFloor: GOGC %d, want above 100", got)
	}
	debug.SetGCPercent(100)
	raised := false
	for range 50 {
		runtime.GC()
		time.Sleep(time.Millisecond) // let the finalizer goroutine run
		if gogc(t) > 100 {
			raised = true
			break
		}
	}
	if !raised {
		t.Fatal("50 collections after GOGC was reset to 100: never raised again")
	}
	stop()
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := gogc(t); got != 100 {
		t.Fatalf("after stop and 3 collections: GOGC %d, want 100", got)
	}

	t.Setenv("GOGC", "100")
	stop = keepHeapFloor(logger, floor)
	defer stop()
	if got := gogc(t); got != 100 {
		t.Fatalf("with GOGC=100 in the environment: GOGC %d, want it left at 100", got)
	}
}

func gogc(t testing.TB) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatal("runtime/metrics does not report /gc/gogc:percent")
	}
	return int(s[0].Value.Uint64())
}
