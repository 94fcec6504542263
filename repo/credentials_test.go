package repo_test

import (
	"bytes"
	"database/sql"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestNoSecretStored creates credentials in each store, then reads every
// row of every table of its database and finds neither a token nor its
// secret, in text or in bytes: only the hash is kept.
func TestNoSecretStored(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, cs leaseapi.CredentialStore, db *sql.DB, tablesQuery string, quote func(string) string) {
		t.Helper()
		var secrets [][]byte
		for i := range 3 {
			c, token := leaseapi.NewCredential(fmt.Sprintf("secret-check-%d-%s", i, filepath.Base(t.TempDir())), leaseapi.RoleRead, []string{"*"}, nil)
			if err := cs.CreateCredential(t.Context(), &c); err != nil {
				t.Fatalf("CreateCredential: %v", err)
			}
			_, secret, _ := leaseapi.ParseToken(token)
			raw, err := base64.RawURLEncoding.DecodeString(secret)
			if err != nil {
				t.Fatal(err)
			}
			secrets = append(secrets, []byte(token), []byte(secret), raw)
		}
		tables := 0
		rows, err := db.QueryContext(t.Context(), tablesQuery)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, table := range names {
			tables++
			rows, err := db.QueryContext(t.Context(), "SELECT * FROM "+quote(table))
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				for i, v := range vals {
					b, ok := v.([]byte)
					if !ok {
						b = fmt.Append(nil, v)
					}
					for _, s := range secrets {
						if bytes.Contains(b, s) {
							t.Errorf("table %s column %s holds a secret", table, cols[i])
						}
					}
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		if tables < 4 {
			t.Fatalf("read %d tables, want the credentials, settings, leases and runs tables at least", tables)
		}
	}

	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "leases.db")
		s := repotest.OpenSQLite(t, path)
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		check(t, s, db, `SELECT name FROM sqlite_schema WHERE type = 'table'`, func(n string) string { return `"` + n + `"` })
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		dsn := repotest.PostgresURL(t)
		s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		check(t, s, db, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`, pq.QuoteIdentifier)
	})
}
