package handlers

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/leaseapi/leaseapi"
)

// batchTurns is how many batches of one kind an instance answers at once:
// four per core, so that batches that arrive while another's reads are out
// share them (in the batch herd, 102k decisions/s against 85k at two per
// core), and few enough that a herd of batches costs the memory of a few
// (docs/performance.md).
func batchTurns() int { return max(4, 4*runtime.GOMAXPROCS(0)) }

// turns are the batches of one kind (acquires, heartbeats) an instance
// answers at once. A batch holds up to 1,000 calls' bodies, params and
// answers: answered a few at a time, a herd of batches costs the memory
// and the collections of a few, and the first batches are answered first
// instead of all at the end. Acquires and heartbeats take turns apart, so
// that a herd of acquire batches never delays the heartbeats that keep
// leases alive.
//
// A freed turn goes to the credentials waiting in round robin, and within
// one credential to its oldest batch: a waiting batch has at most one batch
// of each other waiting credential served before it, not a team's whole
// herd (a cost paid by another team, which a shared instance must not
// charge).
type turns struct {
	mu   sync.Mutex
	free int // turns not held; while any is free, nobody waits
	// waiting holds each credential's waiting batches, oldest first, and
	// ring the credentials that have some, in the order they are served.
	waiting map[string][]*turnWaiter
	ring    []string
	size    int
}

type turnWaiter struct {
	ready   chan struct{} // closed when the turn is handed over
	granted bool          // under turns.mu: the turn is this waiter's
}

func newTurns(n int) *turns {
	return &turns{free: n, size: n, waiting: make(map[string][]*turnWaiter)}
}

// take waits, within ctx, for a turn of the credential key and returns the
// function that ends it. A batch still waiting at its deadline is refused
// 503 overloaded, nothing decided: the instance is busy, not the database,
// as load shedding answers.
func (t *turns) take(ctx context.Context, key string) (func(), error) {
	t.mu.Lock()
	if t.free > 0 {
		t.free--
		t.mu.Unlock()
		return t.end, nil
	}
	w := &turnWaiter{ready: make(chan struct{})}
	if len(t.waiting[key]) == 0 {
		t.ring = append(t.ring, key)
	}
	t.waiting[key] = append(t.waiting[key], w)
	t.mu.Unlock()

	select {
	case <-w.ready:
		return t.end, nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	granted := w.granted
	if !granted {
		t.drop(key, w)
	}
	t.mu.Unlock()
	if granted {
		t.end() // handed over as the deadline passed: pass it on
	}
	return nil, fmt.Errorf("%w: this batch waited for a turn among %d until its deadline: %w",
		leaseapi.ErrOverloaded, t.size, ctx.Err())
}

// end ends a turn: it goes to the oldest batch of the next credential in
// the ring, which then moves to the ring's end if it has more waiting.
func (t *turns) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ring) == 0 {
		t.free++
		return
	}
	key := t.ring[0]
	t.ring = t.ring[1:]
	q := t.waiting[key]
	w := q[0]
	q[0] = nil
	if q = q[1:]; len(q) == 0 {
		delete(t.waiting, key)
	} else {
		t.waiting[key] = q
		t.ring = append(t.ring, key)
	}
	w.granted = true
	close(w.ready)
}

// drop removes w, which gave up waiting, from the credential key's queue,
// and key from the ring when that was its last waiting batch. t.mu is held.
func (t *turns) drop(key string, w *turnWaiter) {
	q := slices.DeleteFunc(t.waiting[key], func(x *turnWaiter) bool { return x == w })
	if len(q) > 0 {
		t.waiting[key] = q
		return
	}
	delete(t.waiting, key)
	t.ring = slices.DeleteFunc(t.ring, func(k string) bool { return k == key })
}
