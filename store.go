package leaseapi

import (
	"context"
	"time"
)

// Store keeps leases and their run history. The Postgres store (repo.Postgres)
// and the embedded store (repo.SQLite) implement it, and one conformance suite
// (repo/repotest) holds both to the same behaviour.
//
// Every implementation guarantees, with its clock as the only clock:
//
//  1. Mutual exclusion: at any instant at most one grant of a job is held.
//  2. Fencing: tokens of one job strictly increase with every grant and
//     revocation; an operation carrying an older token never succeeds.
//  3. Per tick: a tick, once released succeeded, is never granted again.
//  4. Liveness: a lease whose holder vanished is grantable once expiresAt passes.
//  5. Durability: a restart loses no lease, no token and no completed tick.
//
// Parameters are validated by their Validate methods (AcquireParams.Validate
// and so on; ValidateJobID for a bare job id). Callers should validate
// before calling, to answer with the precise rule; every implementation
// validates again at its entry and refuses invalid input with an
// *InvalidError (wrapping ErrInvalid) before touching its database, so
// that both stores answer bad input alike and nothing invalid is stored.
//
// Each method returns by the deadline of its context. When it cannot reach
// the database or the deadline passes, it returns an error wrapping
// ErrUnavailable; the outcome of a write is then unknown, and retrying it is
// safe because Acquire (same owner, same tick), Heartbeat and Release (same
// owner and token) are idempotent.
type Store interface {
	// Acquire grants the lease of p.JobID to p.Owner when it is not held,
	// renews it when p.Owner already holds it for the same tick (or p.Tick is
	// nil), and otherwise returns a *ConflictError wrapping ErrLeaseHeld, or
	// ErrTickDone when p.Tick is at or before the last completed tick.
	Acquire(ctx context.Context, p *AcquireParams) (Lease, error)
	// Heartbeat extends a held lease whose owner and token match. Otherwise it
	// returns a *ConflictError wrapping ErrLeaseLost, or ErrNotFound.
	Heartbeat(ctx context.Context, p *HeartbeatParams) (Lease, error)
	// Release ends the grant whose owner and token match, even when it has
	// expired and nobody took it over, and records its outcome. Releasing
	// again with the same owner and token changes nothing. Otherwise it
	// returns a *ConflictError wrapping ErrLeaseLost, or ErrNotFound.
	Release(ctx context.Context, p *ReleaseParams) (Lease, error)
	// Revoke force-releases a held lease and increments its token, so the old
	// holder's heartbeat and release fail. A lease that is not held is
	// returned unchanged. ErrNotFound for an unknown job.
	Revoke(ctx context.Context, jobID string) (Lease, error)
	// Get returns the lease of jobID, or ErrNotFound.
	Get(ctx context.Context, jobID string) (Lease, error)
	// List returns one page of leases sorted by job id.
	List(ctx context.Context, p *ListParams) (LeasePage, error)
	// Runs returns up to limit runs of jobID, newest first, or ErrNotFound;
	// its parameters are those of RunsParams.
	Runs(ctx context.Context, jobID string, limit int) ([]Run, error)
	// PruneRuns deletes up to batch finished runs that ended before
	// now-retention and returns how many it deleted.
	PruneRuns(ctx context.Context, retention time.Duration, batch int) (int64, error)
	// Ready returns nil when the database answers and its schema is current.
	Ready(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}
