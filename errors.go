package leaseapi

import (
	"errors"
	"fmt"
	"time"
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
	// ErrTooSoon: the job's previous grant started less than the
	// acquire's minimum interval ago (too_soon). Every *TooSoonError
	// unwraps to it.
	ErrTooSoon = errors.New("too soon after the job's previous grant")
	// ErrTickAhead: the tick lies later than the store's clock plus the
	// lead the store allows (tick_ahead); the caller's clock is fast.
	// Every *TickAheadError unwraps to it.
	ErrTickAhead = errors.New("tick ahead of the store's clock")
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
// ErrJobPaused or ErrLeaseLost, or to a *TooSoonError (ErrTooSoon).
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

// DefaultMaxTickAhead is how far past the store's clock a tick may lie
// when a store is given no other bound (LEASEAPI_MAX_TICK_AHEAD's
// default).
const DefaultMaxTickAhead = 5 * time.Minute

// TickAheadError is an acquire or a trigger refused because its tick
// (after snapping to the schedule) lies later than the store's clock plus
// MaxAhead: granting it would mark a tick of the future done, and every
// tick before it with it. The refusal writes nothing; a late tick (in the
// past) is never refused for its time.
type TickAheadError struct {
	// Tick is the refused tick; Now the store's clock when it was refused.
	Tick, Now time.Time
	// MaxAhead is the lead the store allows (0 when unknown: a client's
	// copy of the refusal).
	MaxAhead time.Duration
	// Lease is the job's lease as it was then, or nil when the job has none.
	Lease *Lease
	// Manual is set for a trigger's manual tick, which lies ahead because
	// the job's last completed tick or current tick does.
	Manual bool
}

func (e *TickAheadError) Error() string {
	s := fmt.Sprintf("tick %s lies %s after the store's clock (%s)",
		e.Tick.UTC().Format(time.RFC3339Nano), e.Ahead(), e.Now.UTC().Format(time.RFC3339Nano))
	if e.MaxAhead > 0 { // a client that read the refusal does not know it
		s += fmt.Sprintf(", more than the %s allowed", e.MaxAhead)
	}
	return s
}

// Ahead is how far Tick lies after Now, to the millisecond.
func (e *TickAheadError) Ahead() time.Duration { return e.Tick.Sub(e.Now).Round(time.Millisecond) }

// Unwrap returns ErrTickAhead, for errors.Is.
func (e *TickAheadError) Unwrap() error { return ErrTickAhead }

// TooSoonError is the Err of a *ConflictError refusing an acquire that
// would have granted the job sooner than the acquire's minimum interval
// after its previous grant started (AcquireParams.MinInterval). Nothing was
// written.
type TooSoonError struct {
	// MinInterval is the acquire's minimum interval; Until is when the job
	// may be granted again, its previous grant's acquiredAt plus
	// MinInterval.
	MinInterval time.Duration
	Until       time.Time
	// Now is the store's clock when the acquire was refused (zero when
	// unknown: a client's copy of the refusal).
	Now time.Time
}

func (e *TooSoonError) Error() string {
	if e.Until.IsZero() { // a copy that lost the interval
		return ErrTooSoon.Error()
	}
	return fmt.Sprintf("too soon after the job's previous grant: the minimum interval of %s ends at %s",
		e.MinInterval, e.Until.UTC().Format(time.RFC3339Nano))
}

// Unwrap returns ErrTooSoon, for errors.Is.
func (e *TooSoonError) Unwrap() error { return ErrTooSoon }

// RetryAfter is how long after the refusal the minimum interval ends by the
// store's clock (Until - Now), or 0 when Now is unknown.
func (e *TooSoonError) RetryAfter() time.Duration {
	if e.Now.IsZero() {
		return 0
	}
	return e.Until.Sub(e.Now)
}
