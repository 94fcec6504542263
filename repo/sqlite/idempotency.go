package sqlite

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
	// claimIdempotencyKeyQuery: as in Postgres (repo/postgres), at $4, the
	// transaction's clock in Unix ms, with hold $5 and TTL $6.
	claimIdempotencyKeyQuery = `
INSERT INTO idempotency_keys (credential, key, fingerprint, created_at, locked_until)
VALUES ($1, $2, $3, $4, $4 + $5)
ON CONFLICT (credential, key) DO UPDATE
SET fingerprint = excluded.fingerprint, created_at = excluded.created_at,
    locked_until = excluded.locked_until, status = NULL, body = NULL
WHERE idempotency_keys.created_at < $4 - $6
   OR idempotency_keys.fingerprint = excluded.fingerprint AND idempotency_keys.status IS NULL
      AND idempotency_keys.locked_until < $4
RETURNING 1`
	pruneIdempotencyKeysQuery = `
DELETE FROM idempotency_keys WHERE rowid IN (
	SELECT rowid FROM idempotency_keys WHERE created_at < $1 ORDER BY created_at LIMIT $2
)`
)

// ClaimIdempotencyKey claims a key, in one write transaction. See
// leaseapi.IdempotencyStore.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, ip *leaseapi.IdempotencyParams) (*leaseapi.IdempotentAnswer, error) {
	if err := ip.Validate(); err != nil {
		return nil, err
	}
	return transact(ctx, s, "claim idempotency key", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (*leaseapi.IdempotentAnswer, error) {
		var claimed int
		err := tx.GetContext(ctx, &claimed, claimIdempotencyKeyQuery,
			ip.Credential, ip.Key, ip.Fingerprint[:], now, ip.Hold.Milliseconds(), leaseapi.IdempotencyTTL.Milliseconds())
		if err == nil {
			return nil, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		var row stores.IdempotencyRow
		if err := tx.GetContext(ctx, &row, stores.SelectIdempotencyKeyQuery, ip.Credential, ip.Key); err != nil {
			return nil, err // the row is there: the write transaction holds the database
		}
		return stores.DecideIdempotency(row, ip.Fingerprint)
	})
}

// FinishIdempotencyKey records an answer. See leaseapi.IdempotencyStore.
func (s *Store) FinishIdempotencyKey(ctx context.Context, ip *leaseapi.IdempotencyParams, a leaseapi.IdempotentAnswer) error {
	_, err := transact(ctx, s, "finish idempotency key", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, _ int64) (struct{}, error) {
		_, err := tx.ExecContext(ctx, stores.FinishIdempotencyKeyQuery, ip.Credential, ip.Key, ip.Fingerprint[:], a.Status, a.Body)
		return struct{}{}, err
	})
	return err
}

// ReleaseIdempotencyKey forgets a claim. See leaseapi.IdempotencyStore.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, ip *leaseapi.IdempotencyParams) error {
	_, err := transact(ctx, s, "release idempotency key", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, _ int64) (struct{}, error) {
		_, err := tx.ExecContext(ctx, stores.ReleaseIdempotencyKeyQuery, ip.Credential, ip.Key, ip.Fingerprint[:])
		return struct{}{}, err
	})
	return err
}

// PruneIdempotencyKeys deletes old keys. See leaseapi.IdempotencyStore.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, batch int) (int64, error) {
	if batch <= 0 {
		return 0, &leaseapi.InvalidError{Field: "batch", Rule: "must be positive"}
	}
	return transact(ctx, s, "prune idempotency keys", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (int64, error) {
		res, err := tx.ExecContext(ctx, pruneIdempotencyKeysQuery, now-leaseapi.IdempotencyTTL.Milliseconds(), batch)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}
