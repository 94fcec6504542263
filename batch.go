package leaseapi

import "context"

// MaxBatchItems bounds the calls of one batch (POST /acquire, POST
// /heartbeat).
const MaxBatchItems = 1000

// Answer is the answer to one call of a batch: the lease, or the error
// the call alone would have returned.
type Answer struct {
	Lease Lease
	Err   error
}

// Batching is the part of a Store that decides many calls of one kind in
// one: a replica's acquires of the jobs that fire at one tick, its
// heartbeats of the grants it holds. Each call is decided exactly as the
// single method would decide it (the same rules, refusals, tokens and
// guarantees); a batch only saves round trips. The answers are in the
// order of the calls, one per call. The job ids of one batch are
// distinct. An invalid call is answered with its *InvalidError, and a
// call the deadline cut off with an error wrapping ErrUnavailable, while
// the others are decided.
type Batching interface {
	// AcquireBatch decides each of ps as Acquire would.
	AcquireBatch(ctx context.Context, ps []*AcquireParams) []Answer
	// HeartbeatBatch decides each of ps as Heartbeat would.
	HeartbeatBatch(ctx context.Context, ps []*HeartbeatParams) []Answer
}
