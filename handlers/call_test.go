package handlers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi/handlers"
)

// TestCall: a panicking store call becomes an error, and a store's error
// is returned as is.
func TestCall(t *testing.T) {
	t.Parallel()

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
