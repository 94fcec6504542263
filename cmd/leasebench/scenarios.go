package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// meter records the operations of one worker that start inside the
// measured window.
type meter struct {
	rec      *workerRecord
	from     time.Time
	firstErr *firstError
}

// firstError keeps the first unexpected error of a run, for the report.
type firstError struct {
	once sync.Once
	err  error
}

func (f *firstError) set(err error) {
	if err != nil {
		f.once.Do(func() { f.err = err })
	}
}

// observe records an operation that started at start and answered r. An
// answer that asked to retry later (503 with Retry-After) is then waited
// out, as the API asks of clients (Retry-After), outside the operation's latency.
func (m *meter) observe(start time.Time, r result, err error) {
	defer waitRetryAfter(err)
	if start.Before(m.from) {
		return
	}
	m.rec.latencies = append(m.rec.latencies, time.Since(start))
	switch r {
	case resultUnavailable:
		m.rec.status5xx++
		m.rec.errors++
		m.firstErr.set(err)
	case resultFailed:
		m.rec.errors++
		m.firstErr.set(err)
	}
}

// acquire makes one measured acquire of job for owner, counts a grant made
// inside the measured window, and returns the token and whether it was
// granted.
func (m *meter) acquire(ctx context.Context, c client, job, owner string, tick *time.Time) (int64, bool) {
	t0 := time.Now()
	token, r, err := c.acquire(ctx, job, owner, tick, benchTTL)
	m.observe(t0, r, err)
	if r != resultOK {
		return 0, false
	}
	if !t0.Before(m.from) {
		m.rec.grants++
	}
	return token, true
}

// measurement is the outcome of one measured run.
type measurement struct {
	summary
	elapsed  time.Duration
	firstErr error
	// dbCalls and xids are the database's transactions and the cluster's
	// assigned transaction ids during the run (see dbCounters); -1 if not read.
	dbCalls, xids int64
	// sessions are the database sessions opened during the run: a pool
	// that keeps its connections opens none.
	sessions int64
}

func (r measurement) opsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ops) / r.elapsed.Seconds()
}

// closedLoop runs workers that each call body in a loop for warmup +
// duration; only operations started after the warmup are measured.
func closedLoop(ctx context.Context, workers int, warmup, duration time.Duration, body func(ctx context.Context, w, i int, m *meter)) measurement {
	var rec recorder
	fe := &firstError{}
	start := time.Now()
	from := start.Add(warmup)
	end := from.Add(duration)
	ctx, cancel := context.WithDeadline(ctx, end.Add(5*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		m := &meter{rec: rec.worker(), from: from, firstErr: fe}
		wg.Go(func() {
			for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
				body(ctx, w, i, m)
			}
		})
	}
	wg.Wait()
	return measurement{summary: rec.summary(), elapsed: end.Sub(from), firstErr: fe.err}
}

// benchTTL is the TTL of the benchmark's grants: longer than any run, so
// that no lease expires while a scenario counts its grants.
const benchTTL = 10 * time.Minute

// cycleBody acquires, heartbeats and releases the worker's own job, one
// new tick per cycle: three operations on a job nobody else touches.
func cycleBody(c client, prefix string) func(ctx context.Context, w, i int, m *meter) {
	base := time.Now().UTC().Truncate(time.Minute).Add(-365 * 24 * time.Hour) // ticks of the past: a tick ahead of the clock is refused
	return func(ctx context.Context, w, i int, m *meter) {
		job := cycleJobID(prefix, w)
		owner := fmt.Sprintf("worker-%d", w)
		tick := base.Add(time.Duration(i) * time.Second)
		token, granted := m.acquire(ctx, c, job, owner, &tick)
		if !granted {
			return
		}
		t1 := time.Now()
		r, err := c.heartbeat(ctx, job, owner, token)
		m.observe(t1, r, err)
		t2 := time.Now()
		r, err = c.release(ctx, job, owner, token)
		m.observe(t2, r, err)
	}
}

// cycleJobID is the job of worker w of the cycle of prefix.
func cycleJobID(prefix string, w int) string {
	return fmt.Sprintf("%s-%d", prefix, w)
}

// contendedJobs is how few jobs the contended scenario's owners share.
const contendedJobs = 4

// contendedBody has every worker (an owner of its own) acquire one of a few
// shared jobs, and release it at once when granted: most acquires lose to a
// holder, and the lease changes hands all the time.
func contendedBody(c client, prefix string) func(ctx context.Context, w, i int, m *meter) {
	return func(ctx context.Context, w, i int, m *meter) {
		job := fmt.Sprintf("%s-%d", prefix, (w+i)%contendedJobs)
		owner := fmt.Sprintf("owner-%d", w)
		token, granted := m.acquire(ctx, c, job, owner, nil)
		if !granted {
			return
		}
		t1 := time.Now()
		r, err := c.release(ctx, job, owner, token)
		m.observe(t1, r, err)
	}
}

