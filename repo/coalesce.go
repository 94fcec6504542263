package repo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
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
//
// Like every wrapper of a store, it does not validate: params are
// validated where they are built (the handlers call Validate) and by the
// store at its entry. A follower is answered from the leader's result by
// the rules of decide.Acquire, which assume valid params; maxTickAhead is
// the store's (its MaxTickAhead; 0 means leaseapi.DefaultMaxTickAhead), so
// that a follower's tick ahead of the clock is refused as the store would
// refuse it.
func CoalesceAcquires(store leaseapi.Store, maxTickAhead time.Duration) leaseapi.Store {
	if maxTickAhead <= 0 {
		maxTickAhead = leaseapi.DefaultMaxTickAhead
	}
	return &coalescer{Store: store, maxAhead: maxTickAhead, queues: make(map[string]*acquireQueue)}
}

type coalescer struct {
	leaseapi.Store
	maxAhead time.Duration
	mu       sync.Mutex
	queues   map[string]*acquireQueue // by job id; present while a call is at the database
}

// acquireQueue holds the acquires of one job that wait for the next call.
type acquireQueue struct {
	waiting []*acquireWaiter
}

type acquireWaiter struct {
	params *leaseapi.AcquireParams
	queue  *acquireQueue       // the queue it waits in
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
	c.mu.Lock()
	q, busy := c.queues[p.JobID]
	if !busy {
		c.queues[p.JobID] = &acquireQueue{}
		c.mu.Unlock()
		return c.lead(ctx, p, nil)
	}
	w := &acquireWaiter{params: p, queue: q, done: make(chan acquireOutcome, 1)}
	q.waiting = append(q.waiting, w)
	c.mu.Unlock()
	return c.await(ctx, w)
}

// AcquireBatch decides a batch of acquires with the queues of single ones:
// the acquires of jobs without a call at the database go to the store as
// one batch, each leading its job's queue as a single call would; the
// others wait behind their job's call as followers. A follower ordered to
// lead makes its call at once, alone, so that no two batches can wait for
// each other's orders.
func (c *coalescer) AcquireBatch(ctx context.Context, ps []*leaseapi.AcquireParams) []leaseapi.Answer {
	out := make([]leaseapi.Answer, len(ps))
	var leads []*leaseapi.AcquireParams
	var led []int                              // indexes of ps led by this batch
	waiters := make([]*acquireWaiter, len(ps)) // by index of ps; nil when led
	c.mu.Lock()
	for i, p := range ps {
		if q, busy := c.queues[p.JobID]; busy {
			waiters[i] = &acquireWaiter{params: p, queue: q, done: make(chan acquireOutcome, 1)}
			q.waiting = append(q.waiting, waiters[i])
			continue
		}
		c.queues[p.JobID] = &acquireQueue{}
		leads, led = append(leads, p), append(led, i)
	}
	c.mu.Unlock()
	if len(leads) > 0 {
		for k, a := range c.Store.AcquireBatch(ctx, leads) {
			out[led[k]] = a
			c.handOn(ctx, leads[k], nil, a.Lease, a.Err)
		}
	}
	// The followers ordered to lead make their calls together, as batches
	// of the orders at hand, each on a goroutine of its own: never held
	// back while this batch waits for another order (so that no two
	// batches wait for each other), nor made one round trip after another.
	var wg sync.WaitGroup
	var pending []int // indexes of ps ordered to lead, their calls not yet made
	followers := make([][]*acquireWaiter, len(ps))
	flush := func() {
		if len(pending) == 0 {
			return
		}
		idx := pending
		pending = nil
		wg.Go(func() {
			batch := make([]*leaseapi.AcquireParams, len(idx))
			for k, i := range idx {
				batch[k] = ps[i]
			}
			for k, a := range c.Store.AcquireBatch(ctx, batch) {
				out[idx[k]] = a
				c.handOn(ctx, batch[k], followers[idx[k]], a.Lease, a.Err)
			}
		})
	}
	for i, w := range waiters {
		if w == nil {
			continue
		}
		var o acquireOutcome
		var err error
		select {
		case o = <-w.done:
		default:
			flush()
			o, err = c.order(ctx, w)
		}
		switch {
		case err != nil:
			out[i].Err = err
		case o.lead:
			pending, followers[i] = append(pending, i), o.followers
		default:
			out[i].Lease, out[i].Err = o.lease, o.err
		}
	}
	flush()
	wg.Wait()
	return out
}

// await returns the answer of the follower w: decided by the call it
// followed, or by its own call when ordered to lead.
func (c *coalescer) await(ctx context.Context, w *acquireWaiter) (leaseapi.Lease, error) {
	o, err := c.order(ctx, w)
	switch {
	case err != nil:
		return leaseapi.Lease{}, err
	case o.lead:
		return c.lead(ctx, w.params, o.followers)
	}
	return o.lease, o.err
}

