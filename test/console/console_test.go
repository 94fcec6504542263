// Package console_test drives the operations console in a headless
// Chromium against a real leaseapi process on a loopback port, each on a
// fresh Postgres database: what an on-call engineer sees must be what the
// API says, nothing may act without a confirmation, and data (job ids,
// owners) must stay text.
//
// It needs `chromium` on PATH (scripts/ensure-packages.sh chromium:chromium,
// which `make test` runs). LEASEAPI_CONSOLE_SCREENSHOTS=DIR keeps the
// screenshots there (else in the test's temporary directory; their paths
// are logged).
package console_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	_ "github.com/lib/pq"

	"github.com/leaseapi/leaseapi/repo/repotest"
)

func TestMain(m *testing.M) { repotest.WrapTestMain(m) }

// chromiumPath finds the browser or fails the test with one line saying
// how to install it (under -short the caller has skipped already).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not on PATH: run `bash scripts/ensure-packages.sh chromium:chromium` (make test does), or use -short")
	return ""
}

// browser starts one headless Chromium for the test, with a fresh profile
// and nothing that would reach the network on its own.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return ctx
}

// tab opens a new tab (its own sessionStorage) for one subtest, bounded
// in time, that records every dialog and CSP violation of its pages.
func tab(t *testing.T, browserCtx context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
	})
	var mu sync.Mutex
	var dialogs []string
	opening := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range opening {
			if err != nil {
				return
			}
			mu.Lock()
			dialogs = append(dialogs, ev.Message)
			mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	// Installed before any script of the page runs: records the CSP
	// violations (an inline style or script of the console's own would
	// show here).
	const probe = `window.__csp = []; document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));`
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: probe}); err != nil {
		t.Fatalf("install probe: %v", err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if len(dialogs) > 0 {
			t.Errorf("the page opened dialogs (alert/confirm): %q", dialogs)
		}
	})
	return ctx
}

// noCSPViolations checks the probe of the current page.
func noCSPViolations(t *testing.T, ctx context.Context) {
	t.Helper()
	if v := eval[[]string](t, ctx, `window.__csp || []`); len(v) > 0 {
		t.Errorf("Content-Security-Policy violations: %q", v)
	}
}

// run runs the actions, each step bounded to 20 s; on a failure it logs
// what the page shows.
func run(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	for _, a := range actions {
		stepCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := chromedp.Do(stepCtx, a)
		cancel()
		if err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + '\n' + document.body.innerText`))
			t.Fatalf("browser: %v\nthe page:\n%s", err, text)
		}
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// until waits, at most 20 s, for a JavaScript expression to be true.
func until(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + '\n' + document.body.innerText`))
		t.Fatalf("waiting for %s: %v\nthe page:\n%s", expr, err, text)
	}
}

// press clicks the element sel names once it is on the page. The lookup
// and the click are one step in the page: the job view is rebuilt by every
// refresh, so a node found in one step can be gone by the next
// (chromedp.Click finds the node, then clicks it).
func press(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	until(t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true; })()`, sel))
}

// ---- leaseapi --------------------------------------------------------

var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "leaseapi-console-test-")
	if err != nil {
		return "", err
	}
	out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "github.com/leaseapi/leaseapi/cmd/leaseapi").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "leaseapi"), nil
})

// server is one leaseapi process on its own database.
type server struct {
	url   string
	dsn   string
	admin string // the configured admin token; "" on an open API
	stop  func() // stops the process (also done at cleanup)
}

func startServer(t *testing.T, closed bool) *server {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &server{url: "http://" + addr, dsn: repotest.NewPostgresURL(t)}
	// Private webhook targets allowed: the tests' receivers are on loopback.
	env := []string{"LEASEAPI_ADDR=" + addr, "LEASEAPI_DATABASE_URL=" + s.dsn, "LEASEAPI_LOG_LEVEL=warn", "LEASEAPI_MIN_TTL=1s",
		"LEASEAPI_WEBHOOK_ALLOW_PRIVATE=true"}
	if closed {
		s.admin = "admin-" + randomHex(16)
		env = append(env, "LEASEAPI_ADMIN_TOKENS="+s.admin)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.stop = sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("leaseapi output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-done:
			t.Fatalf("leaseapi exited before it was ready:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaseapi not ready after 30s:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// call sends one API request with token (none when empty) and decodes a
// 2xx answer into out; it returns the status.
func (s *server) call(t *testing.T, token, method, path string, body, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

func (s *server) must(t *testing.T, method, path string, body, out any) {
	t.Helper()
	if st := s.call(t, s.admin, method, path, body, out); st/100 != 2 {
		t.Fatalf("%s %s: status %d", method, path, st)
	}
}

type lease struct {
	JobID  string `json:"jobId"`
	Owner  string `json:"owner"`
	Token  int64  `json:"token"`
	State  string `json:"state"`
	Paused bool   `json:"paused"`
}

func (s *server) acquire(t *testing.T, job, owner string, ttlMs int) lease {
	t.Helper()
	var l lease
	s.must(t, http.MethodPost, "/leases/"+job+"/acquire", map[string]any{"owner": owner, "ttlMs": ttlMs}, &l)
	return l
}

func (s *server) release(t *testing.T, l lease, outcome string) {
	t.Helper()
	s.must(t, http.MethodPost, "/leases/"+l.JobID+"/release", map[string]any{"owner": l.Owner, "token": l.Token, "outcome": outcome}, nil)
}

func (s *server) get(t *testing.T, job string) lease {
	t.Helper()
	var l lease
	s.must(t, http.MethodGet, "/leases/"+job, nil, &l)
	return l
}

// credential creates a credential through the API and returns its token.
func (s *server) credential(t *testing.T, name, role string, scopes ...string) string {
	t.Helper()
	var c struct {
		Token string `json:"token"`
	}
	s.must(t, http.MethodPost, "/credentials", map[string]any{"name": name, "role": role, "scopes": scopes}, &c)
	return c.Token
}

// ---- the console -----------------------------------------------------

// open loads the console at hash; with a token, it answers the token
// prompt first, as a user would.
func open(t *testing.T, ctx context.Context, s *server, hash, token string) {
	t.Helper()
	run(t, ctx, chromedp.Navigate(s.url+"/ui/"+hash))
	if token == "" {
		return
	}
	run(t, ctx,
		chromedp.WaitVisible(chromedp.CSS(`#login-token`)),
		chromedp.SendKeys(chromedp.CSS(`#login-token`), token),
		chromedp.Click(chromedp.CSS(`#login-ok`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog#login[open]`)),
	)
}

