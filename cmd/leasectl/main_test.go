package main

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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/internal/version"
)

// The tests run the real binaries: one leaseapi on the embedded store,
// shared by the tests (each uses its own job ids), and leasectl processes.
const (
	userToken  = "tok-LEASECTL-user-7f3a9c"  // LEASEAPI_API_TOKENS
	adminToken = "tok-LEASECTL-admin-b41e0d" // LEASEAPI_ADMIN_TOKENS
)

var (
	binDir  string // leaseapi and leasectl
	baseURL string // the shared leaseapi
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "leasectl-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	args := []string{"build", "-o", dir + string(filepath.Separator),
		"github.com/leaseapi/leaseapi/cmd/leaseapi", "github.com/leaseapi/leaseapi/cmd/leasectl"}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 1
	}
	api, url, err := startLeaseapi(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		_ = api.Process.Kill()
		_ = api.Wait()
	}()
	baseURL = url
	return m.Run()
}

// startLeaseapi starts leaseapi on the embedded store in dir, with env
// added to its environment, and waits until it is ready (bounded). With a
// tlsClient, leaseapi serves https (env has its certificate) and the client
// trusts it.
func startLeaseapi(dir string, tlsClient *http.Client, env ...string) (*exec.Cmd, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := l.Addr().String()
	l.Close()
	db, err := os.CreateTemp(dir, "leases-*.db")
	if err != nil {
		return nil, "", err
	}
	db.Close()
	cmd := exec.Command(filepath.Join(binDir, "leaseapi"))
	cmd.Env = append(os.Environ(),
		"LEASEAPI_ADDR="+addr,
		"LEASEAPI_DATABASE_URL=",
		"LEASEAPI_SQLITE_PATH="+db.Name(),
		"LEASEAPI_LOG_LEVEL=warn",
		"LEASEAPI_API_TOKENS="+userToken,
		"LEASEAPI_ADMIN_TOKENS="+adminToken,
		"LEASEAPI_REQUEST_TIMEOUT=3s",
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	url, get := "http://"+addr, http.DefaultClient
	if tlsClient != nil {
		url, get = "https://"+addr, tlsClient
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := get.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd, url, nil
			}
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, "", errors.New("leaseapi not ready after 30s")
}

// apiClient is a client of the shared leaseapi with token.
func apiClient(t *testing.T, token string) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(baseURL, client.WithBearerToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// proc is a leasectl process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	code           int
}

// start starts leasectl with args, LEASEAPI_URL set to the shared leaseapi
// and LEASEAPI_TOKEN to token. The process is killed at the end of the test
// if it is still running.
func start(t *testing.T, token string, args ...string) *proc {
	t.Helper()
	return startEnv(t, []string{"LEASEAPI_URL=" + baseURL, "LEASEAPI_TOKEN=" + token}, args...)
}

// startEnv starts leasectl with args and env added to the test's
// environment.
func startEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binDir, "leasectl"), args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the process (at most a minute) and checks that neither
// the user's nor the admin's token appears in its output.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("leasectl %q still running after a minute", p.cmd.Args[1:])
	}
	for _, tok := range []string{userToken, adminToken, "tok-LEASECTL"} {
		if strings.Contains(p.stdout.String(), tok) || strings.Contains(p.stderr.String(), tok) {
			t.Fatalf("leasectl %q printed a bearer token:\nstdout: %s\nstderr: %s", p.cmd.Args[1:], &p.stdout, &p.stderr)
		}
	}
	return p.code
}

// leasectl runs leasectl to its end and returns its status and output.
func leasectl(t *testing.T, token string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := start(t, token, args...)
	code = p.wait(t)
	return code, p.stdout.String(), p.stderr.String()
}

// waitFile polls until path exists, for at most 30 s, and returns its content.
func waitFile(t *testing.T, path string, p *proc) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if data, err := os.ReadFile(path); err == nil && len(data) > 0 && bytes.HasSuffix(data, []byte("\n")) {
			return string(data)
		}
		select {
		case <-p.done:
			t.Fatalf("leasectl exited %d before %s was written:\n%s", p.code, path, &p.stderr)
		default:
		}
	}
	t.Fatalf("%s not written within 30s", path)
	return ""
}

