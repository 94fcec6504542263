package postgres

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

var _ leaseapi.IdempotencyStore = (*Store)(nil)

const (
	// claimIdempotencyKeyQuery inserts the key's row, or takes over one
	// older than the TTL ($5 ms, forgotten) or one of the same request
	// left in flight past its hold (its request died); else it returns
	// nothing and the row is read.
	claimIdempotencyKeyQuery = `
INSERT INTO idempotency_keys (credential, key, fingerprint, locked_until)
VALUES ($1, $2, $3, clock_timestamp() + $4::bigint * interval '1 millisecond')
ON CONFLICT (credential, key) DO UPDATE
SET fingerprint = EXCLUDED.fingerprint, created_at = clock_timestamp(),
    locked_until = EXCLUDED.locked_until, status = NULL, body = NULL
WHERE idempotency_keys.created_at < clock_timestamp() - $5::bigint * interval '1 millisecond'
   OR idempotency_keys.fingerprint = EXCLUDED.fingerprint AND idempotency_keys.status IS NULL
      AND idempotency_keys.locked_until < clock_timestamp()
RETURNING true`
	pruneIdempotencyKeysQuery = `
DELETE FROM idempotency_keys WHERE (credential, key) IN (
	SELECT credential, key FROM idempotency_keys
	WHERE created_at < clock_timestamp() - $1::bigint * interval '1 millisecond'
	ORDER BY created_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)`
)

// ClaimIdempotencyKey claims a key. See leaseapi.IdempotencyStore.
func (p *Store) ClaimIdempotencyKey(ctx context.Context, ip *leaseapi.IdempotencyParams) (*leaseapi.IdempotentAnswer, error) {
	if err := ip.Validate(); err != nil {
		return nil, err
	}
	return bounded(ctx, func(ctx context.Context) (*leaseapi.IdempotentAnswer, error) {
		// The row read may be gone (released) by the time it is read:
		// claim again, a bounded number of times.
		for range 3 {
			var claimed bool
			err := sqlx.GetContext(ctx, p.db, &claimed, claimIdempotencyKeyQuery,
				ip.Credential, ip.Key, ip.Fingerprint[:], ip.Hold.Milliseconds(), leaseapi.IdempotencyTTL.Milliseconds())
			if err == nil {
				return nil, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return nil, interpretError("claim idempotency key", err)
			}
			var row stores.IdempotencyRow
			err = sqlx.GetContext(ctx, p.db, &row, stores.SelectIdempotencyKeyQuery, ip.Credential, ip.Key)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return nil, interpretError("claim idempotency key", err)
			}
			return stores.DecideIdempotency(row, ip.Fingerprint)
		}
		return nil, leaseapi.ErrIdempotencyKeyInFlight
	})
}

// FinishIdempotencyKey records an answer. See leaseapi.IdempotencyStore.
func (p *Store) FinishIdempotencyKey(ctx context.Context, ip *leaseapi.IdempotencyParams, a leaseapi.IdempotentAnswer) error {
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		_, err := p.db.ExecContext(ctx, stores.FinishIdempotencyKeyQuery, ip.Credential, ip.Key, ip.Fingerprint[:], a.Status, a.Body)
		return struct{}{}, interpretError("finish idempotency key", err)
	})
	return err
}

// ReleaseIdempotencyKey forgets a claim. See leaseapi.IdempotencyStore.
func (p *Store) ReleaseIdempotencyKey(ctx context.Context, ip *leaseapi.IdempotencyParams) error {
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		_, err := p.db.ExecContext(ctx, stores.ReleaseIdempotencyKeyQuery, ip.Credential, ip.Key, ip.Fingerprint[:])
		return struct{}{}, interpretError("release idempotency key", err)
	})
	return err
}

// PruneIdempotencyKeys deletes old keys. See leaseapi.IdempotencyStore.
func (p *Store) PruneIdempotencyKeys(ctx context.Context, batch int) (int64, error) {
	if batch <= 0 {
		return 0, &leaseapi.InvalidError{Field: "batch", Rule: "must be positive"}
	}
	return bounded(ctx, func(ctx context.Context) (int64, error) {
		res, err := p.db.ExecContext(ctx, pruneIdempotencyKeysQuery, leaseapi.IdempotencyTTL.Milliseconds(), batch)
		if err != nil {
			return 0, interpretError("prune idempotency keys", err)
		}
		n, err := res.RowsAffected()
		return n, interpretError("prune idempotency keys", err)
	})
}
