package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/deploy/monitoring"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// alertReceiver is an Alertmanager webhook receiver: it keeps the alerts
// it was sent.
type alertReceiver struct {
	mu     sync.Mutex
	alerts []webhookAlert
}

// webhookAlert is an alert of Alertmanager's webhook payload.
type webhookAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func (r *alertReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var payload struct {
		Alerts []webhookAlert `json:"alerts"`
	}
	if err := json.NewDecoder(req.Body).Decode(&payload); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.alerts = append(r.alerts, payload.Alerts...)
	r.mu.Unlock()
}

func (r *alertReceiver) received() []webhookAlert {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]webhookAlert(nil), r.alerts...)
}

// TestPerJobAlertReachesItsTeam runs the real Prometheus, with
// deploy/monitoring's rules, and the real Alertmanager, with
// alertmanager.example.yml's routes, against a leaseapi on Postgres with
// the per-job series on: a scheduled job of team billing: whose replicas
// stopped becomes overdue, and its alert, naming it, reaches the billing
// receiver; nothing reaches the ops receiver, whose job is healthy.
func TestPerJobAlertReachesItsTeam(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus, Alertmanager and a leaseapi on Postgres; skipped with -short")
	}
	t.Parallel()
	prometheus, err := monitoring.Tool("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	alertmanager, err := monitoring.Tool("prometheus-alertmanager")
	if err != nil {
		t.Fatal(err)
	}

	receivers := map[string]*alertReceiver{"platform": {}, "billing": {}, "ops": {}}
	urls := map[string]string{}
	for name, r := range receivers {
		srv := httptest.NewServer(r)
		t.Cleanup(srv.Close)
		urls[name] = srv.URL + "/" + name
	}

	cfg := serveConfig(t)
	cfg.DatabaseURL = repotest.PostgresURL(t)
	cfg.MetricsToken, cfg.JobMetrics = testMetricsToken, true
	cfg.StatsInterval, cfg.MissedSweep = 200*time.Millisecond, 200*time.Millisecond
	srv := startServe(t, cfg)

	// billing's job registers a one-second schedule with one run, then its
	// replicas stop; ops's job has run and has no schedule to miss.
	suffix := fmt.Sprintf("alerts-%d-%d", time.Now().UnixNano(), jobSeq.Add(1))
	billingJob, opsJob := "billing:"+suffix, "ops."+suffix
	for _, job := range []struct{ id, body string }{
		{billingJob, `{"owner":"replica-a","ttlMs":30000,"schedule":"@every 1s","graceMs":100}`},
		{opsJob, `{"owner":"replica-a","ttlMs":30000}`},
	} {
		base := srv.url + "/leases/" + job.id
		got := do(t, http.MethodPost, base+"/acquire", job.body)
		if got.status != http.StatusOK {
			t.Fatalf("acquire %s = %d %v", job.id, got.status, got.body)
		}
		got = do(t, http.MethodPost, base+"/release", fmt.Sprintf(`{"owner":"replica-a","token":%v,"outcome":"succeeded"}`, got.body["token"]))
		if got.status != http.StatusOK {
			t.Fatalf("release %s = %d %v", job.id, got.status, got.body)
		}
	}

	dir := t.TempDir()
	amConfig, err := monitoring.AlertmanagerExample(urls)
	if err != nil {
		t.Fatal(err)
	}
	// Notify at once rather than after the example's 30 s.
	if !bytes.Contains(amConfig, []byte("group_wait: 30s")) {
		t.Fatalf("alertmanager.example.yml has no group_wait of 30s to shorten:\n%s", amConfig)
	}
	amConfig = bytes.Replace(amConfig, []byte("group_wait: 30s"), []byte("group_wait: 1s"), 1)
	amFile := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(amFile, amConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	amAddr := freeLoopbackAddr(t)
	am := startProcess(t, alertmanager,
		"--config.file="+amFile,
		"--storage.path="+filepath.Join(dir, "alertmanager"),
		"--web.listen-address="+amAddr,
		"--cluster.listen-address=", // no gossip port: one Alertmanager
		"--log.level=warn")

	prom, _ := startPrometheus(t, prometheus, srv.url, amAddr)

	procs := []*process{prom, am}
	var alert webhookAlert
	poll(t, procs, "the billing receiver gets LeaseapiJobOverdue for "+billingJob, func() (bool, error) {
		for _, a := range receivers["billing"].received() {
			if a.Labels["alertname"] == "LeaseapiJobOverdue" && a.Labels["job_id"] == billingJob && a.Status == "firing" {
				alert = a
				return true, nil
			}
		}
		return false, nil
	})
	if alert.Labels["team"] != "billing:" || !strings.Contains(alert.Annotations["summary"], billingJob) {
		t.Errorf("alert at the billing receiver: labels %v, summary %q; want team billing: and the job named", alert.Labels, alert.Annotations["summary"])
	}
	// Of this test's jobs, Alertmanager holds only billing's alert, and the
	// ops receiver got nothing.
	var held []struct {
		Labels map[string]string `json:"labels"`
	}
	if err := getJSON("http://"+amAddr+"/api/v2/alerts", &held); err != nil {
		t.Fatal(err)
	}
	for _, a := range held {
		if strings.Contains(a.Labels["job_id"], suffix) && a.Labels["job_id"] != billingJob {
			t.Errorf("Alertmanager holds an alert of %s: %v", a.Labels["job_id"], a.Labels)
		}
	}
	for _, a := range receivers["ops"].received() {
		t.Errorf("the ops receiver got an alert: %v %v", a.Labels, a.Annotations)
	}
	for _, a := range receivers["platform"].received() {
		if strings.Contains(a.Labels["job_id"], suffix) {
			t.Errorf("the platform receiver got an alert of this test's jobs: %v", a.Labels)
		}
	}
}
