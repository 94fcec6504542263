package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestMissedTicksEndToEnd: replicas run three jobs every second and send
// their schedule; then every replica is killed. The ticks that follow are
// recorded missed (runs without a holder) within grace + sweep, the
// counters and the overdue gauge say so; replicas come back, the ticks run
// again, the jobs are no longer overdue, and the missed counter of the
// metrics equals the sum of the leases' missedTicks and of the missed runs.
func TestMissedTicksEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("skipping the end-to-end test in -short mode")
	}
	const (
		grace = 300 * time.Millisecond
		sweep = 500 * time.Millisecond
		ttl   = 2 * time.Second
	)
	// A database of its own: every leaseapi on a database sweeps all of
	// its scheduled jobs, and this test compares one instance's counter
	// with the jobs' counters.
	bin, procs, baseURL, c := startSweepingService(t, "leaseapi-missed", grace, sweep)

	jobIDs := []string{"missed-job-a", "missed-job-b", "missed-job-c"}
	args := []string{"-api", baseURL, "-ttl", ttl.String(), "-heartbeat", "300ms",
		"-request-timeout", "1s", "-work", "100ms", "-log-level", "warn"}
	for _, id := range jobIDs {
		args = append(args, "-job", id+"=* * * * * *")
	}
	startReplicas := func(round int) []*process {
		var ps []*process
		for i := range 2 {
			owner := fmt.Sprintf("missed-replica-%d-%d", round, i)
			ps = append(ps, procs.start(owner, filepath.Join(bin, "cronreplica"), append(slices.Clone(args), "-owner", owner)))
		}
		return ps
	}
	reps := startReplicas(1)
	waitAllJobsRan(t, c, jobIDs)
	for _, id := range jobIDs {
		if l := getLease(t, c, id); l.Schedule == nil || *l.Schedule != "* * * * * *" || l.GraceMs == nil || *l.GraceMs != grace.Milliseconds() {
			t.Fatalf("%s: the replicas' schedule is not registered: schedule %v grace %v", id, l.Schedule, l.GraceMs)
		}
	}

	// Every replica dies. A lease held then expires after its TTL; the
	// ticks after that are missed.
	for _, p := range reps {
		p.signal(syscall.SIGKILL)
	}
	killedAt := time.Now()
	t.Logf("killed every replica at %s", killedAt.Format("15:04:05.000"))
	poll(t, "every job has missed ticks and is overdue", 45*time.Second, func() bool {
		for _, id := range jobIDs {
			if getLease(t, c, id).MissedTicks < 2 {
				return false
			}
		}
		return metric(t, baseURL, "leaseapi_jobs_overdue") >= float64(len(jobIDs))
	})
	for _, id := range jobIDs {
		var missed []client.Run
		for _, r := range allRuns(t, c, id) {
			if r.Outcome == client.RunOutcomeMissed {
				missed = append(missed, r)
			}
		}
		if len(missed) == 0 {
			t.Fatalf("%s: no missed run in the history", id)
		}
		for _, r := range missed {
			if r.Token != nil || r.Owner != nil || r.StartedAt != nil || r.Tick == nil ||
				r.EndedAt == nil || r.EndedAt.Sub(*r.Tick) != grace || r.Tick.Before(killedAt.Add(-time.Second)) {
				t.Errorf("%s: missed run %+v: want no holder, a tick after the kill, ended at tick + grace", id, r)
			}
		}
	}

	// The replicas come back: the ticks run again and the jobs are not
	// overdue any more.
	backAt := time.Now()
	reps = startReplicas(2)
	poll(t, "every job ran again and none is overdue", 45*time.Second, func() bool {
		for _, id := range jobIDs {
			l := getLease(t, c, id)
			if l.LastCompletedTick == nil || l.LastCompletedTick.Before(backAt) {
				return false
			}
		}
		return metric(t, baseURL, "leaseapi_jobs_overdue") == 0
	})
	for _, p := range reps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range reps {
		if err := p.wait(15 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", p.name, err)
		}
	}

	// The stories agree once nothing more is decided: with the schedules
	// forgotten (no replica runs the jobs now, so every tick would be
	// missed), the instance's counter of missed runs, the leases' counters
	// and the history.
	for _, id := range jobIDs {
		if resp, err := c.ForgetScheduleWithResponse(context.Background(), id); err != nil || resp.JSON200 == nil {
			t.Fatalf("forget the schedule of %s: %v %v", id, err, resp)
		}
	}
	poll(t, "the missed counter equals the leases' counters", 30*time.Second, func() bool {
		var fromLeases int64
		for _, id := range jobIDs {
			fromLeases += getLease(t, c, id).MissedTicks
		}
		counted := metric(t, baseURL, `leaseapi_runs_finished_total{outcome="missed"}`)
		var recorded int64
		for _, id := range jobIDs {
			for _, r := range allRuns(t, c, id) {
				if r.Outcome == client.RunOutcomeMissed {
					recorded++
				}
			}
		}
		t.Logf("missed: counter %v, leases %d, runs %d", counted, fromLeases, recorded)
		return counted == float64(fromLeases) && recorded == fromLeases
	})
}

