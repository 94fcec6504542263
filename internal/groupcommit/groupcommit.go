// Package groupcommit sends concurrent calls of one kind as batches, the
// way a database commits concurrent transactions together: while a batch
// is out, further calls queue; when it returns, the queued ones go as the
// next batch. There is no timer: under light load every call goes alone,
// at once. The Postgres store sends its statements this way, and the Go
// runner (package jobs) its calls to leaseapi.
//
// A call whose context ends while it queues is not sent; one whose
// context ends while its batch is out returns ErrUnavailable (its outcome
// is unknown, as for a single call); a result that comes back after the
// call's context ended is not used.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
)

// ErrBatchFailed tells a call that its batch failed as a whole and that
// it must be made alone.
var ErrBatchFailed = errors.New("batch failed")

// Batcher groups concurrent calls of one kind into batches. P are a
// call's parameters, R its result.
type Batcher[P, R any] struct {
	// Key names what a call writes: a batch holds at most one call per
	// key, the others wait for a later batch.
	Key func(*P) string
	// Max caps the calls of one batch.
	Max int
	// Single makes the call of a batch of one.
	Single func(context.Context, *P) (R, error)
	// Run makes the call of a batch of two or more: a result and an error
	// per call, or an error for the whole batch, after which each of its
	// calls returns ErrBatchFailed.
	Run func(context.Context, []*P) ([]R, []error, error)

	mu      sync.Mutex
	queue   []*batchCall[P, R]
	running bool // drain is sending the queued calls
}

type batchCall[P, R any] struct {
	ctx    context.Context
	params *P
	out    chan batchOutcome[R] // buffered: the sender never blocks
}

// batchOutcome is a call's result.
type batchOutcome[R any] struct {
	row R
	err error
}

// Do makes the call p in the next batch and returns its row. It returns by
// the end of ctx whatever the other end does: a call still queued then is
// withdrawn and never sent; one whose batch is out returns
// ErrUnavailable, its outcome unknown, and the batch goes on for the
// others. So a store call through a batcher needs no goroutine of its own
// to keep its deadline; the batches run on one goroutine per
// batcher while there are calls to send.
func (b *Batcher[P, R]) Do(ctx context.Context, p *P) (R, error) {
	c := &batchCall[P, R]{ctx: ctx, params: p, out: make(chan batchOutcome[R], 1)}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if !b.running {
		b.running = true
		go b.drain()
	}
	b.mu.Unlock()
	select {
	case o := <-c.out:
		return LateResult(ctx, o.row, o.err)
	case <-ctx.Done():
		b.mu.Lock()
		withdrawn := b.remove(c)
		b.mu.Unlock()
		var zero R
		if withdrawn {
			return zero, fmt.Errorf("%w: not sent: %w", leaseapi.ErrUnavailable, ctx.Err())
		}
		// Sent: whether or not its answer came meanwhile, none is used
		// after the deadline (LateResult).
		return zero, fmt.Errorf("%w: %w", leaseapi.ErrUnavailable, ctx.Err())
	}
}

// DoAll makes the calls ps in the next batches, queued together in their
// order, and returns each one's row or error as Do would. A call still
// queued when ctx ends is withdrawn and never sent.
func (b *Batcher[P, R]) DoAll(ctx context.Context, ps []*P) ([]R, []error) {
	calls := make([]*batchCall[P, R], len(ps))
	for i, p := range ps {
		calls[i] = &batchCall[P, R]{ctx: ctx, params: p, out: make(chan batchOutcome[R], 1)}
	}
	b.mu.Lock()
	b.queue = append(b.queue, calls...)
	if !b.running && len(calls) > 0 {
		b.running = true
		go b.drain()
	}
	b.mu.Unlock()
	rows, errs := make([]R, len(ps)), make([]error, len(ps))
	for i, c := range calls {
		select {
		case o := <-c.out:
			rows[i], errs[i] = LateResult(ctx, o.row, o.err)
		case <-ctx.Done():
			b.mu.Lock()
			withdrawn := b.remove(c)
			b.mu.Unlock()
			errs[i] = fmt.Errorf("%w: %w", leaseapi.ErrUnavailable, ctx.Err())
			if withdrawn {
				errs[i] = fmt.Errorf("%w: not sent: %w", leaseapi.ErrUnavailable, ctx.Err())
			}
		}
	}
	return rows, errs
}

// Queued is how many calls wait for the batch out to return.
func (b *Batcher[P, R]) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// drain sends the queued calls, batch after batch, until none is left.
func (b *Batcher[P, R]) drain() {
	for {
		b.mu.Lock()
		batch := b.take()
		if len(batch) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		rows, errs := b.exec(batch)
		for i, c := range batch {
			c.out <- batchOutcome[R]{row: rows[i], err: errs[i]}
		}
	}
}

// take removes the next batch from the queue: the calls whose context has
// not ended, one per key, at most Max. A call whose context ended is
// answered at once and never sent. Called with mu held.
func (b *Batcher[P, R]) take() []*batchCall[P, R] {
	var batch []*batchCall[P, R]
	var keys map[string]bool
	rest := b.queue[:0]
	for _, c := range b.queue {
		if err := c.ctx.Err(); err != nil {
			var zero R
			c.out <- batchOutcome[R]{row: zero, err: fmt.Errorf("%w: not sent: %w", leaseapi.ErrUnavailable, err)}
			continue
		}
		k := b.Key(c.params)
		if len(batch) == b.Max || keys[k] {
			rest = append(rest, c)
			continue
		}
		if keys == nil {
			keys = make(map[string]bool)
		}
		keys[k] = true
		batch = append(batch, c)
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	return batch
}

func (b *Batcher[P, R]) remove(c *batchCall[P, R]) bool {
	for i, x := range b.queue {
		if x == c {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return true
		}
	}
	return false
}

// exec makes the call of batch under a context that ends with the
// last deadline among its calls: the batch is not cut short for the calls
// that wait longest. A call whose deadline passes while the batch runs has
// already returned (do).
func (b *Batcher[P, R]) exec(batch []*batchCall[P, R]) ([]R, []error) {
	ctx := context.Background()
	var last time.Time
	bounded := true
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			bounded = false
			break
		}
		if d.After(last) {
			last = d
		}
	}
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, last)
		defer cancel()
	}
	rows := make([]R, len(batch))
	errs := make([]error, len(batch))
	if len(batch) == 1 {
		rows[0], errs[0] = b.Single(ctx, batch[0].params)
		return rows, errs
	}
	params := make([]*P, len(batch))
	for i, c := range batch {
		params[i] = c.params
	}
	got, gotErrs, err := b.Run(ctx, params)
	if err != nil {
		for i := range errs {
			errs[i] = ErrBatchFailed
		}
		return rows, errs
	}
	return got, gotErrs
}

// LateResult is the answer to a call that returned v, err: unless err is
// set, a result that came back after ctx ended is not used (ErrUnavailable),
// since the caller's deadline has passed and its answer may have been
// given up on already. The two can coincide: a select picks among ready
// cases at random.
func LateResult[T any](ctx context.Context, v T, err error) (T, error) {
	if err == nil && ctx.Err() != nil {
		var zero T
		return zero, fmt.Errorf("%w: the answer came after the deadline: %w", leaseapi.ErrUnavailable, ctx.Err())
	}
	return v, err
}