// textOf returns the text content of every element matching sel.
func textOf(t *testing.T, ctx context.Context, sel string) []string {
	t.Helper()
	return eval[[]string](t, ctx, fmt.Sprintf(`Array.from(document.querySelectorAll(%q), (e) => e.textContent.trim())`, sel))
}

// screenshot saves a PNG of the page and logs where.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("LEASEAPI_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

func TestConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and chromium")
	}
	chromiumPath(t)
	// The binary is built once for every server of the test, subtests'
	// included, and removed when the whole test ends.
	t.Cleanup(func() {
		if bin, err := buildOnce(); err == nil {
			_ = os.RemoveAll(filepath.Dir(bin))
		}
	})
	bctx := browser(t)
	closed := startServer(t, true)
	openAPI := startServer(t, false)

	// Seeds of the closed server: a mix of every state.
	held1 := closed.acquire(t, "billing:invoices", "pod-a", 600000)
	_ = closed.acquire(t, "billing:reminders", "pod-b", 600000)
	ok := closed.acquire(t, "reports.daily", "pod-c", 600000)
	closed.release(t, ok, "succeeded")
	bad := closed.acquire(t, "reports.weekly", "pod-a", 600000)
	closed.release(t, bad, "failed")
	rev := closed.acquire(t, "sync:crm", "pod-b", 600000)
	closed.must(t, http.MethodDelete, "/leases/sync:crm", nil, nil)
	_ = rev
	exp := closed.acquire(t, "cleanup.tmp", "pod-c", 1000)
	closed.must(t, http.MethodPost, "/leases/reports.daily/pause", map[string]any{"reason": "quarter close"}, nil)
	for deadline := time.Now().Add(20 * time.Second); closed.get(t, exp.JobID).State != "expired"; {
		if time.Now().After(deadline) {
			t.Fatal("cleanup.tmp did not expire")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A scheduled job with a history: runs of different lengths, one failed,
	// on the ticks of the last hour.
	history := []struct {
		outcome string
		run     time.Duration
	}{{"succeeded", 120}, {"succeeded", 180}, {"failed", 60}, {"succeeded", 150}, {"succeeded", 240}, {"succeeded", 90}}
	firstTick := time.Now().UTC().Truncate(10 * time.Minute).Add(-time.Duration(len(history)) * 10 * time.Minute)
	for i, h := range history {
		var l lease
		closed.must(t, http.MethodPost, "/leases/etl:nightly/acquire", map[string]any{
			"owner": fmt.Sprintf("worker-%d", 1+i%2), "ttlMs": 600000, "schedule": "*/10 * * * *",
			"tick": firstTick.Add(time.Duration(i) * 10 * time.Minute).Format(time.RFC3339),
		}, &l)
		time.Sleep(h.run * time.Millisecond) // the job's work: a duration to chart
		closed.release(t, l, h.outcome)
	}
	reader := closed.credential(t, "viewer", "read", "*")

	t.Run("Overview", func(t *testing.T) {
		ctx := tab(t, bctx)
		open(t, ctx, closed, "#/", closed.admin)
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`[data-stat="held"]`)))
		// The header names the version the server reports on /healthz.
		var health struct {
			Version string `json:"version"`
		}
		closed.must(t, http.MethodGet, "/healthz", nil, &health)
		if health.Version == "" {
			t.Fatal("/healthz reports no version")
		}
		until(t, ctx, fmt.Sprintf(`document.getElementById('version').textContent === %q`, health.Version))
		var stats struct {
			Runs24h map[string]int `json:"runs24h"`
		}
		closed.must(t, http.MethodGet, "/stats", nil, &stats)
		want := map[string]string{
			// etl:nightly is released: 2 released in all, with reports.daily.
			"held": "2", "released": "3", "expired": "1", "revoked": "1", "paused": "1", "overdue": "0",
			"runs-succeeded": "6", "runs-failed": "2", "runs-revoked": "1",
			"runs-expired": fmt.Sprint(stats.Runs24h["expired"]), "runs-missed": fmt.Sprint(stats.Runs24h["missed"]),
		}
		for key, w := range want {
			got := textOf(t, ctx, fmt.Sprintf(`[data-stat=%q]`, key))
			if len(got) != 1 || got[0] != w {
				t.Errorf("overview %s: got %q, want %s", key, got, w)
			}
		}
		// The newest failed runs across jobs, with their job.
		rows := textOf(t, ctx, `table.runs tbody tr[data-outcome="failed"] th`)
		if len(rows) != 2 || rows[0] != "etl:nightly" || rows[1] != "reports.weekly" {
			t.Errorf("failed runs on the overview: %q, want etl:nightly then reports.weekly", rows)
		}
		// The first page of the lease table.
		if jobs := textOf(t, ctx, `table.leases tbody th`); len(jobs) != 7 {
			t.Errorf("lease table on the overview: %q, want 7 jobs", jobs)
		}
		noCSPViolations(t, ctx)
		screenshot(t, ctx, "console-overview")
	})

	t.Run("LeaseTable", func(t *testing.T) {
		for i := range 7 {
			l := closed.acquire(t, fmt.Sprintf("page:job-%02d", i), "pager", 600000)
			if i%2 == 0 {
				closed.release(t, l, "succeeded")
			}
		}
		ctx := tab(t, bctx)
		open(t, ctx, closed, "#/leases?prefix=page:&limit=3", closed.admin)
		jobsOn := func() []string {
			run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`table.leases tbody tr`)))
			return textOf(t, ctx, `table.leases tbody th`)
		}
		waitHash := func(want string) {
			t.Helper()
			until(t, ctx, fmt.Sprintf(`location.hash === %q && document.querySelector('main').getAttribute('aria-busy') === 'false'`, want))
		}
		if got := strings.Join(jobsOn(), " "); got != "page:job-00 page:job-01 page:job-02" {
			t.Fatalf("page 1: %s", got)
		}
		press(t, ctx, `#next`)
		until(t, ctx, `document.querySelector('#page-info')?.textContent.startsWith('page 2')`)
		if got := strings.Join(jobsOn(), " "); got != "page:job-03 page:job-04 page:job-05" {
			t.Errorf("page 2: %s", got)
		}
		press(t, ctx, `#next`)
		until(t, ctx, `document.querySelector('#page-info')?.textContent.startsWith('page 3')`)
		if got := strings.Join(jobsOn(), " "); got != "page:job-06" {
			t.Errorf("page 3: %s", got)
		}
		if !eval[bool](t, ctx, `document.querySelector('#next').disabled`) {
			t.Error("Next is enabled on the last page")
		}
		press(t, ctx, `#prev`)
		until(t, ctx, `document.querySelector('#page-info')?.textContent.startsWith('page 2')`)
		if got := strings.Join(jobsOn(), " "); got != "page:job-03 page:job-04 page:job-05" {
			t.Errorf("back to page 2: %s", got)
		}
		// Filters through the form: state held, prefix page: (the odd jobs).
		run(t, ctx,
			chromedp.SetValue(chromedp.CSS(`#f-state`), "held"),
			chromedp.SetValue(chromedp.CSS(`#f-limit`), ""),
			chromedp.Click(chromedp.CSS(`.filters button[type=submit]`)))
		waitHash("#/leases?state=held&prefix=page%3A")
		// The hash changes before the filtered page loads: wait for its
		// rows (until fails with the page's text if they never come).
		until(t, ctx, `Array.from(document.querySelectorAll('table.leases tbody th'), (e) => e.textContent.trim()).join(' ') === 'page:job-01 page:job-03 page:job-05'`)
		for _, st := range textOf(t, ctx, `table.leases tbody td:nth-of-type(1)`) {
			if st != "held" {
				t.Errorf("state column %q, want the text held", st)
			}
		}
		// A filter being typed survives the 5 s refresh, and so does the focus.
		run(t, ctx, chromedp.Focus(chromedp.CSS(`#f-owner`)), chromedp.SendKeys(chromedp.CSS(`#f-owner`), "pod-"))
		before := textOf(t, ctx, `#status`)[0]
		until(t, ctx, fmt.Sprintf(`document.querySelector('#status').textContent !== %q`, before))
		if v := eval[string](t, ctx, `document.querySelector('#f-owner').value + '|' + document.activeElement.id`); v != "pod-|f-owner" {
			t.Errorf("after a refresh the owner filter and focus are %q, want the typed pod- and the focus still in it", v)
		}
		// Owner and paused filters, by link.
		open(t, ctx, closed, "#/leases?owner=pod-a", "")
		until(t, ctx, `document.querySelectorAll('table.leases tbody tr').length === 2`)
		if got := strings.Join(textOf(t, ctx, `table.leases tbody th`), " "); got != "billing:invoices reports.weekly" {
			t.Errorf("owner=pod-a: %s", got)
		}
		open(t, ctx, closed, "#/leases?paused=true", "")
		until(t, ctx, `document.querySelectorAll('table.leases tbody tr').length === 1`)
		if got := strings.Join(textOf(t, ctx, `table.leases tbody th`), " "); got != "reports.daily" {
			t.Errorf("paused=true: %s", got)
		}
		open(t, ctx, closed, "#/leases?prefix=nothing-here", "")
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`p.empty`)))
		noCSPViolations(t, ctx)
	})

	t.Run("JobPage", func(t *testing.T) {
		ctx := tab(t, bctx)
		open(t, ctx, closed, "#/jobs/etl:nightly", closed.admin)
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`table.runs tbody tr`)))
		// Newest first: the history backwards.
		var wantOutcomes, wantOwners, wantTokens []string
		for i := len(history) - 1; i >= 0; i-- {
			wantOutcomes = append(wantOutcomes, history[i].outcome)
			wantOwners = append(wantOwners, fmt.Sprintf("worker-%d", 1+i%2))
			wantTokens = append(wantTokens, fmt.Sprint(i+1))
		}
		for _, c := range []struct {
			what, sel string
			want      []string
		}{
			{"outcomes", `table.runs tbody td:nth-of-type(1)`, wantOutcomes},
			{"owners", `table.runs tbody td.owner`, wantOwners},
			{"tokens", `table.runs tbody td:nth-of-type(3)`, wantTokens},
		} {
			if got := textOf(t, ctx, c.sel); strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("run %s: %q, want %q", c.what, got, c.want)
			}
		}
		if bars := eval[int](t, ctx, `document.querySelectorAll('svg.chart rect.bar').length`); bars != len(history) {
			t.Errorf("duration chart: %d bars, want %d", bars, len(history))
		}
		if sched := textOf(t, ctx, `.facts code`); len(sched) != 1 || sched[0] != "*/10 * * * *" {
			t.Errorf("schedule: %q", sched)
		}
		if id := textOf(t, ctx, `#job-id`); len(id) != 1 || id[0] != "etl:nightly" {
			t.Errorf("job id heading %q", id)
		}
		noCSPViolations(t, ctx)
		screenshot(t, ctx, "console-job")
	})

	t.Run("Policies", func(t *testing.T) {
		// In job id order the alerting job comes last; the console lists
		// it first, with its reason.
		fine, none, failing := "alert:a-fine", "alert:b-none", "alert:c-failing"
		closed.release(t, closed.acquire(t, fine, "pod-a", 600000), "succeeded")
		closed.release(t, closed.acquire(t, none, "pod-a", 600000), "succeeded")
		for range 2 {
			closed.release(t, closed.acquire(t, failing, "pod-a", 600000), "failed")
		}
		closed.must(t, http.MethodPut, "/leases/"+fine+"/policy", map[string]any{"consecutiveFailures": 1}, nil)
		var policy struct {
			Status       string   `json:"status"`
			AlertReasons []string `json:"alertReasons"`
		}
		closed.must(t, http.MethodPut, "/leases/"+failing+"/policy", map[string]any{"consecutiveFailures": 2, "missedTicks": 3}, &policy)
		if policy.Status != "alerting" || !slices.Equal(policy.AlertReasons, []string{"failures"}) {
			t.Fatalf("policy of %s: %+v, want alerting for failures", failing, policy)
		}

		ctx := tab(t, bctx)
		open(t, ctx, closed, "#/leases?prefix=alert:", closed.admin)
		until(t, ctx, `document.querySelectorAll('table.leases tbody tr').length === 3`)
		if got := textOf(t, ctx, `table.leases tbody th`); !slices.Equal(got, []string{failing, fine, none}) {
			t.Errorf("lease table: %q, want the alerting %s first, then the others by job id", got, failing)
		}
		if got := textOf(t, ctx, `table.leases tbody tr[data-job="`+failing+`"] td:nth-of-type(1)`); len(got) != 1 || got[0] != "released alerting failures" {
			t.Errorf("state of %s: %q, want released alerting failures", failing, got)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('table.leases .flag-alerting').length`); n != 1 {
			t.Errorf("%d jobs flagged alerting, want 1", n)
		}
		if caption := textOf(t, ctx, `table.leases caption`); len(caption) != 1 || !strings.HasSuffix(caption[0], "; alerting job first") {
			t.Errorf("caption %q, want it to say the alerting job comes first", caption)
		}
		screenshot(t, ctx, "console-alerting")
		// The lease table's filter, and the overview's section, find the
		// alerting jobs on any page.
		open(t, ctx, closed, "#/leases?alerting=true", "")
		until(t, ctx, `document.querySelector('#f-alerting')?.checked === true && document.querySelectorAll('table.leases tbody tr').length === 1`)
		if got := textOf(t, ctx, `table.leases tbody th`); !slices.Equal(got, []string{failing}) {
			t.Errorf("alerting only: %q, want %s", got, failing)
		}
		open(t, ctx, closed, "#/", "")
		until(t, ctx, `document.querySelector('#sec-alerting-jobs') !== null`)
		if got := textOf(t, ctx, `section[aria-labelledby="sec-alerting-jobs"] table.leases tbody th`); !slices.Equal(got, []string{failing}) {
			t.Errorf("overview's alerting jobs: %q, want %s", got, failing)
		}

		// The alerting job's page: its policy, status and reasons.
		open(t, ctx, closed, "#/jobs/"+failing, "")
		until(t, ctx, fmt.Sprintf(`document.querySelector('#job-id')?.textContent === %q && document.querySelector('#policy-status') !== null`, failing))
		for sel, want := range map[string]string{`#policy-status`: "alerting", `#policy-reasons`: "failures", `h1 .flag-alerting`: "alerting"} {
			if got := textOf(t, ctx, sel); len(got) != 1 || got[0] != want {
				t.Errorf("%s on the page of %s: %q, want %s", sel, failing, got, want)
			}
		}
		if got := textOf(t, ctx, `#policy-conditions li`); !slices.Equal(got, []string{"2 runs in a row failed or expired", "3 missed ticks in a row"}) {
			t.Errorf("conditions of %s: %q", failing, got)
		}
		screenshot(t, ctx, "console-job-policy")
		// An ok job's policy, and a job without one.
		// The tab keeps the page: wait for the job's own view.
		open(t, ctx, closed, "#/jobs/"+fine, "")
		until(t, ctx, fmt.Sprintf(`document.querySelector('#job-id')?.textContent === %q && document.querySelector('#policy-status') !== null`, fine))
		if got := textOf(t, ctx, `#policy-status`); got[0] != "ok" || eval[int](t, ctx, `document.querySelectorAll('#policy-reasons, .flag-alerting').length`) != 0 {
			t.Errorf("the page of %s: status %q with reasons shown, want ok without any", fine, got)
		}
		open(t, ctx, closed, "#/jobs/"+none, "")
		until(t, ctx, fmt.Sprintf(`document.querySelector('#job-id')?.textContent === %q && document.querySelector('#policy-none') !== null`, none))
		noCSPViolations(t, ctx)
	})

	t.Run("RevokeAsksFirst", func(t *testing.T) {
		ctx := tab(t, bctx)
		open(t, ctx, closed, "#/jobs/billing:invoices", closed.admin)
		press(t, ctx, `#act-revoke`)
		run(t, ctx,
			chromedp.WaitVisible(chromedp.CSS(`dialog#confirm[open]`)),
			chromedp.Click(chromedp.CSS(`#confirm-cancel`)),
			chromedp.WaitNotPresent(chromedp.CSS(`dialog#confirm[open]`)))
		if l := closed.get(t, "billing:invoices"); l.State != "held" || l.Token != held1.Token {
			t.Fatalf("after cancel: %+v, want held with token %d", l, held1.Token)
		}
		// Escape cancels too.
		press(t, ctx, `#act-revoke`)
		run(t, ctx,
			chromedp.WaitVisible(chromedp.CSS(`dialog#confirm[open]`)),
			chromedp.KeyEvent(kb.Escape),
			chromedp.WaitNotPresent(chromedp.CSS(`dialog#confirm[open]`)))
		if l := closed.get(t, "billing:invoices"); l.State != "held" {
			t.Fatalf("after Escape: %+v, want held", l)
		}
		press(t, ctx, `#act-revoke`)
		run(t, ctx,
			chromedp.WaitVisible(chromedp.CSS(`dialog#confirm[open]`)),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)))
		// The page reads the job again: revoked, no revoke button.
		until(t, ctx, `document.querySelector('h1 .badge')?.textContent === 'revoked'`)
		if l := closed.get(t, "billing:invoices"); l.State != "revoked" || l.Token != held1.Token+1 {
			t.Errorf("after confirm: %+v, want revoked with token %d", l, held1.Token+1)
		}
		if eval[int](t, ctx, `document.querySelectorAll('#act-revoke').length`) != 0 {
			t.Error("a revoke button on a revoked lease")
		}
		// Pause asks for a reason and records it.
		press(t, ctx, `#act-pause`)
		run(t, ctx,
			chromedp.WaitVisible(chromedp.CSS(`#confirm-reason`)),
			chromedp.SendKeys(chromedp.CSS(`#confirm-reason`), "disk full"),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)),
			chromedp.WaitVisible(chromedp.CSS(`#act-resume`)))
		var l struct {
			Paused       bool   `json:"paused"`
			PausedReason string `json:"pausedReason"`
		}
		closed.must(t, http.MethodGet, "/leases/billing:invoices", nil, &l)
		if !l.Paused || l.PausedReason != "disk full" {
			t.Errorf("after pause: %+v", l)
		}
		noCSPViolations(t, ctx)
	})

	t.Run("RepairAsksFirst", func(t *testing.T) {
		job := "repair.asks"
		granted := closed.acquire(t, job, "pod-a", 600000)
		closed.release(t, granted, "succeeded")
		ctx := tab(t, bctx)
		open(t, ctx, closed, "#/jobs/"+job, closed.admin)
		press(t, ctx, `#act-repair`)
		run(t, ctx,
			chromedp.WaitVisible(chromedp.CSS(`dialog#confirm[open] #confirm-reason`)),
			chromedp.Click(chromedp.CSS(`#confirm-cancel`)),
			chromedp.WaitNotPresent(chromedp.CSS(`dialog#confirm[open]`)))
		if !eval[bool](t, ctx, `document.getElementById('notice').hidden`) {
			t.Errorf("after cancel: notice %q, want none (nothing sent)", textOf(t, ctx, `#notice`))
		}
		press(t, ctx, `#act-repair`)
		run(t, ctx,
			chromedp.WaitVisible(chromedp.CSS(`#confirm-reason`)),
			chromedp.SendKeys(chromedp.CSS(`#confirm-reason`), "clock was fast"),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)))
		until(t, ctx, `(document.getElementById('notice').textContent || '').startsWith('Repaired')`)
		// A job with nothing ahead is left as it is.
		if l := closed.get(t, job); l.Token != granted.Token || l.State != "released" {
			t.Errorf("after repair: %+v, want released with token %d unchanged", l, granted.Token)
		}
		noCSPViolations(t, ctx)
	})

	t.Run("ReadOnlyCredential", func(t *testing.T) {
		ctx := tab(t, bctx)
		open(t, ctx, closed, "#/jobs/billing:reminders", reader)
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#admin-note`)))
		if buttons := eval[int](t, ctx, `document.querySelectorAll('.actions button, #act-revoke, #act-pause, #act-trigger').length`); buttons != 0 {
			t.Errorf("a read credential sees %d admin buttons", buttons)
		}
		if who := textOf(t, ctx, `#who span`); len(who) == 0 || !strings.Contains(who[0], "viewer · read") {
			t.Errorf("who: %q", who)
		}
	})

	t.Run("RunNowAsksFirst", func(t *testing.T) {
		job := "runnow.asks"
		openAPI.release(t, openAPI.acquire(t, job, "pod-a", 600000), "succeeded")
		ctx := tab(t, bctx)
		open(t, ctx, openAPI, "#/jobs/"+job, "")
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#act-trigger`)))
		if got := textOf(t, ctx, `#owed-none`); len(got) != 1 || got[0] != "none" {
			t.Errorf("owed tick of a job that owes nothing: %q, want none", got)
		}
		// Cancel and Escape send nothing: no notice (a trigger that was
		// sent says Triggered, or that it failed) and nothing owed.
		press(t, ctx, `#act-trigger`)
		run(t, ctx,
			chromedp.WaitVisible(chromedp.CSS(`dialog#confirm[open] #confirm-reason`)),
			chromedp.Click(chromedp.CSS(`#confirm-cancel`)),
			chromedp.WaitNotPresent(chromedp.CSS(`dialog#confirm[open]`)))
		press(t, ctx, `#act-trigger`)
		run(t, ctx,
			chromedp.WaitVisible(chromedp.CSS(`dialog#confirm[open]`)),
			chromedp.KeyEvent(kb.Escape),
			chromedp.WaitNotPresent(chromedp.CSS(`dialog#confirm[open]`)))
		if !eval[bool](t, ctx, `document.getElementById('notice').hidden`) {
			t.Errorf("after cancel: notice %q, want none (nothing sent)", textOf(t, ctx, `#notice`))
		}
		var l struct {
			OwedTick *string `json:"owedTick"`
		}
		openAPI.must(t, http.MethodGet, "/leases/"+job, nil, &l)
		if l.OwedTick != nil {
			t.Fatalf("after cancel: the job owes %s, want nothing", *l.OwedTick)
		}
		// A paused job cannot be triggered: no run now on offer.
		openAPI.must(t, http.MethodPost, "/leases/"+job+"/pause", map[string]any{}, nil)
		open(t, ctx, openAPI, "#/jobs/"+job, "")
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#act-resume`)))
		if n := eval[int](t, ctx, `document.querySelectorAll('#act-trigger').length`); n != 0 {
			t.Errorf("a paused job offers run now (%d buttons)", n)
		}
		noCSPViolations(t, ctx)
	})

	t.Run("RunNowTriggers", func(t *testing.T) {
		job := "runnow.triggers"
		closed.release(t, closed.acquire(t, job, "pod-a", 600000), "succeeded")
		ctx := tab(t, bctx)
		open(t, ctx, closed, "#/jobs/"+job, closed.admin)
		press(t, ctx, `#act-trigger`)
		run(t, ctx,
			chromedp.WaitVisible(chromedp.CSS(`#confirm-reason`)),
			chromedp.SendKeys(chromedp.CSS(`#confirm-reason`), "rerun after the fix"),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)),
			chromedp.WaitVisible(chromedp.CSS(`#owed-tick`)))
		var l struct {
			OwedTick   *string `json:"owedTick"`
			OwedReason *string `json:"owedReason"`
		}
		closed.must(t, http.MethodGet, "/leases/"+job, nil, &l)
		if l.OwedTick == nil || l.OwedReason == nil || *l.OwedReason != "manual" {
			t.Fatalf("after run now: owedTick %v owedReason %v, want a manual tick", l.OwedTick, l.OwedReason)
		}
		if got := eval[string](t, ctx, `document.getElementById('owed-tick').getAttribute('datetime')`); got != *l.OwedTick {
			t.Errorf("owed tick shown %q, want %q", got, *l.OwedTick)
		}
		if got := textOf(t, ctx, `#owed-reason`); len(got) != 1 || got[0] != "run now" {
			t.Errorf("owed reason shown %q, want run now", got)
		}
		open(t, ctx, closed, "#/leases?prefix=runnow.", "") // the tab keeps its token
		until(t, ctx, `document.querySelector('table.leases tbody tr[data-job="runnow.triggers"] .flag-owed') !== null`)
		// Cancel run now, confirmed: nothing owed any more.
		open(t, ctx, closed, "#/jobs/"+job, "")
		press(t, ctx, `#act-cancelTrigger`)
		run(t, ctx,
			chromedp.WaitVisible(chromedp.CSS(`dialog#confirm[open]`)),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)),
			chromedp.WaitVisible(chromedp.CSS(`#owed-none`)))
		l.OwedTick = nil
		closed.must(t, http.MethodGet, "/leases/"+job, nil, &l)
		if l.OwedTick != nil {
			t.Errorf("after cancel run now: the job owes %s", *l.OwedTick)
		}
		noCSPViolations(t, ctx)
	})

	t.Run("WrongToken", func(t *testing.T) {
		ctx := tab(t, bctx)
		open(t, ctx, closed, "#/leases", "lk_000000000000.wrong")
		// The 401 state, after the token was refused.
		until(t, ctx, `document.querySelector('#auth-state')?.textContent.includes('refused the token')`)
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`dialog#login[open] #login-error`)))
		// The token is kept in sessionStorage only, never in a cookie.
		if cookie := eval[string](t, ctx, `document.cookie`); cookie != "" {
			t.Errorf("cookies: %q", cookie)
		}
		// A good token then works.
		run(t, ctx,
			chromedp.SendKeys(chromedp.CSS(`#login-token`), reader),
			chromedp.Click(chromedp.CSS(`#login-ok`)),
			chromedp.WaitVisible(chromedp.CSS(`table.leases`)))
	})

	t.Run("DataIsText", func(t *testing.T) {
		payloads := []string{`<img/src=x/onerror=window.__xss=1>`, `"><script>window.__xss=2</script>`, `'><svg/onload=window.__xss=3>`}
		for i, owner := range payloads {
			openAPI.acquire(t, fmt.Sprintf("xss.%d", i), owner, 600000)
		}
		ctx := tab(t, bctx)
		// A job id from the address: not a valid id, shown as text.
		hostile := `<img src=x onerror=window.__xss=4>`
		open(t, ctx, openAPI, "#/jobs/"+hostile, "")
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`.crumbs span`)))
		if got := textOf(t, ctx, `.crumbs span`); len(got) != 1 || got[0] != hostile {
			t.Errorf("job id from the hash: %q, want the text %q", got, hostile)
		}
		open(t, ctx, openAPI, "#/leases?prefix=xss.", "")
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`table.leases tbody tr`)))
		if got := textOf(t, ctx, `table.leases td.owner`); strings.Join(got, "\n") != strings.Join(payloads, "\n") {
			t.Errorf("owners: %q, want the payloads as text %q", got, payloads)
		}
		open(t, ctx, openAPI, "#/jobs/xss.0", "")
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#job-owner`)))
		if got := textOf(t, ctx, `#job-owner`); got[0] != payloads[0] {
			t.Errorf("owner on the job page: %q", got)
		}
		// Open mode: every admin action is offered.
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#act-revoke`)))
		injected := eval[struct {
			XSS      any `json:"xss"`
			Elements int `json:"elements"`
		}](t, ctx, `({xss: window.__xss ?? null, elements: document.querySelectorAll('main img, main script, main svg:not(.chart), main [onerror], main [onload]').length})`)
		if injected.XSS != nil || injected.Elements != 0 {
			t.Errorf("injected markup: __xss=%v, %d elements", injected.XSS, injected.Elements)
		}
		noCSPViolations(t, ctx)
	})

	t.Run("WebhooksReadOnly", func(t *testing.T) {
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		t.Cleanup(receiver.Close)
		var billing, reports struct {
			ID     string `json:"id"`
			Secret string `json:"secret"`
		}
		closed.must(t, http.MethodPost, "/webhooks", map[string]any{
			"url": receiver.URL + "/hooks/billing-secret-path", "events": []string{"run.failed", "job.overdue"}, "scopes": []string{"billing:"},
		}, &billing)
		closed.must(t, http.MethodPost, "/webhooks", map[string]any{
			"url": "https://hooks.slack.example/services/T0/B0/reports-secret", "events": []string{"job.overdue"}, "scopes": []string{"reports."},
			"format": "slack",
		}, &reports)
		// One delivered event for billing's webhook.
		l := closed.acquire(t, "billing:payouts", "pod-w", 600000)
		closed.release(t, l, "failed")
		for deadline := time.Now().Add(20 * time.Second); ; {
			var log struct {
				Deliveries []struct {
					Delivered bool `json:"delivered"`
				} `json:"deliveries"`
			}
			closed.must(t, http.MethodGet, "/webhooks/"+billing.ID+"/deliveries", nil, &log)
			if len(log.Deliveries) > 0 && log.Deliveries[0].Delivered {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run.failed of billing:payouts was not delivered: %+v", log)
			}
			time.Sleep(50 * time.Millisecond)
		}
		billingAdmin := closed.credential(t, "billing-admin", "admin", "billing:")

		ctx := tab(t, bctx)
		open(t, ctx, closed, "#/webhooks", billingAdmin)
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`table.webhooks tbody tr`)))
		screenshot(t, ctx, "webhooks")
		if ids := textOf(t, ctx, `table.webhooks tbody th`); len(ids) != 1 || ids[0] != billing.ID {
			t.Errorf("billing-admin sees webhooks %q, want only %s", ids, billing.ID)
		}
		row := textOf(t, ctx, `table.webhooks tbody tr[data-webhook="`+billing.ID+`"] td`)
		want := []string{"http://" + strings.TrimPrefix(receiver.URL, "http://") + "/…", "run.failed, job.overdue", "standard", "billing:"}
		if len(row) != 5 || !slices.Equal(row[:4], want) || !strings.HasPrefix(row[4], "delivered HTTP 204 run.failed of billing:payouts, attempt 1") {
			t.Errorf("billing's row: %q, want %q and its delivery", row, want)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('main button, main form, main input').length`); n != 0 {
			t.Errorf("the webhook list offers %d controls, want none (read-only)", n)
		}
		page := eval[string](t, ctx, `document.body.innerText`)
		for _, secret := range []string{billing.Secret, "whsec_", "billing-secret-path"} {
			if strings.Contains(page, secret) {
				t.Errorf("the page shows %q", secret)
			}
		}
		if hidden := eval[bool](t, ctx, `document.getElementById('nav-webhooks').hidden`); hidden {
			t.Error("an admin has no link to the webhooks")
		}

		// The unscoped admin sees both, the other one not delivered yet.
		ctx = tab(t, bctx)
		open(t, ctx, closed, "#/webhooks", closed.admin)
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`table.webhooks tbody tr[data-webhook="`+reports.ID+`"]`)))
		if got := textOf(t, ctx, `tr[data-webhook="`+reports.ID+`"] td`); len(got) != 5 ||
			got[0] != "https://hooks.slack.example/…" || got[2] != "slack" || got[4] != "none yet" {
			t.Errorf("reports' row: %q", got)
		}
		noCSPViolations(t, ctx)

		// A reader is offered no link, and the page says what it needs.
		ctx = tab(t, bctx)
		open(t, ctx, closed, "#/webhooks", reader)
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#webhooks-forbidden`)))
		if hidden := eval[bool](t, ctx, `document.getElementById('nav-webhooks').hidden`); !hidden {
			t.Error("a reader is offered the webhooks link")
		}
	})

	t.Run("Groups", func(t *testing.T) {
		srv := startServer(t, false)
		srv.must(t, http.MethodPut, "/groups/reports:warehouse", map[string]any{"limit": 1}, nil)
		srv.must(t, http.MethodPut, "/groups/sync.partner", map[string]any{"limit": 3}, nil)
		srv.must(t, http.MethodPost, "/leases/reports:daily/acquire", map[string]any{"owner": "pod-a", "ttlMs": 600000, "group": "reports:warehouse"}, nil)
		ctx := tab(t, bctx)
		open(t, ctx, srv, "#/groups", "")
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`table.groups tbody tr`)))
		screenshot(t, ctx, "groups")
		if names := textOf(t, ctx, `table.groups tbody th`); !slices.Equal(names, []string{"reports:warehouse", "sync.partner"}) {
			t.Errorf("groups %q, want reports:warehouse and sync.partner", names)
		}
		// The full group with its holder: limit, held, holder, owner, slot,
		// slot token and when the slot frees.
		row := textOf(t, ctx, `tr[data-holder="reports:daily"] td`)
		if len(row) != 7 || !slices.Equal(row[:6], []string{"1", "1 full", "reports:daily", "pod-a", "1", "1"}) || !strings.HasPrefix(row[6], "in ") {
			t.Errorf("reports:warehouse's row: %q", row)
		}
		if row := textOf(t, ctx, `tr[data-group="sync.partner"] td`); !slices.Equal(row, []string{"3", "0", "no holder"}) {
			t.Errorf("sync.partner's row: %q", row)
		}
		noCSPViolations(t, ctx)
	})

	t.Run("StaleWhenServerStops", func(t *testing.T) {
		gone := startServer(t, false)
		gone.acquire(t, "stale:job", "pod-a", 600000)
		ctx := tab(t, bctx)
		open(t, ctx, gone, "#/", "")
		until(t, ctx, `document.body.dataset.status === 'live'`)
		gone.stop()
		// The next refresh fails: the page says so and keeps what it showed.
		until(t, ctx, `document.body.dataset.status === 'stale'`)
		if status := textOf(t, ctx, `#status`); len(status) != 1 || !strings.HasPrefix(status[0], "Stale: the last refresh failed") {
			t.Errorf("status line %q, want it to say the refresh failed", status)
		}
		if held := textOf(t, ctx, `[data-stat="held"]`); len(held) != 1 || held[0] != "1" {
			t.Errorf("held count after the server stopped: %q, want the last known 1", held)
		}
	})

	t.Run("HundredThousandLeases", func(t *testing.T) {
		big := startServer(t, false)
		seedLeases(t, big.dsn, 100000)
		ctx := tab(t, bctx)
		open(t, ctx, big, "#/leases", "")
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`table.leases tbody tr`)))
		jobs := textOf(t, ctx, `table.leases tbody th`)
		if len(jobs) != 50 || jobs[0] != "big-0000001" || jobs[49] != "big-0000050" {
			t.Errorf("first page of 100k: %d rows, %q … ", len(jobs), jobs[:min(len(jobs), 2)])
		}
		if info := textOf(t, ctx, `#page-info`); len(info) != 1 || !strings.Contains(info[0], "more after") {
			t.Errorf("page info %q", info)
		}
	})
}

