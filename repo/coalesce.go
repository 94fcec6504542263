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
	queue  *acquireQueue // the queue it waits in
	// told receives the waiter once its outcome is set (tell). It is
	// buffered for every waiter that shares it (one, or a batch's), so
	// the teller never blocks.
	told    chan *acquireWaiter
	outcome acquireOutcome
	index   int  // in its batch
	taken   bool // its batch has taken its outcome
}

// tell sets w's outcome and wakes its caller.
func (w *acquireWaiter) tell(o acquireOutcome) {
	w.outcome = o
	w.told <- w
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
	w := &acquireWaiter{params: p, queue: q, told: make(chan *acquireWaiter, 1)}
	q.waiting = append(q.waiting, w)
	c.mu.Unlock()

	select {
	case <-w.told:
		if o := w.outcome; o.lead {
			return c.lead(ctx, p, o.followers)
		}
		return w.outcome.lease, w.outcome.err
	case <-ctx.Done():
		c.abandon([]*acquireWaiter{w}, w.told)
		return w.outcome.lease, w.outcome.err
	}
}

// AcquireBatch decides a batch of acquires with the queues of single ones:
// the acquires of jobs without a call at the database go to the store as
// one batch, each leading its job's queue as a single call would; the
// others wait behind their job's call as followers, all told on one
// channel. The followers ordered to lead make their calls together, the
// orders at hand as one batch, as soon as they are told.
func (c *coalescer) AcquireBatch(ctx context.Context, ps []*leaseapi.AcquireParams) []leaseapi.Answer {
	out := make([]leaseapi.Answer, len(ps))
	var leads []*acquireWaiter // the calls this batch makes: its own, then its followers ordered to lead
	var waiting []*acquireWaiter
	told := make(chan *acquireWaiter, len(ps))
	c.mu.Lock()
	for i, p := range ps {
		w := &acquireWaiter{params: p, told: told, index: i}
		if q, busy := c.queues[p.JobID]; busy {
			w.queue = q
			q.waiting = append(q.waiting, w)
			waiting = append(waiting, w)
			continue
		}
		c.queues[p.JobID] = &acquireQueue{}
		leads = append(leads, w)
	}
	c.mu.Unlock()
	// Each set of calls this batch leads goes to the store at once, on a
	// goroutine of its own, so that the batch never waits while it holds
	// an order to lead (no two batches can wait for each other) and the
	// orders that come while a call is out are not held back by it.
	var wg sync.WaitGroup
	lead := func(ws []*acquireWaiter) { wg.Go(func() { c.leadBatch(ctx, ws, out) }) }
	if len(leads) > 0 {
		lead(leads)
	}
	for left := len(waiting); left > 0; {
		select {
		case w := <-told:
			var orders []*acquireWaiter
			for more := true; more; {
				left--
				w.taken = true
				if w.outcome.lead {
					orders = append(orders, w)
				} else {
					out[w.index] = leaseapi.Answer{Lease: w.outcome.lease, Err: w.outcome.err}
				}
				select {
				case w = <-told:
				default:
					more = false
				}
			}
			switch len(orders) {
			case 0:
			case 1: // alone, it is the single call it stands for
				w := orders[0]
				wg.Go(func() { out[w.index].Lease, out[w.index].Err = c.lead(ctx, w.params, w.outcome.followers) })
			default:
				lead(orders)
			}
		case <-ctx.Done():
			var rest []*acquireWaiter
			for _, w := range waiting {
				if !w.taken {
					rest = append(rest, w)
				}
			}
			c.abandon(rest, told)
			for _, w := range rest {
				out[w.index] = leaseapi.Answer{Lease: w.outcome.lease, Err: w.outcome.err}
			}
			left = 0
		}
	}
	wg.Wait()
	return out
}

// leadBatch makes the calls of leads as one batch call, answers each into
// out, decides for each one's followers and hands its job's queue on.
func (c *coalescer) leadBatch(ctx context.Context, leads []*acquireWaiter, out []leaseapi.Answer) {
	ps := make([]*leaseapi.AcquireParams, len(leads))
	for k, w := range leads {
		ps[k] = w.params
	}
	for k, a := range c.Store.AcquireBatch(ctx, ps) {
		w := leads[k]
		out[w.index] = a
		c.handOn(ctx, w.params, w.outcome.followers, a.Lease, a.Err)
	}
}

// abandon gives up on the followers ws, told on told, whose context ended:
// each still queued is withdrawn; each already handed to a call waits for
// its outcome, keeps a decision, and passes an order to lead on, since its
// call can no longer run. Every outcome but a decision becomes
// ErrUnavailable.
func (c *coalescer) abandon(ws []*acquireWaiter, told chan *acquireWaiter) {
	unavailable := func(w *acquireWaiter) acquireOutcome {
		return acquireOutcome{err: fmt.Errorf("acquire %q: %w: the deadline passed while it waited for a call of its job", w.params.JobID, leaseapi.ErrUnavailable)}
	}
	var sent int
	c.mu.Lock()
	for _, w := range ws {
		if w.queue.remove(w) {
			w.outcome = unavailable(w)
		} else {
			sent++
		}
	}
	c.mu.Unlock()
	for range sent {
		w := <-told
		if w.outcome.lead {
			c.next(w.params.JobID, w.outcome.followers)
			w.outcome = unavailable(w)
		}
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
			f.tell(o)
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
		batch[0].tell(acquireOutcome{lead: true, followers: batch[1:]})
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
// Whether f's tick is ahead of the clock (maxAhead), and whether f's own
// minimum interval refuses it (too_soon), is decided with the clock of the
// leader's decision: a grant's renewedAt, or a tick_ahead or too_soon
// refusal's now. A refusal of another kind names no clock, only a lower
// bound of it (its lease's renewedAt): a tick ahead of that bound may not
// be ahead of the clock, nor an interval that has not ended by it still
// running, so such a follower makes its own call. A follower whose own
// interval (shorter than the leader's, or none) does not refuse it makes
// its own call too: only a call grants.
func decideFollower(f *leaseapi.AcquireParams, lease leaseapi.Lease, err error, maxAhead time.Duration) (acquireOutcome, bool) {
	now, exact := lease.RenewedAt, err == nil
	var conflict *leaseapi.ConflictError
	var ahead *leaseapi.TickAheadError
	var full *leaseapi.GroupFullError
	var invalid *leaseapi.InvalidError
	switch {
	case err == nil:
	case errors.As(err, &invalid):
		// The store refused the leader's own params (a group that does
		// not exist, a nearestTick with no schedule): that decides
		// nothing for f, whose params are its own.
		return acquireOutcome{}, false
	case errors.As(err, &conflict):
		lease, now = conflict.Lease, conflict.Lease.RenewedAt
		if soon, ok := errors.AsType[*leaseapi.TooSoonError](err); ok && !soon.Now.IsZero() {
			now, exact = soon.Now, true
		}
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
	if refused == nil || (!exact && (errors.Is(refused, leaseapi.ErrTickAhead) || errors.Is(refused, leaseapi.ErrTooSoon))) {
		return acquireOutcome{}, false
	}
	return acquireOutcome{err: refused}, true
}
