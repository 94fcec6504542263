package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo"
	"github.com/leaseapi/leaseapi/repo/postgres"
)

// acquireBatch makes one measured batch of acquires of jobIDs for owner:
// one latency, and one operation, grant, 5xx or error per item.
func (m *meter) acquireBatch(ctx context.Context, c client, jobIDs []string, owner string, tick *time.Time) {
	t0 := time.Now()
	rs, err := c.acquireBatch(ctx, jobIDs, owner, tick, benchTTL)
	defer waitRetryAfter(err)
	if t0.Before(m.from) {
		return
	}
	m.rec.latencies = append(m.rec.latencies, time.Since(t0))
	m.rec.batches++
	m.rec.batchItems += int64(len(jobIDs))
	m.rec.count(rs)
	m.firstErr.set(err)
}

// count adds the answers rs of a batch's items to w.
func (w *workerRecord) count(rs []result) {
	for _, r := range rs {
		switch r {
		case resultOK:
			w.grants++
		case resultUnavailable:
			w.status5xx++
			w.errors++
		case resultFailed:
			w.errors++
		}
	}
}

// herdJobIDs are the job ids of the herd of prefix, in the order every
// replica fires them.
func herdJobIDs(prefix string, jobs int) []string {
	ids := make([]string, jobs)
	for j := range ids {
		ids[j] = herdJobID(prefix, j)
	}
	return ids
}

// herdBatches is the herd through batches: replicas workers, each sending
// its jobs for the same tick as one POST /acquire (as many batches of
// leaseapi.MaxBatchItems as it takes), in the same job order. ops are the
// decisions, one per item; the latencies are the batches'.
func herdBatches(ctx context.Context, c client, prefix string, replicas, jobs int) measurement {
	var rec recorder
	fe := &firstError{}
	tick := time.Now().UTC().Truncate(time.Minute)
	ids := herdJobIDs(prefix, jobs)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for r := range replicas {
		m := &meter{rec: rec.worker(), from: start, firstErr: fe}
		owner := fmt.Sprintf("replica-%03d", r)
		wg.Go(func() {
			for from := 0; from < len(ids) && ctx.Err() == nil; from += leaseapi.MaxBatchItems {
				m.acquireBatch(ctx, c, ids[from:min(from+leaseapi.MaxBatchItems, len(ids))], owner, &tick)
			}
		})
	}
	wg.Wait()
	return measurement{summary: rec.summary(), elapsed: time.Since(start), firstErr: fe.err}
}

// batchItems is the size of the batches of the saturation and latency
// rows: the largest batch.
const batchItems = leaseapi.MaxBatchItems

// ranOnce has each of the herd's jobs of prefix run one tick, the minute
// before the herd's: granted to "seed" and released, on the store directly.
func (b *bench) ranOnce(ctx context.Context, prefix string, jobs int) error {
	return b.onFloor(ctx, func(c client) error { return ranOnce(ctx, c, prefix, jobs) })
}

// onFloor runs fn, the preparation of a row, on the store directly.
func (b *bench) onFloor(ctx context.Context, fn func(c client) error) error {
	store, err := openFloor(ctx, postgres.Config{DSN: b.db.dsn, MaxOpenConns: postgresMaxOpenConns}, false)
	if err != nil {
		return err
	}
	return errors.Join(fn(storeClient{store: store}), store.Close())
}

// ranOnce has each of the herd's jobs of prefix run the tick before the
// herd's, through c, with as many workers as the pool has connections.
func ranOnce(ctx context.Context, c client, prefix string, jobs int) error {
	tick := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	next := make(chan int)
	errs := make(chan error, postgresMaxOpenConns)
	for range postgresMaxOpenConns {
		go func() {
			var first error
			for j := range next {
				job := herdJobID(prefix, j)
				token, r, err := c.acquire(ctx, job, "seed", &tick, benchTTL)
				if r == resultOK {
					r, err = c.release(ctx, job, "seed", token)
				}
				if r != resultOK && first == nil {
					first = fmt.Errorf("the tick before the herd, %s: %v", job, err)
				}
			}
			errs <- first
		}()
	}
	for j := range jobs {
		next <- j
	}
	close(next)
	var all error
	for range postgresMaxOpenConns {
		all = errors.Join(all, <-errs)
	}
	return all
}

