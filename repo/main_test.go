package repo_test

import (
	"testing"

	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestMain gives the package a fresh, migrated Postgres database
// (repotest.WrapTestMain) for the tests that wrap the Postgres store.
func TestMain(m *testing.M) { repotest.WrapTestMain(m) }
