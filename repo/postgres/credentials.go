package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

var _ leaseapi.CredentialStore = (*Store)(nil)

const (
	insertCredentialQuery = `
INSERT INTO credentials (id, name, role, scopes, rate_per_second, secret_sha256)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING created_at`
	closeAPIQuery = `
INSERT INTO settings (key, value) VALUES ($1, 'true')
ON CONFLICT (key) DO NOTHING`
)

// CreateCredential stores c and closes the API for good, in one
// transaction. See leaseapi.CredentialStore.
func (p *Store) CreateCredential(ctx context.Context, c *leaseapi.Credential) error {
	if err := c.Validate(); err != nil {
		return err
	}
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		tx, err := p.db.BeginTxx(ctx, nil)
		if err != nil {
			return struct{}{}, interpretError("create credential", err)
		}
		defer func() { _ = tx.Rollback() }()
		row := stores.NewCredentialRow(c)
		if err := tx.GetContext(ctx, &c.CreatedAt, insertCredentialQuery,
			row.ID, row.Name, row.Role, row.Scopes, row.RatePerSecond, row.SecretSHA256); err != nil {
			if pqErr, ok := errors.AsType[*pq.Error](err); ok && pqErr.Code == "23505" { // unique_violation
				return struct{}{}, fmt.Errorf("create credential %q: %w", c.Name, leaseapi.ErrCredentialExists)
			}
			return struct{}{}, interpretError("create credential", err)
		}
		if _, err := tx.ExecContext(ctx, closeAPIQuery, stores.SettingClosed); err != nil {
			return struct{}{}, interpretError("create credential", err)
		}
		c.CreatedAt = c.CreatedAt.UTC()
		return struct{}{}, interpretError("create credential", tx.Commit())
	})
	return err
}

// DeleteCredential revokes a credential. See leaseapi.CredentialStore.
func (p *Store) DeleteCredential(ctx context.Context, id string) error {
	if !leaseapi.ValidCredentialID(id) {
		return leaseapi.ErrCredentialNotFound
	}
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		res, err := p.db.ExecContext(ctx, stores.DeleteCredentialQuery, id)
		if err != nil {
			return struct{}{}, interpretError("delete credential", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return struct{}{}, interpretError("delete credential", err)
		} else if n == 0 {
			return struct{}{}, leaseapi.ErrCredentialNotFound
		}
		return struct{}{}, nil
	})
	return err
}

// Credentials returns every credential. See leaseapi.CredentialStore.
func (p *Store) Credentials(ctx context.Context) (leaseapi.CredentialSet, error) {
	return bounded(ctx, func(ctx context.Context) (leaseapi.CredentialSet, error) {
		tx, err := p.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
		if err != nil {
			return leaseapi.CredentialSet{}, interpretError("read credentials", err)
		}
		defer func() { _ = tx.Rollback() }()
		set, err := stores.ReadCredentials(ctx, tx)
		if err != nil {
			return leaseapi.CredentialSet{}, interpretError("read credentials", err)
		}
		return set, nil
	})
}
