// Package e2e proves the whole product with real processes: one leaseapi on
// Postgres and five cronreplica processes running ten jobs every second,
// while one replica is killed and another is frozen past its TTL. It runs
// with `make test` (about 45 s of wall time) and is skipped with -short.
// LEASEAPI_E2E_LOGS=1 logs the end of every process's output even when the
// test passes.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

func TestMain(m *testing.M) { repotest.WrapTestMain(m) }

// The scenario. Wall-clock durations are unavoidable here: the replicas are
// real processes on the real clock. The assertions do not depend on timing
// beyond the 95 % liveness bound, which the scenario meets with a wide margin
// (a killed or frozen replica costs about two ticks per job it held).
const (
	replicas  = 5
	jobCount  = 10
	ttl       = 2 * time.Second
	heartbeat = 150 * time.Millisecond // two or three heartbeats per run
	// requestTimeout: at every second all 50 acquires arrive at once, and
	// on a small, busy CI machine the slowest take a few hundred milliseconds.
	requestTimeout = time.Second
	work           = 400 * time.Millisecond
	// settle bounds the wait for every job to have run once: the replicas
	// are up. The window of counted ticks starts at the second after next.
	settle      = 30 * time.Second
	window      = 32 * time.Second         // the counted ticks
	killAfter   = 8300 * time.Millisecond  // into the window, mid-run: SIGKILL replica-1
	pauseAfter  = 15300 * time.Millisecond // into the window, mid-run: SIGSTOP a replica ...
	pauseFor    = 5 * time.Second          // ... for more than the TTL, then SIGCONT
	minTicksRan = 0.95
)

// killed is the replica that is SIGKILLed. The one that is frozen is chosen
// at that moment: of the others, the one holding the fewest leases (at least
// one). Every job it holds misses about TTL's worth of ticks, which the
// liveness bound must absorb; what the freeze is there to test needs only one.
const killed = "replica-1"

func TestCronReplicasEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("skipping the end-to-end test in -short mode")
	}
	bin, procs, baseURL, c := startService(t, "leaseapi", repotest.PostgresURL(t))
	dir := procs.dir

	jobIDs := make([]string, jobCount)
	args := []string{"-api", baseURL, "-ttl", ttl.String(), "-heartbeat", heartbeat.String(),
		"-request-timeout", requestTimeout.String(), "-work", work.String(), "-log-level", "warn"}
	for i := range jobIDs {
		jobIDs[i] = fmt.Sprintf("e2e-job-%02d", i)
		args = append(args, "-job", jobIDs[i]+"=* * * * * *")
	}
	owners := make([]string, replicas)
	reps := make(map[string]*process)
	for i := range owners {
		owners[i] = fmt.Sprintf("replica-%d", i)
		reps[owners[i]] = procs.start(owners[i], filepath.Join(bin, "cronreplica"),
			append(slices.Clone(args), "-owner", owners[i], "-record", recordPath(dir, owners[i])))
	}
	waitAllJobsRan(t, c, jobIDs)
	windowStart := time.Now().Truncate(time.Second).Add(2 * time.Second)
	windowEnd := windowStart.Add(window)
	t.Logf("replicas started; counting ticks from %s to %s", windowStart.Format(time.TimeOnly), windowEnd.Format(time.TimeOnly))

	sleepUntil(windowStart.Add(killAfter))
	reps[killed].signal(syscall.SIGKILL)
	killedAt := time.Now()
	t.Logf("SIGKILL %s", killed)

	sleepUntil(windowStart.Add(pauseAfter))
	frozen := freeze(t, c, reps)
	paused := frozen.Owner
	resumedAt := time.Now().Add(pauseFor)
	sleepUntil(resumedAt)
	reps[paused].signal(syscall.SIGCONT)
	t.Logf("SIGSTOP %s while it held %s token %d; SIGCONT after %s", paused, frozen.JobId, frozen.Token, pauseFor)

	sleepUntil(windowEnd)
	for _, owner := range owners {
		if owner != killed {
			reps[owner].signal(syscall.SIGTERM)
		}
	}
	for _, owner := range owners {
		if owner != killed {
			if err := reps[owner].wait(15 * time.Second); err != nil {
				t.Errorf("%s after SIGTERM: %v", owner, err)
			}
		}
	}

	// What the service recorded (database clock) and what the replicas did.
	runs := make(map[string][]client.Run)
	for _, id := range jobIDs {
		runs[id] = listRuns(t, c, id)
	}
	records := make(map[string][]record)
	for _, owner := range owners {
		records[owner] = readRecords(t, recordPath(dir, owner), owner == killed)
	}

	checkNoTickSucceededTwice(t, runs, records)
	checkNoOverlap(t, runs)
	checkRecordsMatchService(t, runs, records)
	checkFrozenRunNotSucceeded(t, runs, records, frozen, resumedAt)
	checkTicksRan(t, runs, windowStart, windowEnd, killed, paused)
	t.Logf("killed %s at %s; froze %s from %s to %s", killed, killedAt.Format("15:04:05.000"),
		paused, resumedAt.Add(-pauseFor).Format("15:04:05.000"), resumedAt.Format("15:04:05.000"))
}

