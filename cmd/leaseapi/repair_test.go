package main

import (
	"bytes"
	"database/sql"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeReportsJobsAhead: a job whose last completed tick lies two days
// ahead (a replica with a fast clock left it, written here with SQL) is
// named at start in one warning and counted by leaseapi_jobs_ticks_ahead;
// after POST /leases/{jobId}/repair the gauge falls to 0.
func TestServeReportsJobsAhead(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	cfg.StatsInterval = 10 * time.Millisecond
	srv := startServe(t, cfg)
	job := strings.TrimPrefix(exerciseLease(t, srv.url), srv.url+"/leases/")
	if got := srv.logs.records(t, jobsAheadMessage); len(got) != 0 {
		t.Errorf("warning of jobs ahead on a sound database: %v", got)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", "file:"+cfg.SQLitePath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `UPDATE leases SET last_completed_tick = $1 WHERE job_id = $2`,
		time.Now().Add(48*time.Hour).UnixMilli(), job); err != nil {
		t.Fatal(err)
	}

	srv = startServe(t, cfg)
	got := srv.logs.records(t, jobsAheadMessage)
	if len(got) != 1 || got[0]["level"] != "WARN" || got[0]["count"] != 1.0 || !strings.Contains(strings.Join(toStrings(got[0]["job_ids"]), ","), job) {
		t.Errorf("warning of jobs ahead at start: %v, want one WARN naming %s", got, job)
	}
	waitGauge := func(want string) {
		t.Helper()
		line := []byte("\nleaseapi_jobs_ticks_ahead " + want + "\n")
		for range 1000 {
			if bytes.Contains(getMetrics(t, srv.url, ""), line) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("leaseapi_jobs_ticks_ahead is not %s after 1000 refreshes", want)
	}
	waitGauge("1")
	if r := do(t, http.MethodPost, srv.url+"/leases/"+job+"/repair", `{"reason":"clock was fast"}`); r.status != http.StatusOK {
		t.Fatalf("repair = %d %v, want 200", r.status, r.body)
	}
	waitGauge("0")
}

// jobsAheadMessage is the start's warning of jobs ahead.
const jobsAheadMessage = "jobs have ticks ahead of the database clock by more than LEASEAPI_MAX_TICK_AHEAD " +
	"(a replica's clock was fast); repair each with POST /leases/{jobId}/repair or leasectl repair JOB"

func toStrings(v any) []string {
	var out []string
	if vs, ok := v.([]any); ok {
		for _, s := range vs {
			if s, ok := s.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