// checkGone checks that the process pid no longer exists.
func checkGone(t *testing.T, pidText string) {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(pidText))
	if err != nil {
		t.Fatalf("pid %q: %v", pidText, err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("COMMAND (pid %d) still exists after leasectl exited: kill 0 = %v", pid, err)
	}
}

// runsOf returns the run history of job, newest first.
func runsOf(t *testing.T, job string) []client.Run {
	t.Helper()
	resp, err := apiClient(t, userToken).ListRunsWithResponse(context.Background(), job, nil)
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("runs of %s: %v %s", job, err, resp.Body)
	}
	return resp.JSON200.Runs
}

// TestThreeHostsRunEachTickOnce runs the same crontab line on three
// "hosts" once per second for 20 s, as cron would: every tick runs at most
// once, and a tick runs unless the lease was still held at its second by
// an earlier tick's run (one lease per job: such a tick is skipped).
func TestThreeHostsRunEachTickOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("20 s of wall clock")
	}
	const hosts, seconds = 3, 20
	job := "three-hosts"
	out := filepath.Join(t.TempDir(), "ticks")
	first := time.Now().Truncate(time.Second).Add(time.Second)
	var mu sync.Mutex
	launched := make(map[string]bool) // the ticks the invocations asked for
	procs := make([][]*proc, hosts)
	var wg sync.WaitGroup
	for h := range hosts {
		wg.Go(func() {
			for s := range seconds {
				at := first.Add(time.Duration(s) * time.Second)
				// cron starts a line within a few milliseconds of the second,
				// each host with its own delay.
				time.Sleep(time.Until(at.Add(time.Duration(h*7) * time.Millisecond)))
				procs[h] = append(procs[h], start(t, userToken, "run", "--schedule", "* * * * * *", "--ttl", "3s", job, "--",
					"sh", "-c", `echo "$LEASE_TICK $LEASE_TOKEN $LEASE_OWNER" >> "$0"`, out))
				mu.Lock()
				launched[at.UTC().Format("2006-01-02T15:04:05.000Z")] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for h := range procs {
		for _, p := range procs[h] {
			if code := p.wait(t); code != 0 {
				t.Errorf("host %d: leasectl exited %d:\n%s", h, code, &p.stderr)
			}
		}
	}

	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ran := make(map[string]string)
	tokens := make(map[string]bool)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			t.Fatalf("line %q: want tick, token and owner", sc.Text())
		}
		tick, token := fields[0], fields[1]
		if prev, ok := ran[tick]; ok {
			t.Errorf("tick %s ran twice: %s and %s", tick, prev, sc.Text())
		}
		if tokens[token] {
			t.Errorf("token %s granted twice", token)
		}
		ran[tick], tokens[token] = sc.Text(), true
	}
	limit := 1000
	resp, err := apiClient(t, userToken).ListRunsWithResponse(context.Background(), job, &client.ListRunsParams{Limit: &limit})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("runs of %s: %v", job, err)
	}
	n := 0
	for tick := range launched {
		if ran[tick] != "" {
			n++
			continue
		}
		at, err := time.Parse(time.RFC3339, tick)
		if err != nil {
			t.Fatal(err)
		}
		if held := heldAt(resp.JSON200.Runs, at); held != nil {
			t.Logf("tick %s skipped: the run of tick %s held the lease until %v", tick, held.Tick, held.EndedAt)
			continue
		}
		t.Errorf("tick %s did not run, and no earlier tick's run held the lease at its second", tick)
	}
	t.Logf("%d of %d ticks ran, %d lines", n, len(launched), len(ran))
}

// heldAt returns the run of a tick before at that was granted by at and
// had not ended by at (it held the job's lease at that instant), or nil.
func heldAt(runs []client.Run, at time.Time) *client.Run {
	for i, r := range runs {
		if r.Tick != nil && r.Tick.Before(at) && r.StartedAt != nil && !r.StartedAt.After(at) &&
			(r.EndedAt == nil || r.EndedAt.After(at)) {
			return &runs[i]
		}
	}
	return nil
}

