package handlers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/handlers"
)

// TestCallKeepsTheDeadline: a store call that ignores its context does not
// hold the request past its deadline, and a panicking one becomes an error.
func TestCallKeepsTheDeadline(t *testing.T) {
	t.Parallel()

	t.Run("IgnoresContext", func(t *testing.T) {
		t.Parallel()
		unblock := make(chan struct{})
		defer close(unblock)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- handlers.Call(ctx, func(context.Context) error {
				<-unblock // a store that never looks at ctx
				return nil
			})
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v, want context.DeadlineExceeded", err)
			}
		case <-time.After(10 * time.Second): // a bound, not a measurement
			t.Fatal("call waited past its deadline")
		}
	})

	t.Run("Panics", func(t *testing.T) {
		t.Parallel()
		err := handlers.Call(context.Background(), func(context.Context) error { panic("boom") })
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Errorf("got %v, want the panic as an error", err)
		}
	})

	t.Run("Returns", func(t *testing.T) {
		t.Parallel()
		want := errors.New("store error")
		if err := handlers.Call(context.Background(), func(context.Context) error { return want }); !errors.Is(err, want) {
			t.Errorf("got %v, want %v", err, want)
		}
	})
}