// freeze stops a replica (not the killed one) at a moment it holds a lease,
// and returns that lease as it was after the stop: the owner is the frozen
// replica. Of the replicas holding leases it picks the one holding the
// fewest. Holding is checked again after SIGSTOP; if the replica released
// the lease in between, it is resumed and the choice made again.
func freeze(t *testing.T, c *client.ClientWithResponses, reps map[string]*process) client.Lease {
	t.Helper()
	held := client.StateHeld
	for attempt := 0; attempt < 50; attempt++ {
		resp, err := c.ListLeasesWithResponse(context.Background(), &client.ListLeasesParams{State: &held})
		if err != nil || resp.JSON200 == nil {
			t.Fatalf("list held leases: %v %v", err, resp)
		}
		byOwner := make(map[string][]client.Lease)
		for _, l := range resp.JSON200.Leases {
			if l.Owner != killed {
				byOwner[l.Owner] = append(byOwner[l.Owner], l)
			}
		}
		var candidate []client.Lease
		for _, ls := range byOwner {
			if candidate == nil || len(ls) < len(candidate) {
				candidate = ls
			}
		}
		if candidate == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		p := reps[candidate[0].Owner]
		p.signal(syscall.SIGSTOP)
		l := getLease(t, c, candidate[0].JobId)
		if l.State == client.StateHeld && l.Owner == p.name && l.Token == candidate[0].Token {
			return l
		}
		p.signal(syscall.SIGCONT)
	}
	t.Fatal("no replica held a lease when stopped")
	return client.Lease{}
}

// checkNoTickSucceededTwice: per job, a tick is released succeeded at most
// once, by the service's history and by the replicas' records.
func checkNoTickSucceededTwice(t *testing.T, runs map[string][]client.Run, records map[string][]record) {
	t.Helper()
	type key struct {
		job  string
		tick time.Time
	}
	fromService := make(map[key]int64)
	dupService, dupRecords := 0, 0
	for job, rs := range runs {
		for _, r := range rs {
			if r.Outcome != client.RunOutcomeSucceeded {
				continue
			}
			k := key{job, *r.Tick}
			if prev, ok := fromService[k]; ok {
				dupService++
				t.Errorf("service: %s tick %s succeeded twice, tokens %d and %d", job, r.Tick, prev, *r.Token)
			}
			fromService[k] = *r.Token
		}
	}
	fromRecords := make(map[key]string)
	for owner, rs := range records {
		for _, r := range rs {
			if r.Outcome != "succeeded" {
				continue
			}
			k := key{r.Job, r.tick}
			if prev, ok := fromRecords[k]; ok {
				dupRecords++
				t.Errorf("records: %s tick %s succeeded twice, by %s and %s", r.Job, r.Tick, prev, owner)
			}
			fromRecords[k] = owner
		}
	}
	t.Logf("ticks succeeded twice: %d of %d in the service's history, %d of %d in the records",
		dupService, len(fromService), dupRecords, len(fromRecords))
}

// checkNoOverlap: per job, by the database's clock, every run (grant) ends
// before the next one starts; only the newest may still be running.
func checkNoOverlap(t *testing.T, runs map[string][]client.Run) {
	t.Helper()
	for job, rs := range runs {
		// Newest first from the service; walk oldest first.
		for i := len(rs) - 1; i > 0; i-- {
			cur, next := rs[i], rs[i-1]
			if *next.Token <= *cur.Token {
				t.Errorf("%s: tokens not increasing: %d then %d", job, *cur.Token, *next.Token)
			}
			if cur.EndedAt == nil {
				t.Errorf("%s: run %d is still %s while run %d started", job, *cur.Token, cur.Outcome, *next.Token)
				continue
			}
			if cur.EndedAt.After(*next.StartedAt) {
				t.Errorf("%s: run %d (%s, ended %s) overlaps run %d (started %s)",
					job, *cur.Token, cur.Outcome, cur.EndedAt.Format(api.TimeLayout), *next.Token, next.StartedAt.Format(api.TimeLayout))
			}
		}
	}
}

