package handlers_test

import (
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
	"github.com/leaseapi/leaseapi/repo/repotest"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// TestRepairOverHTTP: POST /leases/{jobId}/repair mends a job that a grant
// of a tick two days ahead, released succeeded, had made refuse every
// later tick (tick_done): the next tick is granted, the run ahead is listed
// discarded (valid against the spec), the repair is logged with who and
// why, and a second repair changes nothing.
func TestRepairOverHTTP(t *testing.T) {
	t.Parallel()
	forEachStoreSQL(t, func(t *testing.T, store leaseapi.Store, setTick func(t *testing.T, job string, tick time.Time)) {
		b := setup(t, store, defaultOptions())
		job := b.job("repair")

		// The fast replica's grant of a tick two days ahead, released
		// succeeded: its tick written with SQL, as such a replica left it
		// before ticks ahead were refused.
		probe := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "probe"}))
		wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "probe", Token: probe.Token}))
		l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "fast"}))
		setTick(t, job, probe.AcquiredAt.Add(48*time.Hour).Truncate(time.Second))
		wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "fast", Token: l.Token}))
		next := api.FormatTime(probe.AcquiredAt.Truncate(time.Second).Add(time.Second))
		wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: &next}), http.StatusConflict, api.CodeTickDone)

		repaired := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/repair", body: `{"reason":"clock two days fast"}`}))
		// No tick succeeded before: the last completed tick goes back to the
		// oldest kept history, now - the run retention (7 days by default).
		floor := probe.AcquiredAt.Add(-handlers.DefaultRepairRetention)
		if lct := repaired.LastCompletedTick; lct == nil || lct.Before(floor) || lct.After(floor.Add(time.Minute)) || repaired.Token != l.Token {
			t.Errorf("repair: lastCompletedTick %v, token %d; want about %v, %d", lct, repaired.Token, floor, l.Token)
		}
		if lines := b.logs.lines(t, map[string]any{"msg": "job repaired", "job_id": job, "reason": "clock two days fast"}); len(lines) != 1 {
			t.Errorf("log of the repair: got %d lines, want 1", len(lines))
		}
		var runs api.RunList
		decode(t, b.do(t, request{method: http.MethodGet, path: "/leases/" + job + "/runs"}).body, &runs)
		if len(runs.Runs) != 2 || runs.Runs[0].Outcome != leaseapi.OutcomeDiscarded {
			t.Errorf("runs after the repair: %+v, want the run ahead discarded first", runs.Runs)
		}
		var recent api.RecentRunList
		decode(t, b.do(t, request{method: http.MethodGet, path: "/runs?outcome=discarded,succeeded"}).body, &recent)
		wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: &next}))

		// Idempotent, and an empty body is a repair without a reason.
		again := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/repair", body: `{}`}))
		if again.Token != repaired.Token+1 || again.State != "held" {
			t.Errorf("second repair: token %d, state %s; want the new grant %d held, untouched", again.Token, again.State, repaired.Token+1)
		}

		wantProblem(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + b.job("nobody") + "/repair", body: `{}`}),
			http.StatusNotFound, api.CodeNotFound)
		before := b.snapshot(t)
		for _, tc := range []struct{ name, body string }{
			{"ReasonTooLong", `{"reason":"` + strings.Repeat("x", 257) + `"}`},
			{"ReasonControl", `{"reason":"a\nb"}`},
			{"UnknownField", `{"window":"1h"}`},
			{"NoBody", ``},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := request{method: http.MethodPost, path: "/leases/" + job + "/repair", body: tc.body}
				if tc.body == "" {
					req.header = http.Header{"Content-Type": {"application/json"}}
				}
				wantProblem(t, b.doInvalid(t, req), http.StatusBadRequest, api.CodeInvalidRequest)
			})
		}
		if after := b.snapshot(t); !after.equal(before) {
			t.Error("a refused repair changed the store")
		}
	})
}

// forEachStoreSQL runs fn as a parallel subtest against each real store,
// with setTick, which moves a job's current grant (the lease's tick and
// its run's) to tick with SQL.
func forEachStoreSQL(t *testing.T, fn func(t *testing.T, store leaseapi.Store, setTick func(t *testing.T, job string, tick time.Time))) {
	t.Helper()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "leases.db")
		store, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		if err := store.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		fn(t, store, func(t *testing.T, job string, tick time.Time) {
			t.Helper()
			for _, q := range []string{
				`UPDATE runs SET tick = $2 WHERE job_id = $1 AND token = (SELECT token FROM leases WHERE job_id = $1)`,
				`UPDATE leases SET tick = $2 WHERE job_id = $1`,
			} {
				if _, err := db.ExecContext(t.Context(), q, job, tick.UnixMilli()); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		dsn := repotest.PostgresURL(t)
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		fn(t, openPostgres(t), func(t *testing.T, job string, tick time.Time) {
			t.Helper()
			for _, q := range []string{
				`UPDATE runs SET tick = $2 WHERE job_id = $1 AND token = (SELECT token FROM leases WHERE job_id = $1)`,
				`UPDATE leases SET tick = $2 WHERE job_id = $1`,
			} {
				if _, err := db.ExecContext(t.Context(), q, job, tick); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
}
