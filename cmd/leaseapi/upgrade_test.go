package main

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestRunUpgrade: a serving instance is listed by `upgrade status` and
// deletes its record when it stops; `upgrade finalize` is refused while a
// live instance runs an older build, naming it, and raises the level
// once none does; a database finalized above this build's level is not
// served.
func TestRunUpgrade(t *testing.T) {
	dsn := repotest.NewPostgresURL(t)
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	env := map[string]string{"LEASEAPI_DATABASE_URL": dsn, "LEASEAPI_ADDR": "127.0.0.1:0"}
	setEnv(t, env)
	cli := func(args ...string) (string, error) {
		t.Helper()
		var stdout bytes.Buffer
		err := run(t.Context(), append([]string{"upgrade"}, args...), &stdout, io.Discard)
		return stdout.String(), err
	}

	srv := startServer(t, func(ctx context.Context, stderr io.Writer) error { return run(ctx, nil, io.Discard, stderr) })
	recorded := srv.logs.records(t, "instance recorded")
	if len(recorded) != 1 {
		t.Fatalf("want one \"instance recorded\" line\nlogs:\n%s", srv.logs)
	}
	id := recorded[0]["instance"].(string)
	status, err := cli("status")
	if err != nil || !strings.Contains(status, id) || !strings.Contains(status, "finalized feature level: 1") {
		t.Fatalf("upgrade status = %q, %v; want the serving instance %s and level 1", status, err, id)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	if status, _ := cli("status"); strings.Contains(status, id) {
		t.Errorf("upgrade status after the instance stopped:\n%s\nwant it gone", status)
	}

	// A database that v1.0.0 instances still serve is at level 0; one
	// older instance of a later release holds the finalize up.
	exec(`UPDATE feature_level SET level = 0`)
	exec(`INSERT INTO instances (id, host, version, feature_level) VALUES ('00000000000000aa', 'pod-old', '1.0.9', 0)`)
	if out, err := cli("finalize"); err == nil || !strings.Contains(err.Error(), "pod-old runs 1.0.9") {
		t.Fatalf("finalize with an older live instance = %q, %v; want it refused naming pod-old", out, err)
	}
	exec(`DELETE FROM instances WHERE id = '00000000000000aa'`)
	if out, err := cli("finalize"); err != nil || !strings.Contains(out, "finalized at feature level 1") {
		t.Fatalf("finalize = %q, %v; want level 1", out, err)
	}

	exec(`UPDATE feature_level SET level = $1`, leaseapi.FeatureLevel+1)
	err = run(t.Context(), nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "cannot serve it") {
		t.Fatalf("serve on a database finalized above this build = %v, want a refusal", err)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM instances`).Scan(&n); err != nil || n != 0 {
		t.Errorf("instances left by the refused start: %d, %v; want 0", n, err)
	}
}