// seedLeases adds n leases in one statement, a mix of the four states
// (the run history plays no part in the list, so its trigger is off).
func seedLeases(t *testing.T, dsn string, n int) {
	t.Helper()
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{`SET session_replication_role = replica`, seedQuery, `SET session_replication_role = DEFAULT`, `ANALYZE leases`} {
		args := []any{}
		if q == seedQuery {
			args = append(args, n)
		}
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
}

const seedQuery = `
INSERT INTO leases (job_id, owner, token, tick, ttl_ms, acquired_at, renewed_at, expires_at,
	released_at, revoked_at, last_completed_tick, last_outcome)
SELECT 'big-' || lpad(i::text, 7, '0'), 'replica-' || (i % 200), 1 + i % 7,
	date_trunc('minute', now()), 30000, now(), now(),
	CASE i % 4 WHEN 0 THEN now() + interval '1 hour' ELSE now() - interval '1 minute' END,
	CASE i % 4 WHEN 1 THEN now() - interval '1 minute' END,
	CASE i % 4 WHEN 2 THEN now() - interval '1 minute' END,
	CASE i % 4 WHEN 1 THEN date_trunc('minute', now()) END,
	CASE i % 4 WHEN 1 THEN 'succeeded' WHEN 2 THEN 'revoked' END
FROM generate_series(1, $1::bigint) AS i`
