package leaseapi_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// TestTooSoonError: a too_soon refusal is a conflict that errors.Is finds
// as ErrTooSoon, and its RetryAfter is the rest of the interval by the
// store's clock, unknown (0) without that clock.
func TestTooSoonError(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	soon := &leaseapi.TooSoonError{MinInterval: time.Minute, Until: now.Add(1500 * time.Millisecond), Now: now}
	var err error = &leaseapi.ConflictError{Err: soon, Lease: leaseapi.Lease{JobID: "j"}}
	if !errors.Is(err, leaseapi.ErrTooSoon) || errors.Is(err, leaseapi.ErrLeaseHeld) {
		t.Errorf("errors.Is(%v, ErrTooSoon) = false or ErrLeaseHeld true", err)
	}
	if got, ok := errors.AsType[*leaseapi.TooSoonError](err); !ok || got.RetryAfter() != 1500*time.Millisecond {
		t.Errorf("RetryAfter of %v = %v, want 1.5s", err, got)
	}
	if got := (&leaseapi.TooSoonError{MinInterval: time.Minute, Until: now}).RetryAfter(); got != 0 {
		t.Errorf("RetryAfter without Now = %s, want 0", got)
	}
}