// TestRevokeStopsCommand: `leasectl revoke` with an admin token takes the
// lease away; the next heartbeat answers lease_lost and COMMAND is stopped.
func TestRevokeStopsCommand(t *testing.T) {
	t.Parallel()
	job := "revoked"
	pidFile := filepath.Join(t.TempDir(), "pid")
	p := start(t, userToken, "run", "--ttl", "3s", job, "--", "sh", "-c", `echo $$ > "$0"; exec sleep 60`, pidFile)
	pid := waitFile(t, pidFile, p)

	code, stdout, stderr := leasectl(t, adminToken, "revoke", job)
	if code != 0 || !strings.Contains(stdout, "revoked") {
		t.Fatalf("leasectl revoke: %d %q %q", code, stdout, stderr)
	}
	revokedAt := time.Now()
	// sleep dies of the SIGTERM: 128 + 15.
	if code := p.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("leasectl run after revoke: exit %d, want 143\n%s", code, &p.stderr)
	}
	t.Logf("COMMAND stopped %s after the revoke (heartbeat interval 1s)", time.Since(revokedAt).Round(time.Millisecond))
	checkGone(t, pid)
	if !strings.Contains(p.stderr.String(), "lease lost") {
		t.Fatalf("stderr does not say the lease was lost:\n%s", &p.stderr)
	}
	if runs := runsOf(t, job); len(runs) != 1 || runs[0].Outcome != client.RunOutcomeRevoked {
		t.Fatalf("runs %+v: want one, revoked", runs)
	}
}

// TestKillGraceKillsCommandIgnoringSIGTERM: at --max-run-time COMMAND's
// group gets SIGTERM, which it ignores, then SIGKILL after --kill-grace;
// the lease stays heartbeated meanwhile and is released failed.
func TestKillGraceKillsCommandIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	job := "ignores-term"
	pidFile := filepath.Join(t.TempDir(), "pid")
	// --kill-grace 2s is two heartbeat intervals: the lease would be lost
	// without them (deadline 3s - 0.3s margin after the last one).
	p := start(t, userToken, "run", "--ttl", "3s", "--max-run-time", "1s", "--kill-grace", "2s", job, "--",
		"sh", "-c", `trap "" TERM; echo $$ > "$0"; while :; do sleep 0.1; done`, pidFile)
	pid := waitFile(t, pidFile, p)
	if code := p.wait(t); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit %d, want 137\n%s", code, &p.stderr)
	}
	checkGone(t, pid)
	for _, want := range []string{"--max-run-time", "SIGKILL"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, &p.stderr)
		}
	}
	if strings.Contains(p.stderr.String(), "lease") && strings.Contains(p.stderr.String(), "lost") {
		t.Errorf("the lease was lost while COMMAND was being killed:\n%s", &p.stderr)
	}
	if runs := runsOf(t, job); len(runs) != 1 || runs[0].Outcome != client.RunOutcomeFailed {
		t.Fatalf("runs %+v: want one, failed", runs)
	}
}

