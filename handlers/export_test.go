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
