package repo

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// TestRunPrunerIdempotencyKeys: a pass of the run pruner deletes the
// Idempotency-Keys older than leaseapi.IdempotencyTTL, in batches, and
// keeps the younger ones.
func TestRunPrunerIdempotencyKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "leaseapi.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	keys := []string{"old-1", "old-2", "old-3", "young"}
	for _, key := range keys {
		p := &leaseapi.IdempotencyParams{Credential: "c", Key: key, Fingerprint: leaseapi.IdempotencyFingerprint(key), Hold: time.Minute}
		if _, err := s.ClaimIdempotencyKey(ctx, p); err != nil {
			t.Fatalf("claim %s: %v", key, err)
		}
	}
	// Age the old keys past the TTL, as a day would.
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(ctx, `UPDATE idempotency_keys SET created_at = created_at - $1 WHERE key LIKE 'old-%'`,
		(leaseapi.IdempotencyTTL + time.Minute).Milliseconds()); err != nil {
		t.Fatalf("age the keys: %v", err)
	}
	p, err := NewRunPruner(s, RunPrunerConfig{Interval: time.Hour, BatchSize: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.runOnce(ctx); err != nil {
		t.Fatalf("runOnce: %v", err)
	}
	var left []string
	rows, err := raw.QueryContext(ctx, `SELECT key FROM idempotency_keys ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		left = append(left, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != "young" {
		t.Errorf("keys after a pass: %q, want only the young one", left)
	}
}
