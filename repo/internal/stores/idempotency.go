package stores

import (
	"bytes"
	"database/sql"

	"github.com/leaseapi/leaseapi"
)

// IdempotencyRow is what a claim that did not insert or take over reads
// of the key's row.
type IdempotencyRow struct {
	Fingerprint []byte        `db:"fingerprint"`
	Status      sql.NullInt64 `db:"status"`
	Body        []byte        `db:"body"`
}

// DecideIdempotency is the answer of a claim that found row, held by
// another request of fingerprint fp or answered: the recorded answer of
// the same request, else ErrIdempotencyKeyReused (another request), else
// ErrIdempotencyKeyInFlight.
func DecideIdempotency(row IdempotencyRow, fp [32]byte) (*leaseapi.IdempotentAnswer, error) {
	switch {
	case !bytes.Equal(row.Fingerprint, fp[:]):
		return nil, leaseapi.ErrIdempotencyKeyReused
	case !row.Status.Valid:
		return nil, leaseapi.ErrIdempotencyKeyInFlight
	}
	return &leaseapi.IdempotentAnswer{Status: int(row.Status.Int64), Body: row.Body}, nil
}

const (
	// SelectIdempotencyKeyQuery reads the row of a key that a claim did
	// not get.
	SelectIdempotencyKeyQuery = `
SELECT fingerprint, status, body FROM idempotency_keys WHERE credential = $1 AND key = $2`
	// FinishIdempotencyKeyQuery records the answer of the request that
	// holds the key.
	FinishIdempotencyKeyQuery = `
UPDATE idempotency_keys SET status = $4, body = $5, locked_until = NULL
WHERE credential = $1 AND key = $2 AND fingerprint = $3 AND status IS NULL`
	// ReleaseIdempotencyKeyQuery forgets the claim of a request that failed.
	ReleaseIdempotencyKeyQuery = `
DELETE FROM idempotency_keys
WHERE credential = $1 AND key = $2 AND fingerprint = $3 AND status IS NULL`
)
