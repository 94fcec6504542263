package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestRunCredentials: `leaseapi credentials` creates a credential on the
// database and prints its token once, lists it without a secret, and
// revokes it; a served API then takes the token, and after the revocation
// stays closed. It runs on both stores.
func TestRunCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(t *testing.T) map[string]string
	}{
		{"SQLite", func(t *testing.T) map[string]string {
			return map[string]string{"LEASEAPI_SQLITE_PATH": filepath.Join(t.TempDir(), "leaseapi.db")}
		}},
		{"Postgres", func(t *testing.T) map[string]string {
			return map[string]string{"LEASEAPI_DATABASE_URL": repotest.NewPostgresURL(t)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env(t)
			setEnv(t, env)
			cli := func(args ...string) string {
				t.Helper()
				var stdout, stderr bytes.Buffer
				if err := run(t.Context(), append([]string{"credentials"}, args...), &stdout, &stderr); err != nil {
					t.Fatalf("credentials %q: %v\n%s", args, err, stderr.String())
				}
				return stdout.String()
			}
			token := strings.TrimSpace(cli("create", "--name", "ops", "--role", "admin", "--scope", "team-a:", "--scope", "*"))
			id, secret, ok := leaseapi.ParseToken(token)
			if !ok {
				t.Fatalf("create printed %q, want a token", token)
			}
			list := cli("list")
			if !strings.Contains(list, id) || !strings.Contains(list, "ops") || !strings.Contains(list, "admin") || strings.Contains(list, secret) {
				t.Errorf("list:\n%s", list)
			}

			if tc.name == "Postgres" { // the embedded store serves one process: revoke while stopped
				env["LEASEAPI_ADDR"] = "127.0.0.1:0"
				setEnv(t, env)
				srv := startServer(t, func(ctx context.Context, stderr io.Writer) error { return run(ctx, nil, io.Discard, stderr) })
				get := func(token string) int {
					req, _ := http.NewRequest(http.MethodGet, srv.url+"/whoami", nil)
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					return resp.StatusCode
				}
				if got := get(token); got != http.StatusOK {
					t.Errorf("whoami with the created token: %d", got)
				}
				if got := get(id + ".wrong"); got != http.StatusUnauthorized {
					t.Errorf("whoami with a wrong secret: %d", got)
				}
				if err := srv.stop(); err != nil {
					t.Fatal(err)
				}
			}
			if out := cli("revoke", id); !strings.Contains(out, id) {
				t.Errorf("revoke printed %q", out)
			}
			if list := cli("list"); strings.Contains(list, id) {
				t.Errorf("list after revoke:\n%s", list)
			}
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), []string{"credentials", "revoke", id}, &stdout, &stderr); err == nil {
				t.Error("revoking again succeeded")
			}
			for _, args := range [][]string{
				{"credentials"}, {"credentials", "nuke"}, {"credentials", "create", "--name", "x", "--role", "root", "--scope", "*"},
				{"credentials", "create", "--name", "x", "--role", "read", "--scope", "team-a"}, {"credentials", "revoke"},
			} {
				if err := run(t.Context(), args, &stdout, &stderr); err == nil {
					t.Errorf("run(%q) succeeded, want a usage error", args)
				}
			}
		})
	}
}
