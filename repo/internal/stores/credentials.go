package stores

import (
	"context"
	"crypto/sha256"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
)

// CredentialRow is a credentials row of either store; created_at is a
// timestamptz in Postgres and Unix milliseconds in SQLite.
type CredentialRow struct {
	ID            string   `db:"id"`
	Name          string   `db:"name"`
	Role          string   `db:"role"`
	Scopes        string   `db:"scopes"`
	RatePerSecond *float64 `db:"rate_per_second"`
	SecretSHA256  []byte   `db:"secret_sha256"`
	CreatedAt     any      `db:"created_at"`
}

func NewCredentialRow(c *leaseapi.Credential) CredentialRow {
	return CredentialRow{
		ID: c.ID, Name: c.Name, Role: string(c.Role), Scopes: strings.Join(leaseapi.NormalizeScopes(c.Scopes), " "),
		RatePerSecond: c.RatePerSecond, SecretSHA256: c.SecretHash[:],
	}
}

func (r *CredentialRow) Credential() leaseapi.Credential {
	c := leaseapi.Credential{
		ID: r.ID, Name: r.Name, Role: leaseapi.Role(r.Role), Scopes: strings.Fields(r.Scopes),
		RatePerSecond: r.RatePerSecond,
	}
	switch at := r.CreatedAt.(type) {
	case time.Time:
		c.CreatedAt = at.UTC()
	case int64:
		c.CreatedAt = time.UnixMilli(at).UTC()
	}
	if len(r.SecretSHA256) == sha256.Size {
		c.SecretHash = [sha256.Size]byte(r.SecretSHA256)
	}
	return c
}

// SettingClosed is the settings key that marks the API closed for good.
const SettingClosed = "closed"

// The statements both stores share.
const (
	selectCredentialsQuery = `
SELECT id, name, role, scopes, rate_per_second, secret_sha256, created_at
FROM credentials ORDER BY name`
	selectClosedQuery = `SELECT EXISTS (SELECT 1 FROM settings WHERE key = $1)`
	// DeleteCredentialQuery deletes one credential by id.
	DeleteCredentialQuery = `DELETE FROM credentials WHERE id = $1`
)

// ReadCredentials reads every credential and the closed mark in one
// transaction, so the two agree.
func ReadCredentials(ctx context.Context, tx *sqlx.Tx) (leaseapi.CredentialSet, error) {
	var rows []CredentialRow
	if err := tx.SelectContext(ctx, &rows, selectCredentialsQuery); err != nil {
		return leaseapi.CredentialSet{}, err
	}
	set := leaseapi.CredentialSet{Credentials: make([]leaseapi.Credential, 0, len(rows))}
	for i := range rows {
		set.Credentials = append(set.Credentials, rows[i].Credential())
	}
	if err := tx.GetContext(ctx, &set.Closed, selectClosedQuery, SettingClosed); err != nil {
		return leaseapi.CredentialSet{}, err
	}
	return set, nil
}
