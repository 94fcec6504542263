package repo_test

import (
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestMain gives the package a fresh, migrated Postgres database
// (repotest.PostgresURL), or skips the database tests with -short.
func TestMain(m *testing.M) { repotest.WrapTestMain(m) }

// TestPostgresStore runs the store conformance suite on Postgres. It is not
// parallel: the suite's PruneRuns subtest prunes the whole database before
// the other tests of the package start.
func TestPostgresStore(t *testing.T) {
	dsn := repotest.PostgresURL(t)
	repotest.RunStoreSuite(t, func(t *testing.T) leaseapi.Store {
		// Every store is a new pool over the one package database; the
		// suite closes each store it opens.
		store, err := repo.OpenPostgres(t.Context(), repo.PostgresConfig{DSN: dsn})
		if err != nil {
			t.Fatalf("OpenPostgres: %v", err)
		}
		return store
	})
}