// TestStoppedLeaseapi: with leaseapi stopped, leasectl retries for --wait,
// exits 75 and never starts COMMAND.
func TestStoppedLeaseapi(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	api, url, err := startLeaseapi(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = api.Process.Signal(syscall.SIGTERM)
	_ = api.Wait()
	marker := filepath.Join(dir, "started")
	code, _, stderr := leasectl(t, userToken, "run", "--api", url, "--wait", "1s", "stopped", "--", "touch", marker)
	if code != exitTempFail {
		t.Fatalf("exit %d, want 75\n%s", code, stderr)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("COMMAND started: stat %s: %v", marker, err)
	}
	if !strings.Contains(stderr, "--wait") {
		t.Fatalf("stderr does not name --wait:\n%s", stderr)
	}
}

// TestExitStatus checks the rows of the exit status table that need no
// signal.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	c := apiClient(t, userToken)
	other := "someone-else"
	resp, err := c.AcquireLeaseWithResponse(context.Background(), "held", client.AcquireRequest{Owner: other})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("acquire held: %v %s", err, resp.Body)
	}
	tick := "2026-01-02T03:04:05Z"
	// A host whose clock runs two days fast: its tick is refused
	// (tick_ahead), even with --skipped-exit-code, and COMMAND never starts.
	ahead := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	tests := []struct {
		name   string
		token  string
		args   []string
		want   int
		stderr string
	}{
		{"CommandStatus", userToken, []string{"run", "status", "--", "sh", "-c", "exit 3"}, 3, ""},
		{"CommandSucceeds", userToken, []string{"run", "--tick", tick, "ticked", "--", "true"}, 0, ""},
		{"LeaseHeld", userToken, []string{"run", "held", "--", "true"}, 0, "lease_held: " + other},
		{"LeaseHeldSkippedCode", userToken, []string{"run", "--skipped-exit-code", "5", "held", "--", "true"}, 5, "lease_held"},
		{"TickAhead", userToken, []string{"run", "--skipped-exit-code", "5", "--tick", ahead, "ahead", "--", "sh", "-c", "exit 9"}, 75, "tick_ahead: --tick " + ahead[:19]},
		{"CommandNotFound", userToken, []string{"run", "not-found", "--", "/nonexistent/command"}, 127, "no such file"},
		{"BadFlag", userToken, []string{"run", "--ttl", "soon", "bad-flag", "--", "true"}, 64, "invalid value"},
		{"NoSeparator", userToken, []string{"run", "bad-flag", "true"}, 64, "JOB -- COMMAND"},
		{"KillGraceAboveTTL", userToken, []string{"run", "--ttl", "2s", "--kill-grace", "3s", "bad-flag", "--", "true"}, 64, "--kill-grace"},
		{"BadAPIURL", userToken, []string{"run", "--api", "localhost:8080", "bad-flag", "--", "true"}, 64, "--api"},
		{"InvalidRequest", userToken, []string{"run", "--ttl", "10h", "too-long", "--", "true"}, 64, "invalid_request"},
		{"Unauthorized", "tok-LEASECTL-wrong", []string{"run", "unauthorized", "--", "true"}, 77, "401"},
		{"ForbiddenRevoke", userToken, []string{"revoke", "held"}, 77, "403"},
		{"GetUnknown", userToken, []string{"get", "no-such-job"}, 1, "not_found"},
		{"UnknownCommand", userToken, []string{"lock", "x"}, 64, "unknown command"},
	}
	// tick_done: the tick ran (CommandSucceeds); a second run skips it.
	// It runs after the table, which runs in order.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := leasectl(t, tt.token, tt.args...)
			if code != tt.want || !strings.Contains(stderr, tt.stderr) {
				t.Fatalf("leasectl %q: exit %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.want, tt.stderr)
			}
			if tt.want == 0 && tt.stderr == "" && stderr != "" {
				t.Fatalf("leasectl %q succeeded but printed %q", tt.args, stderr)
			}
			if tt.name == "TickAhead" && strings.Count(stderr, "\n") != 1 {
				t.Errorf("leasectl %q: stderr %q, want one line", tt.args, stderr)
			}
		})
	}
	code, _, stderr := leasectl(t, userToken, "run", "--tick", tick, "ticked", "--", "true")
	if code != 0 || !strings.Contains(stderr, "tick_done") {
		t.Fatalf("second run of a done tick: exit %d, stderr %q; want 0 and tick_done", code, stderr)
	}
}

