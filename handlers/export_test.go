package handlers

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaseapi/leaseapi"
)

// Exported for the external tests (package handlers_test) only.
var (
	WriteProblem = writeProblem
	RetryAfter   = retryAfter
	BatchTurns   = batchTurns
)

// NewWithTurns is New, plus a function that returns how many acquire
// batches wait for a turn, by credential.
func NewWithTurns(store leaseapi.Store, opts Options) (http.Handler, func() map[string]int) {
	h := newHandler(store, opts)
	return h.routes(), h.acquireTurns.waitingByKey
}

func (t *turns) waitingByKey() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := make(map[string]int, len(t.waiting))
	for k, q := range t.waiting {
		n[k] = len(q)
	}
	return n
}

// NewWithExtraRoute is New with one more GET route, through the same
// middleware, for testing the middleware itself (a handler that panics).
func NewWithExtraRoute(store leaseapi.Store, opts Options, pattern string, fn http.HandlerFunc) http.Handler {
	h := New(store, opts)
	h.(*chi.Mux).Get(pattern, fn)
	return h
}

// Call runs fn the way the handlers run a store call.
func Call(ctx context.Context, fn func(context.Context) error) error {
	_, err := call(ctx, newMetrics(prometheus.NewRegistry(), false), "test", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	})
	return err
}
