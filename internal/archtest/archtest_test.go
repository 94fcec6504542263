package archtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/leaseapi/leaseapi"

// pkg is the part of `go list -json` the rules read.
type pkg struct {
	ImportPath   string
	Imports      []string // of the non-test files
	Deps         []string // transitive, of the non-test files
	TestImports  []string // of _test.go files in the package
	XTestImports []string // of _test.go files in package x_test
}

// rule is one import direction. applies selects the packages it constrains;
// check returns what is wrong with one of them.
type rule struct {
	name    string
	applies func(path string) bool
	check   func(p pkg) []string
}

// isStd reports whether path is in the standard library: its first element
// has no dot (the same test `go` itself uses for module paths).
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// under reports whether path is pkg or one of its sub-packages.
func under(path, pkg string) bool {
	return path == pkg || strings.HasPrefix(path, pkg+"/")
}

func local(rel string) string { return module + "/" + rel }

// forbid returns the entries of list under any of the forbidden packages.
func forbid(what string, list []string, forbidden ...string) []string {
	var bad []string
	for _, dep := range list {
		for _, f := range forbidden {
			if under(dep, f) {
				bad = append(bad, fmt.Sprintf("%s %s", what, dep))
			}
		}
	}
	return bad
}

// rules are the import directions of docs/architecture.md.
var rules = []rule{
	{
		name:    "leaseapi imports the standard library only",
		applies: func(path string) bool { return path == module },
		check: func(p pkg) []string {
			var bad []string
			for _, dep := range p.Deps {
				if !isStd(dep) {
					bad = append(bad, "depends on "+dep)
				}
			}
			return bad
		},
	},
	{
		name:    "handlers never reach the database",
		applies: func(path string) bool { return under(path, local("handlers")) },
		check: func(p pkg) []string {
			return forbid("depends on", p.Deps, local("repo"), local("migrations"),
				"github.com/jmoiron/sqlx", "github.com/lib/pq", "modernc.org/sqlite", "github.com/pressly/goose")
		},
	},
	{
		name:    "repo never speaks HTTP",
		applies: func(path string) bool { return under(path, local("repo")) },
		check: func(p pkg) []string {
			bad := forbid("imports", p.Imports, "net/http")
			return append(bad, forbid("depends on", p.Deps, local("api"), local("handlers"), local("jobs"), "github.com/go-chi/chi")...)
		},
	},
	{
		// The wrappers and loops use only the leaseapi.Store interface: a
		// store is handed to them, never built or reached around.
		name:    "repo wraps a Store and speaks no SQL",
		applies: func(path string) bool { return path == local("repo") },
		check: func(p pkg) []string {
			bad := forbid("imports", p.Imports, "database/sql")
			return append(bad, forbid("depends on", p.Deps, local("repo/postgres"), local("repo/sqlite"),
				local("repo/internal"), local("migrations"), "database/sql", "github.com/jmoiron/sqlx",
				"github.com/lib/pq", "modernc.org/sqlite", "github.com/pressly/goose")...)
		},
	},
	{
		name:    "a store never imports the other store or the wrappers",
		applies: func(path string) bool { return under(path, local("repo/postgres")) },
		check: func(p pkg) []string {
			return forbid("depends on", p.Deps, local("repo/sqlite"), "modernc.org/sqlite")
		},
	},
	{
		name:    "a store never imports the other store or the wrappers",
		applies: func(path string) bool { return under(path, local("repo/sqlite")) },
		check: func(p pkg) []string {
			return forbid("depends on", p.Deps, local("repo/postgres"), "github.com/lib/pq")
		},
	},
	{
		name: "a store never imports the other store or the wrappers",
		applies: func(path string) bool {
			return under(path, local("repo/postgres")) || under(path, local("repo/sqlite"))
		},
		check: func(p pkg) []string {
			var bad []string
			for _, dep := range p.Deps {
				if dep == local("repo") {
					bad = append(bad, "depends on "+dep)
				}
			}
			return bad
		},
	},
	{
		// The decisions are pure functions of what a store read: no rows,
		// no driver, no store.
		name:    "repo/decide is pure",
		applies: func(path string) bool { return under(path, local("repo/decide")) },
		check: func(p pkg) []string {
			return forbid("depends on", p.Deps, "database/sql", "github.com/jmoiron/sqlx", "github.com/lib/pq",
				"modernc.org/sqlite", local("migrations"), local("repo/postgres"), local("repo/sqlite"), local("repo/internal"))
		},
	},
	{
		// Only a store applies the schema (cmd/leaseapi migrates through
		// one).
		name: "only the stores import migrations",
		applies: func(path string) bool {
			return !under(path, local("repo/postgres")) && !under(path, local("repo/sqlite"))
		},
		check: func(p pkg) []string {
			return forbid("imports", p.Imports, local("migrations"))
		},
	},
	{
		name:    "api is the wire contract, not an implementation",
		applies: func(path string) bool { return under(path, local("api")) },
		check: func(p pkg) []string {
			return forbid("depends on", p.Deps, local("handlers"), local("repo"), local("jobs"), local("migrations"))
		},
	},
	{
		name:    "jobs is an HTTP client of api",
		applies: func(path string) bool { return under(path, local("jobs")) },
		check: func(p pkg) []string {
			return forbid("depends on", p.Deps, local("handlers"), local("repo"), local("migrations"))
		},
	},
	{
		// The console is static files and the handler that serves them:
		// everything it shows it reads through the public API from the
		// browser, so it needs no package of this module and nothing outside
		// the standard library (handlers mounts it).
		name:    "ui is static files served with the standard library",
		applies: func(path string) bool { return under(path, local("ui")) },
		check: func(p pkg) []string {
			var bad []string
			for _, dep := range p.Deps {
				if !isStd(dep) {
					bad = append(bad, "depends on "+dep)
				}
			}
			return bad
		},
	},
	{
		name:    "repotest, testca and dockertest never ship",
		applies: func(path string) bool { return path != local("repo/repotest") && path != local("internal/testca") },
		check: func(p pkg) []string {
			return forbid("depends on", p.Deps, local("repo/repotest"), local("internal/testca"), "github.com/ory/dockertest")
		},
	},
	{
		// The strict spec validator of the tests, and its JSON Schema library.
		name:    "apitest never ships",
		applies: func(path string) bool { return path != local("api/apitest") },
		check: func(p pkg) []string {
			return forbid("depends on", p.Deps, local("api/apitest"), "github.com/santhosh-tekuri/jsonschema")
		},
	},
	{
		// The closed form of the spec: for the tests (apitest), the tools
		// that hand it to the other clients' tests (closespec) and the
		// client's generator, never for what ships.
		name: "closedform never ships",
		applies: func(path string) bool {
			return path != local("api/apitest") && !under(path, local("api/internal")) && path != local("api/client/internal/generate")
		},
		check: func(p pkg) []string {
			return forbid("depends on", p.Deps, local("api/internal/closedform"))
		},
	},
	{
		name:    "only repotest imports dockertest, even in tests",
		applies: func(path string) bool { return path != local("repo/repotest") },
		check: func(p pkg) []string {
			all := slices.Concat(p.Imports, p.TestImports, p.XTestImports)
			return forbid("imports", all, "github.com/ory/dockertest")
		},
	},
}