// checkRecordsMatchService: a replica never records a run as succeeded
// unless the service recorded that grant succeeded, for the same tick.
func checkRecordsMatchService(t *testing.T, runs map[string][]client.Run, records map[string][]record) {
	t.Helper()
	byToken := make(map[string]map[int64]client.Run)
	for job, rs := range runs {
		byToken[job] = make(map[int64]client.Run)
		for _, r := range rs {
			byToken[job][*r.Token] = r
		}
	}
	outcomes := make(map[string]int)
	for owner, rs := range records {
		for _, r := range rs {
			outcomes[r.Outcome]++
			run, ok := byToken[r.Job][r.Token]
			if !ok {
				t.Errorf("%s recorded %s token %d, which the service does not know", owner, r.Job, r.Token)
				continue
			}
			if *run.Owner != owner || run.Tick == nil || !run.Tick.Equal(r.tick) {
				t.Errorf("%s recorded %s token %d tick %s; the service has owner %s tick %v", owner, r.Job, r.Token, r.Tick, *run.Owner, run.Tick)
			}
			if r.Outcome == "succeeded" && run.Outcome != client.RunOutcomeSucceeded {
				t.Errorf("%s recorded %s token %d succeeded; the service recorded %s", owner, r.Job, r.Token, run.Outcome)
			}
		}
	}
	t.Logf("records: %v", outcomes)
}

// checkFrozenRunNotSucceeded: the run the frozen replica held when it was
// stopped was taken over while it was stopped, and neither the service nor
// the replica counts it as succeeded.
func checkFrozenRunNotSucceeded(t *testing.T, runs map[string][]client.Run, records map[string][]record, frozen client.Lease, resumedAt time.Time) {
	t.Helper()
	paused := frozen.Owner
	var frozenRun *client.Run
	takenOver := false
	for _, r := range runs[frozen.JobId] {
		switch {
		case *r.Token == frozen.Token:
			frozenRun = &r
		case *r.Token > frozen.Token && r.StartedAt.Before(resumedAt):
			takenOver = true
		}
	}
	if frozenRun == nil {
		t.Fatalf("the service has no run %s token %d", frozen.JobId, frozen.Token)
	}
	if !takenOver {
		t.Fatalf("%s was not taken over while %s was stopped for %s", frozen.JobId, paused, pauseFor)
	}
	if frozenRun.Outcome == client.RunOutcomeSucceeded {
		t.Errorf("service: the frozen run %s token %d was recorded succeeded after it was taken over", frozen.JobId, frozen.Token)
	}
	found := false
	for _, r := range records[paused] {
		if r.Job == frozen.JobId && r.Token == frozen.Token {
			found = true
			if r.Outcome == "succeeded" {
				t.Errorf("records: %s recorded the frozen run %s token %d succeeded", paused, r.Job, r.Token)
			}
			t.Logf("frozen run %s token %d: service %s, %s recorded %s", r.Job, r.Token, frozenRun.Outcome, paused, r.Outcome)
		}
	}
	if !found {
		t.Errorf("%s did not record its frozen run %s token %d after it resumed", paused, frozen.JobId, frozen.Token)
	}
}

// checkTicksRan: of the ticks in the window that a live replica could run,
// at least minTicksRan ran to success somewhere. A tick is not counted while
// the job's lease was held by the killed or the frozen replica and had not
// expired yet: nobody may run it then, by design (the holder could still be
// working). Once the lease expires, the next tick must run.
func checkTicksRan(t *testing.T, runs map[string][]client.Run, from, to time.Time, vanished ...string) {
	t.Helper()
	expected, ran, blocked := 0, 0, 0
	var missed []string
	won := make(map[string]int)
	for job, rs := range runs {
		succeeded := make(map[time.Time]bool)
		type interval struct{ from, to time.Time }
		var blockedBy []interval
		for _, r := range rs {
			switch {
			case r.Outcome == client.RunOutcomeSucceeded:
				succeeded[*r.Tick] = true
				won[*r.Owner]++
			case r.Outcome == client.RunOutcomeExpired && slices.Contains(vanished, *r.Owner):
				blockedBy = append(blockedBy, interval{*r.Tick, *r.EndedAt})
			}
		}
	ticks:
		for tick := from; tick.Before(to); tick = tick.Add(time.Second) {
			for _, b := range blockedBy {
				if !tick.Before(b.from) && tick.Before(b.to) {
					blocked++
					continue ticks
				}
			}
			expected++
			if succeeded[tick.UTC()] {
				ran++
			} else {
				missed = append(missed, fmt.Sprintf("%s@%s", job, tick.Format("15:04:05")))
			}
		}
	}
	slices.Sort(missed)
	share := float64(ran) / float64(expected)
	t.Logf("ticks: %d of %d ran (%.1f %%); %d more were held by the killed or frozen replica until their leases expired; won per replica %v; missed: %v",
		ran, expected, 100*share, blocked, won, missed)
	if share < minTicksRan {
		t.Errorf("only %.1f %% of the ticks ran, want at least %.0f %%", 100*share, 100*minTicksRan)
	}
}