// TestScheduleAndPause: --schedule and --grace go with the acquire, the
// spec with the host's zone named (here TZ); a paused job is a quiet skip;
// pause and resume need an admin.
func TestScheduleAndPause(t *testing.T) {
	t.Parallel()
	job := "scheduled"
	p := start(t, userToken, "run", "--schedule", "* * * * *", "--grace", "2s", job, "--", "true")
	if code := p.wait(t); code != 0 {
		t.Fatalf("run with a schedule: exit %d: %s", code, &p.stderr)
	}
	lease := func(job string) client.Lease {
		t.Helper()
		resp, err := apiClient(t, userToken).GetLeaseWithResponse(context.Background(), job)
		if err != nil || resp.JSON200 == nil {
			t.Fatalf("get %s: %v", job, err)
		}
		return *resp.JSON200
	}
	if l := lease(job); l.Schedule == nil || l.GraceMs == nil || *l.GraceMs != 2000 {
		t.Fatalf("lease after run --schedule: schedule %v grace %v, want the spec and 2000", l.Schedule, l.GraceMs)
	}

	berlinJob := "scheduled-in-berlin"
	berlin := exec.Command(filepath.Join(binDir, "leasectl"), "run", "--schedule", "0 7 * * *", berlinJob, "--", "true")
	berlin.Env = append(os.Environ(), "LEASEAPI_URL="+baseURL, "LEASEAPI_TOKEN="+userToken, "TZ=Europe/Berlin")
	if out, err := berlin.CombinedOutput(); err != nil {
		t.Fatalf("run in Europe/Berlin: %v: %s", err, out)
	}
	if l := lease(berlinJob); l.Schedule == nil || *l.Schedule != "CRON_TZ=Europe/Berlin 0 7 * * *" {
		t.Errorf("lease after a run in Europe/Berlin: schedule %q, want the host's zone named", fmt.Sprint(l.Schedule))
	}

	if code, _, stderr := leasectl(t, userToken, "pause", job); code != 77 || !strings.Contains(stderr, "403") {
		t.Fatalf("pause by a user: exit %d, %q; want 77 and 403", code, stderr)
	}
	if code, stdout, stderr := leasectl(t, adminToken, "pause", "--reason", "maintenance", job); code != 0 || !strings.Contains(stdout, "paused") {
		t.Fatalf("pause: exit %d, %q %q", code, stdout, stderr)
	}
	code, _, stderr := leasectl(t, userToken, "run", "--skipped-exit-code", "3", job, "--", "true")
	if code != 3 || !strings.Contains(stderr, "job_paused") {
		t.Fatalf("run of a paused job: exit %d, %q; want the skipped code 3 and job_paused", code, stderr)
	}
	if code, stdout, _ := leasectl(t, userToken, "get", job); code != 0 || !strings.Contains(stdout, "maintenance") {
		t.Errorf("get of a paused job: exit %d, %q; want the pause shown", code, stdout)
	}
	if code, stdout, stderr := leasectl(t, adminToken, "resume", job); code != 0 || !strings.Contains(stdout, "resumed") {
		t.Fatalf("resume: exit %d, %q %q", code, stdout, stderr)
	}
	if code, _, stderr := leasectl(t, userToken, "run", job, "--", "true"); code != 0 || stderr != "" {
		t.Fatalf("run after resume: exit %d, %q", code, stderr)
	}
}

// TestRepair: repair needs an admin, sends its reason, prints what the job
// became, and names an unknown job or a bad reason.
func TestRepair(t *testing.T) {
	t.Parallel()
	job := "repaired"
	if code, _, stderr := leasectl(t, userToken, "run", "--tick", "2026-01-02T03:04:05Z", job, "--", "true"); code != 0 {
		t.Fatalf("run: exit %d, %q", code, stderr)
	}
	if code, _, stderr := leasectl(t, userToken, "repair", job); code != 77 || !strings.Contains(stderr, "403") {
		t.Fatalf("repair by a user: exit %d, %q; want 77 and 403", code, stderr)
	}
	code, stdout, stderr := leasectl(t, adminToken, "repair", "--reason", "clock was fast", job)
	if code != 0 || !strings.Contains(stdout, `job "repaired" repaired`) || !strings.Contains(stdout, "2026-01-02T03:04:05.000Z") {
		t.Fatalf("repair: exit %d, %q %q; want the job repaired, its last completed tick kept", code, stdout, stderr)
	}
	if code, stdout, _ := leasectl(t, adminToken, "repair", "-o", "json", job); code != 0 || !strings.Contains(stdout, `"lastCompletedTick"`) {
		t.Errorf("repair -o json: exit %d, %q; want the lease", code, stdout)
	}
	if code, _, stderr := leasectl(t, adminToken, "repair", "no-such-job"); code != 1 || !strings.Contains(stderr, "not_found") {
		t.Errorf("repair of an unknown job: exit %d, %q; want 1 and not_found", code, stderr)
	}
	if code, _, stderr := leasectl(t, adminToken, "repair", "--reason", strings.Repeat("x", 257), job); code != 64 || !strings.Contains(stderr, "reason") {
		t.Errorf("repair with a reason too long: exit %d, %q; want 64 naming the reason", code, stderr)
	}
}

