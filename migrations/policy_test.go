package migrations

import (
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// lastOfV1 is the newest Postgres migration of v1.0.0. The migrations
// after it follow the expand-then-contract rules of docs/upgrading.md,
// so that the previous release keeps serving while they run.
const lastOfV1 = 17

var (
	createIndex  = regexp.MustCompile(`(?i)\bCREATE\s+(UNIQUE\s+)?INDEX\b(\s+CONCURRENTLY\b)?`)
	lockTimeout  = regexp.MustCompile(`(?i)\bSET\s+(LOCAL\s+)?lock_timeout\b`)
	noTxn        = regexp.MustCompile(`(?m)^--\s*\+goose\s+NO\s+TRANSACTION\s*$`)
	sqlComment   = regexp.MustCompile(`--[^\n]*`)
	numberPrefix = regexp.MustCompile(`^(\d+)_`)
)

// onlineProblems returns what keeps a Postgres migration from running
// while instances serve: an index built without CONCURRENTLY (it blocks
// writes to its table while it is built), CONCURRENTLY inside goose's
// transaction (Postgres refuses it), or no lock_timeout (a statement that
// waits for a lock stalls every query queued behind it).
func onlineProblems(sql string) []string {
	var problems []string
	code := sqlComment.ReplaceAllString(sql, "")
	concurrently := false
	for _, m := range createIndex.FindAllStringSubmatch(code, -1) {
		if m[2] == "" {
			problems = append(problems, fmt.Sprintf("%q builds an index without CONCURRENTLY", strings.TrimSpace(m[0])))
		} else {
			concurrently = true
		}
	}
	if concurrently && !noTxn.MatchString(sql) {
		problems = append(problems, "CREATE INDEX CONCURRENTLY needs the annotation -- +goose NO TRANSACTION")
	}
	if !lockTimeout.MatchString(code) {
		problems = append(problems, "sets no lock_timeout (SET LOCAL lock_timeout = '5s' in a transaction, SET lock_timeout without)")
	}
	return problems
}

func TestPostgresMigrationsRunOnline(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(Postgres(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		m := numberPrefix.FindStringSubmatch(name)
		if m == nil {
			t.Errorf("%s: no number prefix", name)
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n <= lastOfV1 {
			continue
		}
		b, err := fs.ReadFile(Postgres(), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range onlineProblems(string(b)) {
			t.Errorf("migrations/postgres/%s %s (docs/upgrading.md#compatibility-during-an-upgrade)", name, p)
		}
	}
}

// TestOnlineProblems holds the check to what it must catch and pass.
func TestOnlineProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sql string
		want      []string // substrings, one per problem
	}{
		{"online index", "-- +goose Up\n-- +goose NO TRANSACTION\nSET lock_timeout = '5s';\nCREATE INDEX CONCURRENTLY IF NOT EXISTS runs_x_idx ON runs (x);\n", nil},
		{"new column", "-- +goose Up\nSET LOCAL lock_timeout = '5s';\nALTER TABLE leases ADD COLUMN note text;\n", nil},
		{"blocking index", "-- +goose Up\nSET LOCAL lock_timeout = '5s';\ncreate unique index runs_x_idx on runs (x);\n", []string{"without CONCURRENTLY"}},
		{"concurrently in a transaction", "-- +goose Up\nSET lock_timeout = '5s';\nCREATE INDEX CONCURRENTLY runs_x_idx ON runs (x);\n", []string{"NO TRANSACTION"}},
		{"no lock_timeout", "-- +goose Up\nALTER TABLE leases ADD COLUMN note text;\n", []string{"lock_timeout"}},
		{"lock_timeout only in a comment", "-- +goose Up\n-- SET lock_timeout = '5s';\nALTER TABLE leases ADD COLUMN note text;\n", []string{"lock_timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := onlineProblems(tc.sql)
			if len(got) != len(tc.want) {
				t.Fatalf("onlineProblems = %q, want %d problem(s) naming %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to name %q", i, got[i], w)
				}
			}
		})
	}
}