// violations applies every rule to every package.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		for _, r := range rules {
			if !r.applies(p.ImportPath) {
				continue
			}
			for _, v := range r.check(p) {
				out = append(out, fmt.Sprintf("%s %s (rule: %s)", p.ImportPath, v, r.name))
			}
		}
	}
	return out
}

// goList lists the module's packages as built with the given build tags.
func goList(t *testing.T, tags string) []pkg {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	args := []string{"list", "-e", "-json=ImportPath,Imports,Deps,TestImports,XTestImports,Error", "-tags=" + tags, "./..."}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			pkg
			Error *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil && strings.Contains(p.Error.Err, "build constraints exclude all Go files") {
			continue // a package of other tags; the other tag set lists it
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p.pkg)
	}
	return pkgs
}

func TestImportDirections(t *testing.T) {
	t.Parallel()
	// The chaos harness is built with its own tags; hold it to the same rules.
	for _, tags := range []string{"", "chaos,chaos_mutants"} {
		t.Run("Tags="+tags, func(t *testing.T) {
			t.Parallel()
			pkgs := goList(t, tags)
			var paths []string
			for _, p := range pkgs {
				paths = append(paths, p.ImportPath)
			}
			// The rules mean nothing if the packages they name are gone.
			for _, rel := range []string{"", "api", "handlers", "repo", "repo/postgres", "repo/sqlite", "repo/decide",
				"repo/internal/stores", "repo/repotest", "internal/testca", "cmd/leaseapi", "ui"} {
				path := module
				if rel != "" {
					path = local(rel)
				}
				if !slices.Contains(paths, path) {
					t.Errorf("package %s not found by go list; update the rules", path)
				}
			}
			for _, v := range violations(pkgs) {
				t.Error(v)
			}
		})
	}
}