// TestSignalStopsCommand: SIGTERM to leasectl stops COMMAND; the status is
// COMMAND's when it is non-zero, else 1; the run is released failed.
func TestSignalStopsCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		want   int
	}{
		// sleep dies of the SIGTERM.
		{"KilledBySignal", `echo $$ > "$0"; exec sleep 60`, 128 + int(syscall.SIGTERM)},
		// The script exits 0 on SIGTERM: leasectl stopped it, so 1.
		{"ExitsZero", `trap "exit 0" TERM; echo $$ > "$0"; while :; do sleep 0.1; done`, 1},
		{"ExitsNonZero", `trap "exit 9" TERM; echo $$ > "$0"; while :; do sleep 0.1; done`, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := "signal-" + strings.ToLower(tt.name)
			pidFile := filepath.Join(t.TempDir(), "pid")
			p := start(t, userToken, "run", "--ttl", "3s", job, "--", "sh", "-c", tt.script, pidFile)
			pid := waitFile(t, pidFile, p)
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			if code := p.wait(t); code != tt.want {
				t.Fatalf("exit %d, want %d\n%s", code, tt.want, &p.stderr)
			}
			checkGone(t, pid)
			if runs := runsOf(t, job); len(runs) != 1 || runs[0].Outcome != client.RunOutcomeFailed {
				t.Fatalf("runs %+v: want one, failed", runs)
			}
		})
	}
}

// TestTokenNotInCommandEnvironment: COMMAND does not inherit LEASEAPI_TOKEN
// (a COMMAND that prints its environment would print it), and gets the
// lease's variables.
func TestTokenNotInCommandEnvironment(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := leasectl(t, userToken, "run", "--owner", "host-a/1", "env-job", "--", "env")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"LEASE_JOB=env-job\n", "LEASE_OWNER=host-a/1\n", "LEASE_TOKEN=1\n", "LEASE_TICK=\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("COMMAND's environment lacks %q:\n%s", want, stdout)
		}
	}
	// leasectl checked that the token is not in stdout.
}

// TestListFollowsPages: ls prints the leases of every page, as a table and
// with -o json as the API's JSON.
func TestListFollowsPages(t *testing.T) {
	t.Parallel()
	c := apiClient(t, userToken)
	const n = 130 // the API's page is 100
	for i := range n {
		job := fmt.Sprintf("page-%03d", i)
		resp, err := c.AcquireLeaseWithResponse(context.Background(), job, client.AcquireRequest{Owner: "lister"})
		if err != nil || resp.JSON200 == nil {
			t.Fatalf("acquire %s: %v %s", job, err, resp.Body)
		}
	}
	code, stdout, stderr := leasectl(t, userToken, "ls", "--prefix", "page-")
	if code != 0 {
		t.Fatalf("ls: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != n+1 || !strings.HasPrefix(lines[0], "JOB ") {
		t.Fatalf("ls: %d lines, want a header and %d leases:\n%s", len(lines), n, stdout)
	}
	for i, l := range lines[1:] {
		if f := strings.Fields(l); f[0] != fmt.Sprintf("page-%03d", i) || f[1] != "held" || f[2] != "lister" {
			t.Fatalf("ls line %d: %q", i+1, l)
		}
	}

	code, stdout, stderr = leasectl(t, userToken, "ls", "-o", "json", "--prefix", "page-", "--state", "held")
	if code != 0 {
		t.Fatalf("ls -o json: exit %d: %s", code, stderr)
	}
	var list client.LeaseList
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		t.Fatalf("ls -o json: %v\n%s", err, stdout)
	}
	if len(list.Leases) != n || list.NextCursor != nil || list.Leases[n-1].JobId != fmt.Sprintf("page-%03d", n-1) {
		t.Fatalf("ls -o json: %d leases, next cursor %v; want %d, nil", len(list.Leases), list.NextCursor, n)
	}

	code, stdout, stderr = leasectl(t, userToken, "get", "-o", "json", "page-007")
	var l client.Lease
	if code != 0 || json.Unmarshal([]byte(stdout), &l) != nil || l.JobId != "page-007" || l.Owner != "lister" {
		t.Fatalf("get -o json: exit %d, %q, %q", code, stdout, stderr)
	}
}