// batchClients are the clients of the saturation row: enough to keep the
// cores busy, few enough that a batch's queueing stays well inside the
// server's 1 s request deadline.
const batchClients = 4

// holdAll has the owner "holder" acquire every job of jobIDs for tick,
// trying again the items answered otherwise than granted or held; on the
// store directly (onFloor), so that the row measures only the batches.
func holdAll(ctx context.Context, c client, jobIDs []string, tick *time.Time) error {
	todo := jobIDs
	for range 5 {
		rs, err := c.acquireBatch(ctx, todo, "holder", tick, benchTTL)
		var again []string
		for i, r := range rs {
			if r != resultOK && r != resultConflict {
				again = append(again, todo[i])
			}
		}
		if len(again) == 0 {
			return nil
		}
		waitRetryAfter(err)
		todo = again
	}
	return fmt.Errorf("the holder's batch: %d of %d jobs still not held", len(todo), len(jobIDs))
}

// batchOpenLoop starts one batch of the acquires of jobIDs every
// 1/batchesPerSec for duration, each from an owner of its own, whether or
// not earlier batches have answered, and records each batch's latency from
// its scheduled start (no coordinated omission).
func batchOpenLoop(ctx context.Context, c client, jobIDs []string, tick *time.Time, batchesPerSec float64, duration time.Duration) measurement {
	var (
		mu  sync.Mutex
		rec recorder
		fe  = &firstError{}
		wr  = rec.worker()
		all sync.WaitGroup
	)
	interval := time.Duration(float64(time.Second) / batchesPerSec)
	ctx, cancel := context.WithTimeout(ctx, duration+30*time.Second)
	defer cancel()
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= duration || ctx.Err() != nil {
			break
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		all.Go(func() {
			rs, err := c.acquireBatch(ctx, jobIDs, fmt.Sprintf("open-%d", i), tick, benchTTL)
			lat := time.Since(at)
			mu.Lock()
			wr.latencies = append(wr.latencies, lat)
			wr.batches++
			wr.batchItems += int64(len(jobIDs))
			wr.count(rs)
			mu.Unlock()
			fe.set(err)
		})
	}
	all.Wait()
	return measurement{summary: rec.summary(), elapsed: duration, firstErr: fe.err}
}

