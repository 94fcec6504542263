package repotest

import (
	"testing"

	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// OpenSQLite opens and migrates an embedded store at path and closes it at
// the end of the test (Close is idempotent, so tests may close it earlier).
func OpenSQLite(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("sqlite.Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}
