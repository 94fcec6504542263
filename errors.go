package leaseapi

import (
	"errors"
	"fmt"
)

// Sentinel errors of the Store. Their names follow the API's problem codes
// (api/openapi.yaml); ErrInvalid is in validate.go.
var (
	// ErrNotFound: the job has no lease (not_found).
	ErrNotFound = errors.New("lease not found")
	// ErrLeaseHeld: another owner, or the same owner for another tick, holds
	// the lease (lease_held).
	ErrLeaseHeld = errors.New("lease held")
	// ErrTickDone: the requested tick was already released succeeded (tick_done).
	ErrTickDone = errors.New("tick already completed")
	// ErrJobPaused: the job is paused; skip this tick (job_paused).
	ErrJobPaused = errors.New("job paused")
	// ErrLeaseLost: the owner and token do not match a grant that may still be
	// heartbeated or released: another owner, an older token, expired,
	// released or revoked (lease_lost).
	ErrLeaseLost = errors.New("lease lost")
	// ErrUnavailable: the store could not be reached or did not answer in
	// time. The outcome of a write is unknown; retrying it is safe.
	ErrUnavailable = errors.New("store unavailable")
	// ErrOverloaded: the call was refused before it reached the database,
	// because this instance already had as many calls in flight as it
	// allows. Nothing was done; retrying later is safe. It wraps
	// ErrUnavailable (unavailable, 503).
	ErrOverloaded = fmt.Errorf("overloaded, nothing was done: %w", ErrUnavailable)
)

// ConflictError is a refused operation together with the lease as it was
// when the refusal was decided. It unwraps to ErrLeaseHeld, ErrTickDone,
// ErrJobPaused or ErrLeaseLost.
type ConflictError struct {
	Err   error
	Lease Lease
}

func (e *ConflictError) Error() string {
	return e.Err.Error() + ": job " + e.Lease.JobID
}

// Unwrap returns the sentinel, for errors.Is.
func (e *ConflictError) Unwrap() error { return e.Err }

// RefusedError is ErrUnavailable for a store that refuses every call for
// a reason it knows, until that reason goes away: a replicated store whose
// primary cannot acknowledge durably, a schema whose migrations are
// pending. Nothing was done. Reason is written for any caller, so it names
// settings and states, never an address or a credential; Err, for the
// log, may carry more.
type RefusedError struct {
	Reason string
	Err    error
}

func (e *RefusedError) Error() string {
	if e.Err == nil {
		return "store unavailable: " + e.Reason
	}
	return "store unavailable: " + e.Reason + ": " + e.Err.Error()
}

// Unwrap returns ErrUnavailable and the cause, for errors.Is.
func (e *RefusedError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }
