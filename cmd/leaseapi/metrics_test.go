package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leaseapi/leaseapi/deploy/monitoring"
	"github.com/leaseapi/leaseapi/internal/version"
)

// testMetricsToken is the metrics token of scrapeMetrics's leaseapi.
const testMetricsToken = "scrape-token"

// scrapeMetrics starts a leaseapi with the per-job series on, walks it
// through the life of a lease, of a full concurrency group and of a job its
// alert policy holds alerting, so that every labelled metric has a series,
// and returns its /metrics.
func scrapeMetrics(t *testing.T) (srv *server, body []byte) {
	t.Helper()
	cfg := serveConfig(t)
	cfg.MetricsToken, cfg.JobMetrics, cfg.StatsInterval = testMetricsToken, true, 10*time.Millisecond
	srv = startServe(t, cfg)
	job := strings.TrimPrefix(exerciseLease(t, srv.url), srv.url+"/leases/")
	group := exerciseGroup(t, srv.url)
	alerting := exerciseAlerting(t, srv.url)
	// The refresher runs every 10 ms: wait for a refresh after the job's
	// first run ended, which has every series of the job, after the
	// group's grant and after the alerting job's policy was set (bounded).
	for range 1000 {
		body = getMetrics(t, srv.url, testMetricsToken)
		if bytes.Contains(body, []byte(`leaseapi_job_last_success_timestamp_seconds{job_id="`+job+`"`)) &&
			bytes.Contains(body, []byte(`leaseapi_group_held{group="`+group+`",team=""} 1`)) &&
			bytes.Contains(body, []byte(`leaseapi_job_alerting{job_id="`+alerting+`",reason="failures",team=""} 1`)) {
			if !bytes.Contains(body, []byte(`leaseapi_group_full_total{group="`+group+`",team=""} 1`)) {
				t.Fatalf("/metrics does not count the group_full of %s:\n%s", group, body)
			}
			return srv, body
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("/metrics has no series of job %s after 1000 refreshes", job)
	return nil, nil
}

// exerciseAlerting gives a new job on the server at base a failed run and
// then an alert policy that this run makes alerting (for the reason
// failures), and returns the job's id.
func exerciseAlerting(t *testing.T, base string) string {
	t.Helper()
	job := fmt.Sprintf("alerting-%d-%d", time.Now().UnixNano(), jobSeq.Add(1))
	url := base + "/leases/" + job
	if got := do(t, http.MethodPost, url+"/acquire", `{"owner":"replica-a","ttlMs":30000}`); got.status != http.StatusOK {
		t.Fatalf("acquire %s = %d %v, want 200", job, got.status, got.body)
	}
	if got := do(t, http.MethodPost, url+"/release", `{"owner":"replica-a","token":1,"outcome":"failed"}`); got.status != http.StatusOK {
		t.Fatalf("release %s = %d %v, want 200", job, got.status, got.body)
	}
	got := do(t, http.MethodPut, url+"/policy", `{"consecutiveFailures":1}`)
	if got.status != http.StatusOK || got.body["status"] != "alerting" {
		t.Fatalf("PUT /leases/%s/policy = %d %v, want 200 alerting", job, got.status, got.body)
	}
	return job
}

// getMetrics reads base's /metrics with the bearer token (none when empty).
func getMetrics(t *testing.T, base, token string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d, %v", resp.StatusCode, err)
	}
	return body
}

// TestMetricsCarryNoJobIDByDefault: without LEASEAPI_JOB_METRICS no series
// of /metrics names a job or a group, though the refresher has run.
func TestMetricsCarryNoJobIDByDefault(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	cfg.StatsInterval = 10 * time.Millisecond
	srv := startServe(t, cfg)
	job := strings.TrimPrefix(exerciseLease(t, srv.url), srv.url+"/leases/")
	group := exerciseGroup(t, srv.url)
	// Wait until a refresh counted the job's lease and the group's grant,
	// then look (bounded).
	var body []byte
	for i := 0; !bytes.Contains(body, []byte(`leaseapi_leases{state="held"} 2`)); i++ {
		if i == 1000 {
			t.Fatalf("no refresh counted the held lease after 1000 reads:\n%s", body)
		}
		time.Sleep(10 * time.Millisecond)
		body = getMetrics(t, srv.url, "")
	}
	for _, s := range []string{job, "job_id", "leaseapi_job_", group, "leaseapi_group_"} {
		if bytes.Contains(body, []byte(s)) {
			t.Errorf("/metrics without %s contains %q", key("JOB_METRICS"), s)
		}
	}
}

// TestMetricsBuildInfo: a serving leaseapi's /metrics has
// leaseapi_build_info for the build that runs, and /healthz the same version.
func TestMetricsBuildInfo(t *testing.T) {
	t.Parallel()
	srv := startServe(t, serveConfig(t))
	info := version.Get()
	want := fmt.Sprintf(`leaseapi_build_info{commit=%q,goversion=%q,version=%q} 1`, info.Commit, info.GoVersion, info.Version)
	if body := getMetrics(t, srv.url, ""); !bytes.Contains(body, []byte(want)) {
		t.Errorf("/metrics lacks %s:\n%s", want, body)
	}
	if got := do(t, http.MethodGet, srv.url+"/healthz", ""); got.status != http.StatusOK || got.body["version"] != info.Version {
		t.Errorf("GET /healthz = %d %v, want 200 with version %q", got.status, got.body, info.Version)
	}
}

// TestMetricsToken: with LEASEAPI_METRICS_TOKEN, /metrics answers 401 to a
// request without it or with another token, and 200 with it.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	cfg.MetricsToken = testMetricsToken
	srv := startServe(t, cfg)
	for _, auth := range []string{"", "Bearer wrong", "Basic " + testMetricsToken} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.url+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("GET /metrics with Authorization %q = %d, want 401 with a challenge", auth, resp.StatusCode)
		}
	}
	getMetrics(t, srv.url, testMetricsToken)
}

