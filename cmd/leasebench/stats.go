package main

import (
	"slices"
	"sync"
	"time"
)

// recorder collects the latencies of one measured run. Each worker has its
// own slice, so recording takes no lock; merge joins them at the end.
type recorder struct {
	mu      sync.Mutex
	workers []*workerRecord
}

// workerRecord is one worker's measurements.
type workerRecord struct {
	latencies []time.Duration
	errors    int64 // answers the scenario did not expect (transport errors, 4xx/5xx it cannot explain)
	status5xx int64
	grants    int64
	// batches of the latencies were batch calls, of batchItems operations
	// in all: a batch is one latency and as many operations as its items.
	batches, batchItems int64
}

func (r *recorder) worker() *workerRecord {
	w := &workerRecord{latencies: make([]time.Duration, 0, 1024)}
	r.mu.Lock()
	r.workers = append(r.workers, w)
	r.mu.Unlock()
	return w
}

// summary is what a run reports about its operations.
type summary struct {
	ops       int64
	errors    int64
	status5xx int64
	grants    int64
	p50, p99  time.Duration
	max       time.Duration
}

func (r *recorder) summary() summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s summary
	var all []time.Duration
	var batches, batchItems int64
	for _, w := range r.workers {
		all = append(all, w.latencies...)
		batches += w.batches
		batchItems += w.batchItems
		s.errors += w.errors
		s.status5xx += w.status5xx
		s.grants += w.grants
	}
	s.ops = int64(len(all)) - batches + batchItems
	slices.Sort(all)
	s.p50 = percentile(all, 0.50)
	s.p99 = percentile(all, 0.99)
	if len(all) > 0 {
		s.max = all[len(all)-1]
	}
	return s
}

// percentile is the nearest-rank percentile q (0 < q <= 1) of sorted
// latencies, or 0 for none.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted))+0.999999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}
