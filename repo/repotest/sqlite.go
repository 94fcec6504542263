package repotest

import (
	"testing"

	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// OpenSQLite opens and migrates an embedded store at path, with the
// settings o (none: the defaults), and closes it at the end of the test
// (Close is idempotent, so tests may close it earlier).
func OpenSQLite(t *testing.T, path string, o ...StoreOptions) *sqlite.Store {
	t.Helper()
	cfg := sqlite.Config{Path: path}
	if len(o) > 0 {
		cfg.MaxTickAhead = o[0].MaxTickAhead
	}
	s, err := sqlite.Open(t.Context(), cfg)
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
