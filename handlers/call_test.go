package handlers_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leaseapi/leaseapi/handlers"
)

// TestCall: a store's error is returned as is.
func TestCall(t *testing.T) {
	t.Parallel()
	want := errors.New("store error")
	if err := handlers.Call(context.Background(), func(context.Context) error { return want }); !errors.Is(err, want) {
		t.Errorf("got %v, want %v", err, want)
	}
}
