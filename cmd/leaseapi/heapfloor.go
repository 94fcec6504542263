package main

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// heapFloor is the smallest heap the garbage collector lets leaseapi grow
// to before it collects. leaseapi keeps about 1 MiB live while it serves
// thousands of requests a second, each allocating a few KiB, so with the
// runtime's default (a 4 MiB goal for a heap that small) it collects more
// than twenty times a second, and every cycle scans all the connections'
// stacks and shrinks them, to grow them again on the next requests. A
// 16 MiB floor makes that four times rarer; a heap whose live part is
// above 8 MiB is not affected (GOGC=100 already lets it double).
const heapFloor = 16 << 20

// runtimeHeapMinimum is the Go runtime's smallest heap goal at GOGC=100
// (defaultHeapMinimum in runtime/mgcpacer.go); it scales with GOGC.
const runtimeHeapMinimum = 4 << 20

// keepHeapFloor keeps the heap goal at least floor bytes by raising GOGC
// after each collection while the live heap is small, and lowering it back
// to 100 when the live heap grows. It does nothing when GOGC is set in the
// environment: the operator's choice wins. The soft memory limit
// (GOMEMLIMIT, setMemoryLimit) still bounds the heap either way. It returns
// a function that stops the adjustments.
func keepHeapFloor(logger *slog.Logger, floor uint64) (stop func()) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		logger.Debug("heap floor off: GOGC is set", slog.String("GOGC", v))
		return func() {}
	}
	var stopped atomic.Bool
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	adjust := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return // not reported by this runtime: leave GOGC alone
		}
		debug.SetGCPercent(gcPercentFor(sample[0].Value.Uint64(), floor))
	}
	adjust()
	afterEachGC(&stopped, adjust)
	return func() {
		stopped.Store(true)
		debug.SetGCPercent(100)
	}
}

// gcPercentFor returns the GOGC that gives a heap of live bytes a goal of at
// least floor, and never less than 100. The runtime's goal is the larger of
// live × (1 + GOGC/100) and runtimeHeapMinimum × GOGC/100, so the smaller of
// the two percentages that reach floor is enough; the larger one would
// overshoot it (at 1 MiB live, GOGC=1500 would give a 60 MiB goal).
func gcPercentFor(live, floor uint64) int {
	const base = 100
	if live >= floor/2 {
		return base
	}
	byMinimum := floor * 100 / runtimeHeapMinimum
	byLive := (floor - max(live, 1)) * 100 / max(live, 1)
	return max(base, int(min(byMinimum, byLive)))
}

// gcSentinel is allocated only to be collected: its finalizer runs once
// after each garbage collection. It holds a pointer so that it is never
// placed in the tiny allocator, whose blocks may keep it alive.
type gcSentinel struct{ _ *byte }

// afterEachGC runs f on the finalizer goroutine after every garbage
// collection, until stopped is set.
func afterEachGC(stopped *atomic.Bool, f func()) {
	var rearm func(*gcSentinel)
	rearm = func(*gcSentinel) {
		if stopped.Load() {
			return
		}
		f()
		runtime.SetFinalizer(new(gcSentinel), rearm)
	}
	runtime.SetFinalizer(new(gcSentinel), rearm)
}
