package handlers

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// call runs one store call and returns its result, or the context's error
// as soon as ctx is done even if the call has not returned yet. Stores
// promise to return by their deadline; call makes the handler keep its own
// promise (an answer within RequestTimeout) even when a store does not. A
// call abandoned this way finishes in the background and its result is
// dropped: the request has already answered 503, and a retry is safe.
//
// The store latency histogram observes every call when it returns, also
// abandoned ones, so it shows the database's latency, not the deadline.
func call[T any](ctx context.Context, m *metrics, op string, fn func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned call never blocks
	start := time.Now()
	go func() {
		var res result
		defer func() {
			if p := recover(); p != nil {
				res = result{err: fmt.Errorf("store %s panicked: %v\n%s", op, p, debug.Stack())}
			}
			m.storeDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
			done <- res
		}()
		res.v, res.err = fn(ctx)
	}()
	select {
	case res := <-done:
		return res.v, res.err
	case <-ctx.Done():
		select {
		case res := <-done: // it returned just in time; prefer its answer
			return res.v, res.err
		default:
		}
		var zero T
		return zero, fmt.Errorf("store %s: %w", op, context.Cause(ctx))
	}
}
