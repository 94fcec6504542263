package handlers

import (
	"context"
	"time"
)

// call runs one store call in the request's goroutine and observes its
// latency. It adds no deadline of its own: every leaseapi.Store returns by
// its context's deadline (postgres.Store even when the database stops
// answering), so the request's deadline bounds the call. A store that
// panics is a bug like a handler that panics: recoverer answers both.
func call[T any](ctx context.Context, m *metrics, op string, fn func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	defer func() { m.storeDuration.WithLabelValues(op).Observe(time.Since(start).Seconds()) }()
	return fn(ctx)
}