// waitAllJobsRan waits until every job has completed a tick: the replicas
// are up and serving.
func waitAllJobsRan(t *testing.T, c *client.ClientWithResponses, jobIDs []string) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for _, id := range jobIDs {
		for {
			resp, err := c.GetLeaseWithResponse(context.Background(), id)
			if err == nil && resp.JSON200 != nil && resp.JSON200.LastCompletedTick != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s has not run once after %s", id, settle)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// record is a line of a cronreplica -record file.
type record struct {
	Job     string `json:"job"`
	Tick    string `json:"tick"`
	Token   int64  `json:"token"`
	Owner   string `json:"owner"`
	Start   string `json:"start"`
	End     string `json:"end"`
	Outcome string `json:"outcome"`

	tick time.Time
}

func recordPath(dir, owner string) string { return filepath.Join(dir, owner+".jsonl") }

// readRecords parses a record file. A killed replica may have died in the
// middle of its last write, so its last line may be cut short.
func readRecords(t *testing.T, path string, mayBeCut bool) []record {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []record
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			if mayBeCut && !bytes.HasSuffix(data, []byte("\n")) && bytes.HasSuffix(data, sc.Bytes()) {
				break
			}
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		if r.tick, err = api.ParseTime(r.Tick); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		switch r.Outcome {
		case "succeeded", "failed", "lost":
		default:
			t.Fatalf("%s: line %q: unknown outcome", path, sc.Text())
		}
		out = append(out, r)
	}
	return out
}

// listRuns returns the grants of jobID, newest first: the runs that had a
// holder (missed ticks are recorded as runs too, without one).
func listRuns(t *testing.T, c *client.ClientWithResponses, jobID string) []client.Run {
	t.Helper()
	limit := 1000
	resp, err := c.ListRunsWithResponse(context.Background(), jobID, &client.ListRunsParams{Limit: &limit})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("runs of %s: %v %v", jobID, err, resp)
	}
	var grants []client.Run
	for _, r := range resp.JSON200.Runs {
		if r.Outcome != client.RunOutcomeMissed {
			grants = append(grants, r)
		}
	}
	return grants
}

func getLease(t *testing.T, c *client.ClientWithResponses, jobID string) client.Lease {
	t.Helper()
	resp, err := c.GetLeaseWithResponse(context.Background(), jobID)
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("lease of %s: %v %v", jobID, err, resp)
	}
	return *resp.JSON200
}

// buildBinaries builds leaseapi and cronreplica into a temporary directory.
// They are built without the race detector even under -race: six
// instrumented processes slow a small machine down so much that the
// scenario would measure the detector, not the product. The runner's races
// are the unit tests' job (go test -race ./jobs).
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator),
		"github.com/leaseapi/leaseapi/cmd/leaseapi", "github.com/leaseapi/leaseapi/cmd/cronreplica"}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return dir
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitReady polls /readyz until it answers 200, for at most 30 s.
func waitReady(t *testing.T, baseURL string, p *process) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if p.exited() {
			t.Fatalf("leaseapi exited before it was ready: %v\n%s", p.err, p.logTail())
		}
		resp, err := http.Get(baseURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("leaseapi not ready after 30s\n%s", p.logTail())
}

func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// processes are the children of the test; killAll runs in t.Cleanup.
type processes struct {
	t    *testing.T
	dir  string
	list []*process
}

type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

func (ps *processes) start(name, path string, args []string, env ...string) *process {
	ps.t.Helper()
	logPath := filepath.Join(ps.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		ps.t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		ps.t.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	ps.list = append(ps.list, p)
	return p
}

func (p *process) signal(sig syscall.Signal) {
	_ = p.cmd.Process.Signal(sig)
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and returns its error, or an error
// after timeout.
func (p *process) wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("still running after %s", timeout)
	}
}

func (p *process) logTail() string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return p.name + ":\n  " + strings.Join(lines, "\n  ")
}

// killAll kills every process still running (a stopped one too) and waits
// for it; when the test failed it logs the end of every process's output.
func (ps *processes) killAll() {
	for _, p := range ps.list {
		if !p.exited() {
			p.signal(syscall.SIGKILL)
			p.signal(syscall.SIGCONT)
		}
		<-p.done
		if ps.t.Failed() || os.Getenv("LEASEAPI_E2E_LOGS") != "" {
			ps.t.Log(p.logTail())
		}
	}
}
