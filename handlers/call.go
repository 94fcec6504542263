package handlers

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// call runs one store call in the request's goroutine, observes its latency
// and turns a panic into an error (a 500 that names the operation). It adds
// no deadline of its own: every leaseapi.Store returns by its context's
// deadline (repo.Postgres even when the database stops answering), so the
// request's deadline bounds the call.
func call[T any](ctx context.Context, m *metrics, op string, fn func(context.Context) (T, error)) (v T, err error) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v, err = zero, fmt.Errorf("store %s panicked: %v\n%s", op, p, debug.Stack())
		}
		m.storeDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	}()
	return fn(ctx)
}