// startSweepingService builds the binaries and starts one leaseapi named
// name on a database of its own, with the missed-tick grace and sweep
// interval given; it returns where the binaries are, the processes (which
// the test's cleanup kills), the service's URL and a client of it.
func startSweepingService(t *testing.T, name string, grace, sweep time.Duration) (string, *processes, string, *client.ClientWithResponses) {
	t.Helper()
	return startService(t, name, repotest.NewPostgresURL(t),
		"LEASEAPI_MISSED_GRACE="+grace.String(), "LEASEAPI_MISSED_SWEEP="+sweep.String())
}

// startService builds the binaries and starts a leaseapi named name on the
// database dsn, with the end-to-end tests' settings and env; it returns
// the binaries' directory, the processes (their directory is the test's
// own), the service's URL and a client of it.
func startService(t *testing.T, name, dsn string, env ...string) (string, *processes, string, *client.ClientWithResponses) {
	t.Helper()
	bin := buildBinaries(t)
	procs := &processes{t: t, dir: t.TempDir()}
	t.Cleanup(procs.killAll)
	addr := freeAddr(t)
	baseURL := "http://" + addr
	service := procs.start(name, filepath.Join(bin, "leaseapi"), nil, append([]string{
		"LEASEAPI_ADDR=" + addr,
		"LEASEAPI_DATABASE_URL=" + dsn,
		"LEASEAPI_LOG_LEVEL=warn",
		"LEASEAPI_MIN_TTL=1s",
		"LEASEAPI_REQUEST_TIMEOUT=2s",
	}, env...)...)
	waitReady(t, baseURL, service)
	c, err := client.NewClientWithResponses(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	return bin, procs, baseURL, c
}

// allRuns returns the whole run history of jobID, missed runs included.
func allRuns(t *testing.T, c *client.ClientWithResponses, jobID string) []client.Run {
	t.Helper()
	limit := 1000
	resp, err := c.ListRunsWithResponse(context.Background(), jobID, &client.ListRunsParams{Limit: &limit})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("runs of %s: %v %v", jobID, err, resp)
	}
	return resp.JSON200.Runs
}

// poll checks cond every 200 ms until it holds, or fails the test after
// limit (a hang guard, not a measurement).
func poll(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, limit)
		}
	}
}

// metric reads one series of leaseapi's /metrics: name with its labels as
// the exposition format writes them, e.g. leaseapi_jobs_overdue or
// leaseapi_runs_finished_total{outcome="missed"}.
func metric(t *testing.T, baseURL, series string) float64 {
	t.Helper()
	resp, err := http.Get(baseURL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == series {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return v
		}
	}
	t.Fatalf("metric %s not exported", series)
	return 0
}