// TestMonitoringReadsServedMetrics holds every PromQL of the alerting rules
// and the dashboard (deploy/monitoring) to the metrics a real leaseapi
// serves: a renamed metric breaks this test, not an alert at 03:00.
func TestMonitoringReadsServedMetrics(t *testing.T) {
	t.Parallel()
	_, body := scrapeMetrics(t)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	served := map[string]bool{
		"up": true, // Prometheus writes it for every scrape target
	}
	for name, f := range families {
		served[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				served[name+suffix] = true
			}
		}
	}
	queries, err := monitoring.Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		names, err := monitoring.MetricNames(q.Expr)
		if err != nil {
			t.Errorf("%s: %v", q.Where, err)
			continue
		}
		for _, name := range names {
			if !served[name] {
				t.Errorf("%s reads %s, which leaseapi does not serve", q.Where, name)
			}
		}
	}
}

// TestMetricsPassPromtool runs `promtool check metrics` on a live /metrics:
// errors fail the test, lint problems (exit status 3) are only logged.
func TestMetricsPassPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := monitoring.Tool("promtool")
	if err != nil {
		t.Fatal(err)
	}
	_, body := scrapeMetrics(t)
	var out bytes.Buffer
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(body), &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		t.Logf("promtool check metrics: lint problems:\n%s", out.String())
	default:
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}

// TestPrometheusScrapesLeaseapi lets a real Prometheus, on a loopback port
// with a temporary configuration that loads deploy/monitoring's rules,
// scrape a real leaseapi: the target is up, a leaseapi metric can be
// queried, and every alerting rule evaluates without error.
func TestPrometheusScrapesLeaseapi(t *testing.T) {
	t.Parallel()
	prometheus, err := monitoring.Tool("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := scrapeMetrics(t)
	prom, addr := startPrometheus(t, prometheus, srv.url, "")

	api := "http://" + addr + "/api/v1/"
	// up is 1 once a scrape succeeded; the counter is served from the start.
	for _, q := range []string{`up{job="leaseapi"} == 1`, `leaseapi_runs_finished_total{job="leaseapi",outcome="missed"}`} {
		poll(t, []*process{prom}, "query "+q, func() (bool, error) {
			var res struct {
				Data struct {
					Result []json.RawMessage `json:"result"`
				} `json:"data"`
			}
			err := getJSON(api+"query?query="+url.QueryEscape(q), &res)
			return len(res.Data.Result) > 0, err
		})
	}
	// Every rule has been evaluated at least once, and without an error.
	poll(t, []*process{prom}, "every rule evaluated without error", func() (bool, error) {
		var res struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := getJSON(api+"rules", &res); err != nil {
			return false, err
		}
		n := 0
		for _, g := range res.Data.Groups {
			for _, r := range g.Rules {
				if r.Health == "err" {
					t.Fatalf("rule %s does not evaluate: %s", r.Name, r.LastError)
				}
				if r.Health != "ok" {
					return false, nil
				}
				n++
			}
		}
		return n > 0, nil
	})
}

// startPrometheus starts the prometheus at path on a loopback port, with
// deploy/monitoring's rules, scraping the leaseapi at base (with
// testMetricsToken) every second and, when alertmanager is not empty,
// sending its alerts to the Alertmanager at that host:port. It returns the
// process and its host:port.
func startPrometheus(t *testing.T, path, base, alertmanager string) (*process, string) {
	t.Helper()
	rules, err := filepath.Abs("../../deploy/monitoring/leaseapi-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var alerting string
	if alertmanager != "" {
		alerting = fmt.Sprintf(`alerting:
  alertmanagers:
    - static_configs:
        - targets: [%q]
`, alertmanager)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %q
%sscrape_configs:
  - job_name: leaseapi
    authorization:
      credentials: %q
    static_configs:
      - targets: [%q]
`, rules, alerting, testMetricsToken, strings.TrimPrefix(base, "http://")), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	return startProcess(t, path,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn"), addr
}

// process is a program a test started; startProcess stops it when the
// test ends.
type process struct {
	name   string
	exited chan error
	logs   *syncBuffer
}

// syncBuffer is a bytes.Buffer that a process writes while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProcess starts path with args, its output kept for the failure
// messages, and stops it (SIGINT, then SIGKILL after waitTimeout) when the
// test ends.
func startProcess(t *testing.T, path string, args ...string) *process {
	t.Helper()
	p := &process{name: filepath.Base(path), exited: make(chan error, 1), logs: &syncBuffer{}}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		done <- err
		p.exited <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(waitTimeout):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%s did not stop within %s", p.name, waitTimeout)
		}
	})
	return p
}

// poll calls check every 100 ms until it reports done; it fails the test
// when one of procs exits or after waitTimeout. An error of check is
// retried: the processes may not answer yet.
func poll(t *testing.T, procs []*process, what string, check func() (bool, error)) {
	t.Helper()
	logs := func() string {
		var s strings.Builder
		for _, p := range procs {
			fmt.Fprintf(&s, "--- %s:\n%s", p.name, p.logs)
		}
		return s.String()
	}
	deadline := time.Now().Add(waitTimeout)
	var last error
	for time.Now().Before(deadline) {
		for _, p := range procs {
			select {
			case err := <-p.exited:
				t.Fatalf("%s exited (%v) before %s\n%s", p.name, err, what, logs())
			default:
			}
		}
		done, err := check()
		if done {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last error: %v)\n%s", what, waitTimeout, last, logs())
}

func getJSON(u string, v any) error {
	resp, err := httpClient.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// freeLoopbackAddr returns a loopback address with a port no one listens on
// now; prometheus takes it a moment later.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