// batches measures the batches: the herd through them (floor and HTTP),
// next to the herd through single acquires over HTTP, both on jobs that
// ran the tick before, then the rate of 1,000-item batches at saturation
// and their latency at half of it.
func (b *bench) batches(ctx context.Context) error {
	o := b.opts
	// Both herds fire the tick after one their jobs ran (a grant of the
	// previous minute, released): the steady state, where each job's
	// winner takes the grant path of a job with a row.
	b.logf("herd-next-tick (single acquires): http, %d replicas × %d jobs", o.herdReplicas, o.herdJobs)
	// The tick before is run first, so that the rows' database counters
	// are the herd's alone.
	const prefix = "herd-next-tick-http"
	if err := b.ranOnce(ctx, prefix, o.herdJobs); err != nil {
		return err
	}
	hr, err := b.http(ctx, "herd-next-tick", "fast", o.herdReplicas, func(c client) (measurement, error) {
		r := herd(ctx, c, prefix, o.herdReplicas, o.herdJobs, herdSameOrder)
		return r, b.checkHerdTicks(ctx, "herd-next-tick http", prefix, o.herdJobs, 2, r)
	})
	if err != nil {
		return err
	}
	b.add(newRow("herd-next-tick", "http", "fast", o.herdReplicas, hr.measurement).herd().withProc(hr.proc))
	body := func(side string) func(c client) (measurement, error) {
		return func(c client) (measurement, error) {
			if sc, ok := c.(storeClient); ok {
				// The floor of a batch is the store as leaseapi serves it:
				// a batch relies on the coalescer to answer the items of a
				// job that another batch is deciding.
				sc.store = repo.CoalesceAcquires(sc.store, leaseapi.DefaultMaxTickAhead)
				c = sc
			}
			prefix := "herd-batch-" + side
			r := herdBatches(ctx, c, prefix, o.herdReplicas, o.herdJobs)
			return r, b.checkHerdTicks(ctx, "herd-batch "+side, prefix, o.herdJobs, 2, r)
		}
	}
	for _, side := range []string{"floor", "http"} {
		if err := b.ranOnce(ctx, "herd-batch-"+side, o.herdJobs); err != nil {
			return err
		}
	}
	b.logf("herd-batch: floor, %d replicas × one batch of %d jobs", o.herdReplicas, o.herdJobs)
	fr, err := b.floor(ctx, false, body("floor"))
	if err != nil {
		return err
	}
	floor := b.add(newRow("herd-batch", "floor", "fast", o.herdReplicas, fr).herd())
	b.logf("herd-batch: http")
	hr, err = b.http(ctx, "herd-batch", "fast", o.herdReplicas, body("http"))
	if err != nil {
		return err
	}
	b.add(newRow("herd-batch", "http", "fast", o.herdReplicas, hr.measurement).herd().withProc(hr.proc).vs(floor))
	if err := b.db.vacuum(ctx); err != nil {
		return err
	}

	// Saturation: the herd's typical batch, a replica that loses all its
	// items to the holders (409 lease_held), after one unmeasured batch
	// of the holder that grants the jobs.
	ids := herdJobIDs("batch-sat", batchItems)
	tick := time.Now().UTC().Truncate(time.Minute)
	b.logf("batch-%d: http, %d clients in a closed loop", batchItems, batchClients)
	if err := b.onFloor(ctx, func(c client) error { return holdAll(ctx, c, ids, &tick) }); err != nil {
		return err
	}
	sr, err := b.http(ctx, "batch-sat", "fast", batchClients, func(c client) (measurement, error) {
		return closedLoop(ctx, batchClients, o.warmup, o.duration, func(ctx context.Context, w, i int, m *meter) {
			m.acquireBatch(ctx, c, ids, fmt.Sprintf("client-%d", w), &tick)
		}), nil
	})
	if err != nil {
		return err
	}
	sat := newRow(fmt.Sprintf("batch-%d", batchItems), "http", "fast", batchClients, sr.measurement).withProc(sr.proc)
	sat.Note = fmt.Sprintf("closed loop of %d-item batches on jobs another owner holds (every item 409 lease_held); ops are items, latencies batches", batchItems)
	b.add(sat)
	batchesPerSec := sat.OpsPerSec / batchItems
	if batchesPerSec <= 0 {
		return errors.New("no batch saturation measured")
	}
	rate := batchesPerSec / 2
	b.logf("batch-%d@half-saturation: open loop at %.1f batches/s (half of %.1f), %s", batchItems, rate, batchesPerSec, o.openDuration)
	lr, err := b.http(ctx, "batch-latency", "fast", 256, func(c client) (measurement, error) {
		return batchOpenLoop(ctx, c, ids, &tick, rate, o.openDuration), nil
	})
	if err != nil {
		return err
	}
	row := newRow(fmt.Sprintf("batch-%d@half-saturation", batchItems), "http", "fast", 0, lr.measurement).withProc(lr.proc)
	row.Note = fmt.Sprintf("open loop, %.1f batches of %d/s offered = half of the %.1f batches/s of batch-%d; latency of each batch from its scheduled start", rate, batchItems, batchesPerSec, batchItems)
	b.add(row)
	return nil
}
