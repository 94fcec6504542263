package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// result is what a run measured: the cycles started in the measured window.
type result struct {
	System       string  `json:"system"`
	Clients      int     `json:"clients"`
	Cycles       int64   `json:"cycles"`
	Seconds      float64 `json:"seconds"`
	CyclesPerSec float64 `json:"cyclesPerSec"`
	P50Ms        float64 `json:"p50Ms"`
	P99Ms        float64 `json:"p99Ms"`
	MaxMs        float64 `json:"maxMs"`
	Errors       int64   `json:"errors"`
	FirstError   string  `json:"firstError,omitempty"`
}

// runLoad connects clients lockers (sessions and connections are set up
// before the clock starts), then runs each one's cycles back to back for
// warmup + duration. It emits "measure" when the measured window opens and
// "done" when every cycle started in it has ended; only those cycles count.
func runLoad(ctx context.Context, newLocker func(ctx context.Context, i int) (locker, error), clients int, warmup, duration time.Duration, out *events) (result, error) {
	lockers := make([]locker, 0, clients)
	closeAll := func() error {
		var errs []error
		for _, l := range lockers {
			errs = append(errs, l.close())
		}
		return errors.Join(errs...)
	}
	for i := range clients {
		l, err := newLocker(ctx, i)
		if err != nil {
			return result{}, errors.Join(err, closeAll())
		}
		lockers = append(lockers, l)
	}

	type record struct {
		latencies []time.Duration
		errors    int64
		firstErr  error
	}
	records := make([]record, clients)
	start := time.Now()
	from, end := start.Add(warmup), start.Add(warmup+duration)
	var opened sync.Once
	open := func() { opened.Do(func() { out.emit(event{Event: "measure"}) }) }
	timer := time.AfterFunc(warmup, open)
	var wg sync.WaitGroup
	for i, l := range lockers {
		rec := &records[i]
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				err := l.cycle(ctx)
				if t0.Before(from) {
					continue
				}
				rec.latencies = append(rec.latencies, time.Since(t0))
				if err != nil {
					rec.errors++
					if rec.firstErr == nil {
						rec.firstErr = err
					}
				}
			}
		})
	}
	wg.Wait()
	timer.Stop()
	open() // a run cut short before its window still says measure before done
	out.emit(event{Event: "done"})
	if err := closeAll(); err != nil {
		return result{}, err
	}
	if err := ctx.Err(); err != nil {
		return result{}, err
	}

	res := result{Clients: clients, Seconds: duration.Seconds()}
	var all []time.Duration
	for _, r := range records {
		all = append(all, r.latencies...)
		res.Errors += r.errors
		if r.firstErr != nil && res.FirstError == "" {
			res.FirstError = r.firstErr.Error()
		}
	}
	slices.Sort(all)
	res.Cycles = int64(len(all))
	res.CyclesPerSec = float64(res.Cycles) / duration.Seconds()
	res.P50Ms = ms(percentile(all, 0.50))
	res.P99Ms = ms(percentile(all, 0.99))
	if len(all) > 0 {
		res.MaxMs = ms(all[len(all)-1])
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile is the nearest-rank percentile q (0 < q <= 1) of sorted
// latencies, or 0 for none (the same rule as cmd/leasebench's).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted))+0.999999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}
