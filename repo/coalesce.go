package repo

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/leaseapi/leaseapi"
)

// CoalesceAcquires returns store with concurrent acquires of one job, in this
// process, decided in batches: while one acquire of a job is at the
// database, the acquires of that job that arrive queue up; when it returns,
// the first of them makes the next call and its result decides for the
// rest. Every follower arrived before the call it follows started and waits
// until it ends, so the decision is made inside each follower's request, as
// if its own call had run at that instant; a follower the result cannot
// decide for (the holder itself, which may renew) makes its own call in the
// next batch. The other methods pass through.
//
// This turns the tick herd (every replica acquiring every job at the same
// second) into about one database call per job per batch.
func CoalesceAcquires(store leaseapi.Store) leaseapi.Store {
	return &coalescer{Store: store, queues: make(map[string]*acquireQueue)}
}

type coalescer struct {
	leaseapi.Store
	mu     sync.Mutex
	queues map[string]*acquireQueue // by job id; present while a call is at the database
}

// acquireQueue holds the acquires of one job that wait for the next call.
type acquireQueue struct {
	waiting []*acquireWaiter
}

type acquireWaiter struct {
	params *leaseapi.AcquireParams
	done   chan acquireOutcome // buffered: the sender never blocks
}

// acquireOutcome is either a decision or the order to lead the next call.
type acquireOutcome struct {
	lease     leaseapi.Lease
	err       error
	lead      bool
	followers []*acquireWaiter
}

func (c *coalescer) Acquire(ctx context.Context, p *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	// Invalid input is refused here, never queued behind a valid leader
	// whose decision would answer it.
	if err := p.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	c.mu.Lock()
	q, busy := c.queues[p.JobID]
	if !busy {
		c.queues[p.JobID] = &acquireQueue{}
		c.mu.Unlock()
		return c.lead(ctx, p, nil)
	}
	w := &acquireWaiter{params: p, done: make(chan acquireOutcome, 1)}
	q.waiting = append(q.waiting, w)
	c.mu.Unlock()

	select {
	case o := <-w.done:
		if o.lead {
			return c.lead(ctx, p, o.followers)
		}
		return o.lease, o.err
	case <-ctx.Done():
		c.mu.Lock()
		withdrawn := q.remove(w)
		c.mu.Unlock()
		if !withdrawn {
			// An outcome is on its way. A decision is returned as is; an
			// order to lead is passed on, since this call can no longer run.
			if o := <-w.done; !o.lead {
				return o.lease, o.err
			} else {
				c.next(p.JobID, o.followers)
			}
		}
		return leaseapi.Lease{}, fmt.Errorf("acquire %q: %w: %w", p.JobID, leaseapi.ErrUnavailable, ctx.Err())
	}
}

// lead makes the database call for p, decides for the followers it can, and
// hands the queue on.
func (c *coalescer) lead(ctx context.Context, p *leaseapi.AcquireParams, followers []*acquireWaiter) (leaseapi.Lease, error) {
	lease, err := c.Store.Acquire(ctx, p)
	var undecided []*acquireWaiter
	for _, f := range followers {
		if ctx.Err() != nil {
			// The leader's own deadline ended its call; the followers have
			// their own and get a call of their own.
			undecided = append(undecided, f)
		} else if o, ok := decideFollower(f.params, lease, err); ok {
			f.done <- o
		} else {
			undecided = append(undecided, f)
		}
	}
	c.next(p.JobID, undecided)
	return lease, err
}

// next starts the job's next call with first, then the acquires that
// queued meanwhile, or forgets the job when nobody waits.
func (c *coalescer) next(jobID string, first []*acquireWaiter) {
	c.mu.Lock()
	q := c.queues[jobID]
	batch := append(first, q.waiting...)
	q.waiting = nil
	if len(batch) == 0 {
		delete(c.queues, jobID)
	}
	c.mu.Unlock()
	if len(batch) > 0 {
		batch[0].done <- acquireOutcome{lead: true, followers: batch[1:]}
	}
}

func (q *acquireQueue) remove(w *acquireWaiter) bool {
	for i, x := range q.waiting {
		if x == w {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// decideFollower answers follower f from the leader's result, or returns
// false when only f's own call can decide.
func decideFollower(f *leaseapi.AcquireParams, lease leaseapi.Lease, err error) (acquireOutcome, bool) {
	var conflict *leaseapi.ConflictError
	switch {
	case err == nil:
		// The leader holds the lease now. Its holder needs a call of its
		// own (it may renew: the store resolves the tick it names against
		// the schedule); everyone else is refused by it.
		if lease.Owner == f.Owner {
			return acquireOutcome{}, false
		}
	case errors.As(err, &conflict):
		lease = conflict.Lease
		if !tickDone(f, lease) && (lease.State != leaseapi.StateHeld || lease.Owner == f.Owner) {
			return acquireOutcome{}, false
		}
	default:
		// The call failed (unreachable database, deadline): nothing was
		// decided for the followers, and nothing was attempted for them.
		return acquireOutcome{err: fmt.Errorf("acquire %q: %w: %w", f.JobID, leaseapi.ErrUnavailable, err)}, true
	}
	return acquireOutcome{err: refusal(f, lease)}, true
}

func tickDone(p *leaseapi.AcquireParams, l leaseapi.Lease) bool {
	return p.Tick != nil && l.LastCompletedTick != nil && !p.Tick.After(*l.LastCompletedTick)
}