// order waits for the outcome of the follower w: a decision, or an order
// to lead. At the end of ctx, w is withdrawn (an order to lead that came
// meanwhile is passed on) and the error says so.
func (c *coalescer) order(ctx context.Context, w *acquireWaiter) (acquireOutcome, error) {
	p := w.params
	select {
	case o := <-w.done:
		return o, nil
	case <-ctx.Done():
		c.mu.Lock()
		withdrawn := w.queue.remove(w)
		c.mu.Unlock()
		if !withdrawn {
			// An outcome is on its way. A decision is returned as is; an
			// order to lead is passed on, since this call can no longer run.
			if o := <-w.done; !o.lead {
				return o, nil
			} else {
				c.next(p.JobID, o.followers)
			}
		}
		return acquireOutcome{}, fmt.Errorf("acquire %q: %w: %w", p.JobID, leaseapi.ErrUnavailable, ctx.Err())
	}
}

// lead makes the database call for p, decides for the followers it can, and
// hands the queue on.
func (c *coalescer) lead(ctx context.Context, p *leaseapi.AcquireParams, followers []*acquireWaiter) (leaseapi.Lease, error) {
	lease, err := c.Store.Acquire(ctx, p)
	c.handOn(ctx, p, followers, lease, err)
	return lease, err
}

// handOn decides for the followers of p's call, which returned lease, err,
// what that result decides, and hands the job's queue on.
func (c *coalescer) handOn(ctx context.Context, p *leaseapi.AcquireParams, followers []*acquireWaiter, lease leaseapi.Lease, err error) {
	var undecided []*acquireWaiter
	for _, f := range followers {
		if ctx.Err() != nil {
			// The leader's own deadline ended its call; the followers have
			// their own and get a call of their own.
			undecided = append(undecided, f)
		} else if o, ok := decideFollower(f.params, lease, err, c.maxAhead); ok {
			f.done <- o
		} else {
			undecided = append(undecided, f)
		}
	}
	c.next(p.JobID, undecided)
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
// false when only f's own call can decide: the lease the leader's call
// left (granted to the leader, or the one it was refused by) decides f as
// it would decide f's own call at that instant (decide.Acquire), with f's
// tick snapped as its call would have snapped it then (decide.ResolveTick
// with the schedule the lease shows, unless f sends one), unless f would
// renew or be granted, which takes a call of its own. A NearestTick
// follower's tick is picked with the store's clock, which only its call
// reads: it is refused only by what refuses any tick (a pause, a lease held
// by another), and makes its own call when there is no schedule to pick
// from (the store answers it as invalid).
//
// A group_full refusal decides as a conflict does with the lease it
// carries; what decide.Acquire does not refuse makes its own call, since
// the group's slots may have freed since.
//
// Whether f's tick is ahead of the clock (maxAhead) is decided with the
// clock of the leader's decision: a grant's renewedAt, or a tick_ahead
// refusal's now. A refusal of another kind names no clock, only a lower
// bound of it (its lease's renewedAt): a tick ahead of that bound may not
// be ahead of the clock, so such a follower makes its own call.
func decideFollower(f *leaseapi.AcquireParams, lease leaseapi.Lease, err error, maxAhead time.Duration) (acquireOutcome, bool) {
	now, exact := lease.RenewedAt, err == nil
	var conflict *leaseapi.ConflictError
	var ahead *leaseapi.TickAheadError
	var full *leaseapi.GroupFullError
	switch {
	case err == nil:
	case errors.As(err, &conflict):
		lease, now = conflict.Lease, conflict.Lease.RenewedAt
	case errors.As(err, &full):
		// A refusal like a conflict's, but by the group's slots, which
		// only a call reads: f is answered only when its own lease
		// refuses it (a pause, a done tick, a lease held by another);
		// a job without a lease refuses nothing.
		if full.Lease == nil {
			return acquireOutcome{}, false
		}
		lease, now = *full.Lease, full.Lease.RenewedAt
	case errors.As(err, &ahead):
		now, exact = ahead.Now, true
		if ahead.Lease == nil {
			// The job has no lease: f is refused if its tick is ahead
			// too, else its own call would grant it.
			if f.Tick == nil {
				return acquireOutcome{}, false
			}
			r, rerr := decide.ResolveTick(f, "", time.Time{})
			if rerr != nil {
				return acquireOutcome{}, false
			}
			if refused := decide.Ahead(r.Params.Tick, now, maxAhead, nil); refused != nil {
				return acquireOutcome{err: refused}, true
			}
			return acquireOutcome{}, false
		}
		lease = *ahead.Lease
	default:
		// The call failed (unreachable database, deadline): nothing was
		// decided for the followers, and nothing was attempted for them.
		return acquireOutcome{err: fmt.Errorf("acquire %q: %w: %w", f.JobID, leaseapi.ErrUnavailable, err)}, true
	}
	if f.NearestTick && f.Schedule == "" && lease.Schedule == "" {
		return acquireOutcome{}, false
	}
	if f.Tick != nil {
		r, rerr := decide.ResolveTick(f, lease.Schedule, time.Time{}) // a named tick needs no clock
		if rerr != nil {
			return acquireOutcome{}, false // its own call answers the invalid schedule
		}
		f = &r.Params
	}
	_, refused := decide.Acquire(f, lease, now, maxAhead)
	if refused == nil || (!exact && errors.Is(refused, leaseapi.ErrTickAhead)) {
		return acquireOutcome{}, false
	}
	return acquireOutcome{err: refused}, true
}