// TestOutOfScope: a job outside the credential's scopes is 403 before any
// lookup, whether it exists or not; leasectl says so and exits 77
// (EX_NOPERM), never 1 as for a job that does not exist.
func TestOutOfScope(t *testing.T) {
	t.Parallel()
	resp, err := apiClient(t, adminToken).CreateCredentialWithResponse(context.Background(), client.CreateCredentialRequest{
		Name: "leasectl-team-a", Role: client.RoleLease, Scopes: []client.Scope{"team-a:"}})
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("create credential: %v %s", err, resp.Body)
	}
	teamA := resp.JSON201.Token
	if code, _, stderr := leasectl(t, userToken, "run", "team-b:exists", "--", "true"); code != 0 {
		t.Fatalf("run team-b:exists unscoped: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{
		{"run", "team-b:exists", "--", "true"},
		{"run", "team-b:missing", "--", "true"},
		{"get", "team-b:exists"},
		{"get", "team-b:missing"},
	} {
		code, _, stderr := leasectl(t, teamA, args...)
		if code != exitNoPerm || !strings.Contains(stderr, "403 forbidden") || !strings.Contains(stderr, "outside this credential's scopes (team-a:)") {
			t.Errorf("leasectl %q by team-a: exit %d, stderr %q; want 77 and the scopes named", args, code, stderr)
		}
	}
}

// TestGroups: an admin creates a group of limit 1; a job run with --group
// holds its slot (LEASE_SLOT, LEASE_SLOT_TOKEN) and get and list show it;
// a second job of the group is not won while the group stays full, and is
// once the first released; a group jobs are in cannot be deleted until
// they leave it.
func TestGroups(t *testing.T) {
	t.Parallel()
	group := "warehouse"
	if code, _, stderr := leasectl(t, userToken, "groups", "put", "--limit", "1", group); code != 77 || !strings.Contains(stderr, "403") {
		t.Fatalf("groups put by a user: exit %d, %q; want 77 and 403", code, stderr)
	}
	if code, stdout, stderr := leasectl(t, adminToken, "groups", "put", "--limit", "1", group); code != 0 || !strings.Contains(stdout, "limit 1, 0 held") {
		t.Fatalf("groups put: exit %d, %q %q", code, stdout, stderr)
	}

	dir := t.TempDir()
	out, stop := filepath.Join(dir, "slot"), filepath.Join(dir, "stop")
	a := start(t, userToken, "run", "--group", group, "wh-a", "--",
		"sh", "-c", `echo "$LEASE_SLOT $LEASE_SLOT_TOKEN" > "$0.tmp" && mv "$0.tmp" "$0"; while [ ! -e "$1" ]; do sleep 0.05; done`, out, stop)
	slot := strings.Fields(waitFile(t, out, a))
	if len(slot) != 2 || slot[0] != "1" {
		t.Fatalf("COMMAND's LEASE_SLOT and LEASE_SLOT_TOKEN: %q, want slot 1 and a token", slot)
	}
	if code, stdout, stderr := leasectl(t, userToken, "groups", "get", group); code != 0 ||
		!strings.Contains(stdout, "HELD     1") || !strings.Contains(stdout, "wh-a") || !strings.Contains(stdout, slot[1]) {
		t.Errorf("groups get: exit %d, %q %q; want 1 held by wh-a with slot token %s", code, stdout, stderr, slot[1])
	}
	if code, stdout, _ := leasectl(t, userToken, "groups", "list", "--prefix", "ware"); code != 0 || !strings.Contains(stdout, "warehouse  1      1     wh-a") {
		t.Errorf("groups list: exit %d, %q; want warehouse held by wh-a", code, stdout)
	}
	if code, stdout, _ := leasectl(t, userToken, "groups", "list", "-o", "json"); code != 0 || !strings.Contains(stdout, `"slotToken": `+slot[1]) {
		t.Errorf("groups list -o json: exit %d, %q; want the API's JSON", code, stdout)
	}

	code, _, stderr := leasectl(t, userToken, "run", "--group", group, "--wait", "1s", "--skipped-exit-code", "3", "wh-b", "--", "true")
	if code != 3 || !strings.Contains(stderr, `group_full: group "warehouse" has 1 of 1 slots in use: wh-a (slot 1)`) {
		t.Fatalf("run in a full group: exit %d, %q; want the skipped code 3 naming the holder", code, stderr)
	}
	if code, _, stderr := leasectl(t, adminToken, "groups", "delete", group); code != 1 || !strings.Contains(stderr, "group_in_use") {
		t.Fatalf("groups delete while a job is in it: exit %d, %q; want 1 and group_in_use", code, stderr)
	}

	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t); code != 0 {
		t.Fatalf("wh-a: exit %d: %s", code, &a.stderr)
	}
	if code, _, stderr := leasectl(t, userToken, "run", "--group", group, "wh-b", "--", "true"); code != 0 || stderr != "" {
		t.Fatalf("run once the slot is free: exit %d, %q", code, stderr)
	}
	for _, job := range []string{"wh-a", "wh-b"} {
		if code, _, stderr := leasectl(t, userToken, "run", "--group", "", job, "--", "true"); code != 0 {
			t.Fatalf("run of %s leaving the group: exit %d, %q", job, code, stderr)
		}
	}
	if code, stdout, stderr := leasectl(t, adminToken, "groups", "delete", group); code != 0 || !strings.Contains(stdout, "deleted") {
		t.Fatalf("groups delete: exit %d, %q %q", code, stdout, stderr)
	}
	if code, _, stderr := leasectl(t, userToken, "groups", "get", group); code != 1 || !strings.Contains(stderr, "not_found") {
		t.Errorf("groups get after delete: exit %d, %q; want 1 and not_found", code, stderr)
	}
}