// TestRulesCatchViolations is the negative control: each package below
// breaks one rule, and the checker must say so.
func TestRulesCatchViolations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		pkg  pkg
		want string
	}{
		{
			name: "RootImportsChi",
			pkg:  pkg{ImportPath: module, Deps: []string{"context", "github.com/go-chi/chi/v5"}},
			want: "depends on github.com/go-chi/chi/v5",
		},
		{
			name: "HandlersImportRepo",
			pkg:  pkg{ImportPath: local("handlers"), Deps: []string{local("repo")}},
			want: "depends on " + local("repo"),
		},
		{
			name: "HandlersReachPqTransitively",
			pkg:  pkg{ImportPath: local("handlers"), Deps: []string{"github.com/lib/pq"}},
			want: "depends on github.com/lib/pq",
		},
		{
			name: "RepoImportsNetHTTP",
			pkg:  pkg{ImportPath: local("repo"), Imports: []string{"net/http"}},
			want: "imports net/http",
		},
		{
			name: "RepoImportsAPI",
			pkg:  pkg{ImportPath: local("repo"), Deps: []string{local("api")}},
			want: "depends on " + local("api"),
		},
		{
			name: "WrappersReachPostgres",
			pkg:  pkg{ImportPath: local("repo"), Deps: []string{module, local("repo/postgres")}},
			want: "depends on " + local("repo/postgres"),
		},
		{
			name: "WrappersSpeakSQL",
			pkg:  pkg{ImportPath: local("repo"), Imports: []string{"context"}, Deps: []string{"github.com/jmoiron/sqlx"}},
			want: "depends on github.com/jmoiron/sqlx",
		},
		{
			name: "PostgresImportsSQLite",
			pkg:  pkg{ImportPath: local("repo/postgres"), Deps: []string{local("repo/sqlite")}},
			want: "depends on " + local("repo/sqlite"),
		},
		{
			name: "SQLiteImportsPq",
			pkg:  pkg{ImportPath: local("repo/sqlite"), Deps: []string{"github.com/lib/pq"}},
			want: "depends on github.com/lib/pq",
		},
		{
			name: "StoreImportsWrappers",
			pkg:  pkg{ImportPath: local("repo/sqlite"), Deps: []string{local("repo")}},
			want: "depends on " + local("repo"),
		},
		{
			name: "DecideReadsRows",
			pkg:  pkg{ImportPath: local("repo/decide"), Deps: []string{module, "github.com/jmoiron/sqlx"}},
			want: "depends on github.com/jmoiron/sqlx",
		},
		{
			name: "CmdImportsMigrations",
			pkg:  pkg{ImportPath: local("cmd/leaseapi"), Imports: []string{local("migrations")}},
			want: "imports " + local("migrations"),
		},
		{
			name: "CmdShipsRepotest",
			pkg:  pkg{ImportPath: local("cmd/leaseapi"), Deps: []string{local("repo/repotest")}},
			want: "depends on " + local("repo/repotest"),
		},
		{
			name: "CmdShipsAPITest",
			pkg:  pkg{ImportPath: local("cmd/leaseapi"), Deps: []string{local("api/apitest")}},
			want: "depends on " + local("api/apitest"),
		},
		{
			name: "ClientShipsClosedForm",
			pkg:  pkg{ImportPath: local("api/client"), Deps: []string{local("api/internal/closedform")}},
			want: "depends on " + local("api/internal/closedform"),
		},
		{
			name: "HandlerTestImportsDockertest",
			pkg:  pkg{ImportPath: local("handlers"), XTestImports: []string{"github.com/ory/dockertest/v3"}},
			want: "imports github.com/ory/dockertest/v3",
		},
		{
			name: "UIImportsAPI",
			pkg:  pkg{ImportPath: local("ui"), Deps: []string{local("api")}},
			want: "depends on " + local("api"),
		},
		{
			name: "JobsImportHandlers",
			pkg:  pkg{ImportPath: local("jobs"), Deps: []string{local("handlers")}},
			want: "depends on " + local("handlers"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := violations([]pkg{tt.pkg})
			if len(got) != 1 || !strings.Contains(got[0], tt.want) {
				t.Errorf("violations() = %q, want one containing %q", got, tt.want)
			}
		})
	}

	t.Run("AllowedImports", func(t *testing.T) {
		t.Parallel()
		ok := []pkg{
			{ImportPath: module, Deps: []string{"context", "errors", "regexp", "time"}},
			{ImportPath: local("handlers"), Deps: []string{module, local("api"), local("ui"), "github.com/go-chi/chi/v5"},
				XTestImports: []string{local("repo"), local("repo/repotest")}},
			{ImportPath: local("repo"), Deps: []string{module, local("repo/decide"), local("schedule")}},
			{ImportPath: local("repo/postgres"), Imports: []string{"database/sql", "github.com/lib/pq", local("migrations")},
				Deps: []string{module, local("migrations"), local("repo/decide"), local("repo/internal/stores")}},
			{ImportPath: local("repo/decide"), Deps: []string{module, local("schedule"), "time"}},
			{ImportPath: local("repo/repotest"), Imports: []string{"github.com/ory/dockertest/v3"}, Deps: []string{"github.com/ory/dockertest/v3"}},
			{ImportPath: local("cmd/leaseapi"), Deps: []string{local("handlers"), local("repo"), local("repo/postgres"), local("migrations")},
				TestImports: []string{local("repo/repotest")}},
		}
		if got := violations(ok); len(got) != 0 {
			t.Errorf("violations() = %q, want none", got)
		}
	})
}
