package repo

import (
	"context"
	"fmt"

	"github.com/leaseapi/leaseapi"
)

// LimitCalls returns store with at most n lease calls in flight at once
// (Acquire, Heartbeat, their batches, Release, Revoke, Get, List, Runs, RecentRuns, Pause,
// Resume, Repair, ForgetSchedule, Stats). A call beyond the
// limit is refused at once with leaseapi.ErrOverloaded, before it reaches
// the database, so an overloaded instance sheds load with a fast 503
// instead of queueing requests for a pool of a few connections until their
// deadlines pass: each queued request holds memory and makes the ones
// behind it slower. Ready and PruneRuns are not limited: a readiness probe
// must not fail because of load, and the pruner runs one call at a time.
func LimitCalls(store leaseapi.Store, n int) leaseapi.Store {
	if n < 1 {
		panic(fmt.Sprintf("repo.LimitCalls: limit %d must be at least 1", n))
	}
	return &callLimiter{Store: store, slots: make(chan struct{}, n)}
}

type callLimiter struct {
	leaseapi.Store
	slots chan struct{} // one element per call in flight
}

// limited runs fn in a free slot, or refuses it when there is none.
func limited[T any](l *callLimiter, fn func() (T, error)) (T, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		var zero T
		return zero, fmt.Errorf("%d store calls in flight: %w", cap(l.slots), leaseapi.ErrOverloaded)
	}
	defer func() { <-l.slots }()
	return fn()
}

func (l *callLimiter) Acquire(ctx context.Context, p *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	return limited(l, func() (leaseapi.Lease, error) { return l.Store.Acquire(ctx, p) })
}

func (l *callLimiter) Heartbeat(ctx context.Context, p *leaseapi.HeartbeatParams) (leaseapi.Lease, error) {
	return limited(l, func() (leaseapi.Lease, error) { return l.Store.Heartbeat(ctx, p) })
}

func (l *callLimiter) Release(ctx context.Context, p *leaseapi.ReleaseParams) (leaseapi.Lease, error) {
	return limited(l, func() (leaseapi.Lease, error) { return l.Store.Release(ctx, p) })
}

func (l *callLimiter) Revoke(ctx context.Context, p *leaseapi.RevokeParams) (leaseapi.Lease, error) {
	return limited(l, func() (leaseapi.Lease, error) { return l.Store.Revoke(ctx, p) })
}

func (l *callLimiter) Get(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	return limited(l, func() (leaseapi.Lease, error) { return l.Store.Get(ctx, jobID) })
}

func (l *callLimiter) List(ctx context.Context, p *leaseapi.ListParams) (leaseapi.LeasePage, error) {
	return limited(l, func() (leaseapi.LeasePage, error) { return l.Store.List(ctx, p) })
}

func (l *callLimiter) Runs(ctx context.Context, jobID string, limit int) ([]leaseapi.Run, error) {
	return limited(l, func() ([]leaseapi.Run, error) { return l.Store.Runs(ctx, jobID, limit) })
}

func (l *callLimiter) Pause(ctx context.Context, p *leaseapi.PauseParams) (leaseapi.Lease, error) {
	return limited(l, func() (leaseapi.Lease, error) { return l.Store.Pause(ctx, p) })
}

func (l *callLimiter) Resume(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	return limited(l, func() (leaseapi.Lease, error) { return l.Store.Resume(ctx, jobID) })
}

func (l *callLimiter) Repair(ctx context.Context, p *leaseapi.RepairParams) (leaseapi.Lease, error) {
	return limited(l, func() (leaseapi.Lease, error) { return l.Store.Repair(ctx, p) })
}

func (l *callLimiter) ForgetSchedule(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	return limited(l, func() (leaseapi.Lease, error) { return l.Store.ForgetSchedule(ctx, jobID) })
}

func (l *callLimiter) Stats(ctx context.Context, prefix string) (leaseapi.Stats, error) {
	return limited(l, func() (leaseapi.Stats, error) { return l.Store.Stats(ctx, prefix) })
}

func (l *callLimiter) RecentRuns(ctx context.Context, p *leaseapi.RecentRunsParams) (leaseapi.RunPage, error) {
	return limited(l, func() (leaseapi.RunPage, error) { return l.Store.RecentRuns(ctx, p) })
}

// AcquireBatch takes one slot for the whole batch; without one, every
// call of the batch is refused.
func (l *callLimiter) AcquireBatch(ctx context.Context, ps []*leaseapi.AcquireParams) []leaseapi.Answer {
	return limitedBatch(l, len(ps), func() []leaseapi.Answer { return l.Store.AcquireBatch(ctx, ps) })
}

// HeartbeatBatch takes one slot for the whole batch, as AcquireBatch.
func (l *callLimiter) HeartbeatBatch(ctx context.Context, ps []*leaseapi.HeartbeatParams) []leaseapi.Answer {
	return limitedBatch(l, len(ps), func() []leaseapi.Answer { return l.Store.HeartbeatBatch(ctx, ps) })
}

// limitedBatch runs fn, the batch of n calls, in a free slot, or refuses
// each of its calls when there is none.
func limitedBatch(l *callLimiter, n int, fn func() []leaseapi.Answer) []leaseapi.Answer {
	out, err := limited(l, func() ([]leaseapi.Answer, error) { return fn(), nil })
	if err != nil {
		out = make([]leaseapi.Answer, n)
		for i := range out {
			out[i].Err = err
		}
	}
	return out
}
