package postgres_test

import (
	"database/sql"
	"testing"
	"time"

	_ "github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestPostgresRegistryAfterV1 migrates a database that v1.0.0 made (its
// schema: every migration up to 0017) and finds it finalized at level 0,
// since v1.0.0 instances may still serve it; a finalize raises it.
func TestPostgresRegistryAfterV1(t *testing.T) {
	t.Parallel()
	dsn := repotest.NewPostgresURL(t)
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Back to v1.0.0's schema: 0018 made only these two tables.
	if _, err := db.ExecContext(t.Context(), `
DROP TABLE instances, feature_level;
DELETE FROM leaseapi_migrations WHERE version_id >= 18`); err != nil {
		t.Fatal(err)
	}
	store, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if _, level, err := store.Instances(t.Context(), time.Minute); err != nil || level != 0 {
		t.Fatalf("after the upgrade from v1.0.0: level %d, %v; want 0", level, err)
	}
	if err := store.Finalize(t.Context(), leaseapi.FeatureLevel, time.Minute); err != nil {
		t.Fatalf("Finalize: %v", err)
	}
	if _, level, err := store.Instances(t.Context(), time.Minute); err != nil || level != leaseapi.FeatureLevel {
		t.Fatalf("after finalize: level %d, %v; want %d", level, err, leaseapi.FeatureLevel)
	}
}