// TestMinInterval: two hosts run a job without a tick, the second a while
// after the first: with --min-interval the second is not won (too_soon,
// --skipped-exit-code, one line naming the run it follows) and COMMAND
// never starts; without it, it runs.
func TestMinInterval(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "ran")
	command := []string{"sh", "-c", `echo x >> "$0"`, out}
	run := func(owner string, flags ...string) (int, string) {
		args := append(append([]string{"run", "--owner", owner}, flags...), append([]string{"nightly-sync", "--"}, command...)...)
		code, _, stderr := leasectl(t, userToken, args...)
		return code, stderr
	}
	if code, stderr := run("host-a", "--min-interval", "1h"); code != 0 || stderr != "" {
		t.Fatalf("the first run: exit %d, %q", code, stderr)
	}
	code, stderr := run("host-b", "--min-interval", "1h", "--skipped-exit-code", "4")
	if code != 4 || !strings.Contains(stderr, "too_soon: the previous run (host-a, token 1)") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("the late run: exit %d, %q; want 4 and one too_soon line naming host-a's run", code, stderr)
	}
	if code, stderr := run("host-b"); code != 0 || stderr != "" {
		t.Fatalf("the run without --min-interval: exit %d, %q", code, stderr)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "x\nx\n" {
		t.Errorf("COMMAND ran %q (%v), want twice", b, err)
	}
}

// TestVersion: `leasectl version` and `--version` print the build's version,
// commit, commit time and Go, and call no server.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version", "-version"} {
		var stdout, stderr strings.Builder
		env := environment{apiURL: "http://127.0.0.1:1", stdout: &stdout, stderr: &stderr}
		if got := dispatch([]string{arg}, env); got != 0 {
			t.Fatalf("leasectl %s: exit %d, want 0; stderr %q", arg, got, stderr.String())
		}
		if want := version.Get().String(); stdout.String() != want || stderr.Len() != 0 {
			t.Errorf("leasectl %s wrote %q and %q, want %q and nothing", arg, stdout.String(), stderr.String(), want)
		}
	}
}
