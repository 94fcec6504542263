package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

var _ leaseapi.CredentialStore = (*Store)(nil)

const (
	insertCredentialQuery = `
INSERT INTO credentials (id, name, role, scopes, rate_per_second, secret_sha256, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)`
	closeAPIQuery = `INSERT INTO settings (key, value) VALUES ($1, 'true') ON CONFLICT (key) DO NOTHING`
)

// CreateCredential stores c and closes the API for good, in one
// transaction. See leaseapi.CredentialStore.
func (s *Store) CreateCredential(ctx context.Context, c *leaseapi.Credential) error {
	if err := c.Validate(); err != nil {
		return err
	}
	_, err := transact(ctx, s, "create credential", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (struct{}, error) {
		row := stores.NewCredentialRow(c)
		if _, err := tx.ExecContext(ctx, insertCredentialQuery,
			row.ID, row.Name, row.Role, row.Scopes, row.RatePerSecond, row.SecretSHA256, now); err != nil {
			if driverErr, ok := errors.AsType[*sqlitedrv.Error](err); ok &&
				(driverErr.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || driverErr.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) {
				return struct{}{}, fmt.Errorf("create credential %q: %w", c.Name, leaseapi.ErrCredentialExists)
			}
			return struct{}{}, err
		}
		if _, err := tx.ExecContext(ctx, closeAPIQuery, stores.SettingClosed); err != nil {
			return struct{}{}, err
		}
		c.CreatedAt = fromMs(now)
		return struct{}{}, nil
	})
	return err
}

// DeleteCredential revokes a credential. See leaseapi.CredentialStore.
func (s *Store) DeleteCredential(ctx context.Context, id string) error {
	if !leaseapi.ValidCredentialID(id) {
		return leaseapi.ErrCredentialNotFound
	}
	_, err := transact(ctx, s, "delete credential", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, _ int64) (struct{}, error) {
		res, err := tx.ExecContext(ctx, stores.DeleteCredentialQuery, id)
		if err != nil {
			return struct{}{}, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return struct{}{}, err
		} else if n == 0 {
			return struct{}{}, leaseapi.ErrCredentialNotFound
		}
		return struct{}{}, nil
	})
	return err
}

// Credentials returns every credential. See leaseapi.CredentialStore.
func (s *Store) Credentials(ctx context.Context) (leaseapi.CredentialSet, error) {
	return transact(ctx, s, "read credentials", s.readTx, func(ctx context.Context, tx *sqlx.Tx, _ int64) (leaseapi.CredentialSet, error) {
		return stores.ReadCredentials(ctx, tx)
	})
}