// herdOrder is the order in which each replica fires its jobs.
type herdOrder string

const (
	// herdSameOrder: every replica fires the jobs in the same order, as
	// identical schedulers that start their due jobs in schedule order do.
	herdSameOrder herdOrder = "same"
	// herdShuffled: every replica fires the jobs in its own random order,
	// so few acquires of one job are in flight at once.
	herdShuffled herdOrder = "shuffled"
)

// herd has replicas workers, each acquiring every one of jobs jobs for the
// same tick as fast as it can: replicas × jobs acquires, and exactly jobs
// of them must be granted. It is a fixed amount of work; elapsed is the
// time until the last answer.
func herd(ctx context.Context, c client, prefix string, replicas, jobs int, order herdOrder) measurement {
	var rec recorder
	fe := &firstError{}
	tick := time.Now().UTC().Truncate(time.Minute)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for r := range replicas {
		m := &meter{rec: rec.worker(), from: start, firstErr: fe}
		seq := make([]int, jobs)
		for j := range seq {
			seq[j] = j
		}
		if order == herdShuffled {
			rng := rand.New(rand.NewPCG(uint64(r), 42))
			rng.Shuffle(len(seq), func(a, b int) { seq[a], seq[b] = seq[b], seq[a] })
		}
		owner := fmt.Sprintf("replica-%03d", r)
		wg.Go(func() {
			for _, j := range seq {
				if ctx.Err() != nil {
					return
				}
				m.acquire(ctx, c, herdJobID(prefix, j), owner, &tick)
			}
		})
	}
	wg.Wait()
	return measurement{summary: rec.summary(), elapsed: time.Since(start), firstErr: fe.err}
}

// herdJobID is the job id of job j of the herd of prefix.
func herdJobID(prefix string, j int) string {
	return fmt.Sprintf("%s-%04d", prefix, j)
}

// listBody reads the same page again and again: the first page, or the
// page after the job id deepAfter.
func listBody(c client, after string, limit int) func(ctx context.Context, w, i int, m *meter) {
	return func(ctx context.Context, w, i int, m *meter) {
		t0 := time.Now()
		_, r, err := c.list(ctx, after, limit, false)
		m.observe(t0, r, err)
	}
}

// openLoop starts one acquire → heartbeat → release cycle every
// 1/cyclesPerSec for duration, each on a new job, whether or not earlier
// cycles have finished, and records the acquire latencies only, measured
// from the cycle's scheduled start (so a stalled server cannot hide its
// queue: no coordinated omission).
func openLoop(ctx context.Context, c client, prefix string, cyclesPerSec float64, duration time.Duration) measurement {
	var (
		mu  sync.Mutex
		rec recorder
		fe  = &firstError{}
		wr  = rec.worker()
		all sync.WaitGroup
		seq atomic.Int64
	)
	tick := time.Now().UTC().Truncate(time.Minute)
	interval := time.Duration(float64(time.Second) / cyclesPerSec)
	ctx, cancel := context.WithTimeout(ctx, duration+30*time.Second)
	defer cancel()
	start := time.Now()
	note := func(r result, err error) {
		switch r {
		case resultUnavailable:
			wr.status5xx++
			wr.errors++
			fe.set(err)
		case resultFailed:
			wr.errors++
			fe.set(err)
		}
	}
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= duration || ctx.Err() != nil {
			break
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		all.Go(func() {
			n := seq.Add(1)
			job := fmt.Sprintf("%s-%d", prefix, n)
			owner := fmt.Sprintf("worker-%d", n)
			token, r, err := c.acquire(ctx, job, owner, &tick, benchTTL)
			lat := time.Since(at)
			mu.Lock()
			wr.latencies = append(wr.latencies, lat)
			note(r, err)
			if r == resultOK {
				wr.grants++
			}
			mu.Unlock()
			if r != resultOK {
				return
			}
			r1, err1 := c.heartbeat(ctx, job, owner, token)
			r2, err2 := c.release(ctx, job, owner, token)
			mu.Lock()
			note(r1, err1)
			note(r2, err2)
			mu.Unlock()
		})
	}
	all.Wait()
	return measurement{summary: rec.summary(), elapsed: duration, firstErr: fe.err}
}

// rssLoad is the RSS check's load: clients workers over their own
// keep-alive connections; one in ten pages through GET /leases (limit 100,
// one page per call, following nextCursor and starting over at the end),
// the others cycle on jobs of their own.
func rssLoad(ctx context.Context, c client, clients int, warmup, duration time.Duration) measurement {
	cycle := cycleBody(c, "rss")
	after := make([]string, clients) // worker w's cursor; only w touches after[w]
	return closedLoop(ctx, clients, warmup, duration, func(ctx context.Context, w, i int, m *meter) {
		if w%10 != 0 {
			cycle(ctx, w, i, m)
			return
		}
		t0 := time.Now()
		next, r, err := c.list(ctx, after[w], 100, true)
		m.observe(t0, r, err)
		after[w] = next
	})
}
