package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/webhook"
)

// TestServeDeliversWebhooks: a served leaseapi, with its key, delivers the
// event of a failed run to a webhook created over its API, signed with the
// secret it answered at creation; it counts the delivery on /metrics, and
// neither the secret nor the URL's path reaches its log.
func TestServeDeliversWebhooks(t *testing.T) {
	t.Parallel()
	type delivery struct {
		header http.Header
		body   []byte
	}
	got := make(chan delivery, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), body}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(receiver.Close)

	cfg := serveConfig(t)
	cfg.WebhookKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	cfg.WebhookAllowPrivate = true // the receiver is on loopback
	cfg.PublicURL = "https://leaseapi.example.com"
	cfg.StatsInterval = 10 * time.Millisecond
	srv := startServe(t, cfg)

	const hookPath = "/hooks/T000-SECRET-PATH"
	created := do(t, http.MethodPost, srv.url+"/webhooks",
		`{"url":"`+receiver.URL+hookPath+`","events":["run.failed"],"scopes":["billing:"]}`)
	secret, _ := created.body["secret"].(string)
	if created.status != http.StatusCreated || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("POST /webhooks = %d %v, want 201 with a secret", created.status, created.body)
	}
	job := srv.url + "/leases/billing:invoices"
	l := do(t, http.MethodPost, job+"/acquire", `{"owner":"replica-a"}`)
	if l.status != http.StatusOK {
		t.Fatalf("acquire = %d %v", l.status, l.body)
	}
	if r := do(t, http.MethodPost, job+"/release", `{"owner":"replica-a","token":1,"outcome":"failed"}`); r.status != http.StatusOK {
		t.Fatalf("release = %d %v", r.status, r.body)
	}

	var d delivery
	select {
	case d = <-got:
	case <-time.After(waitTimeout):
		t.Fatalf("no delivery within %s\nlogs:\n%s", waitTimeout, srv.logs)
	}
	id, ts := d.header.Get(webhook.HeaderID), d.header.Get(webhook.HeaderTimestamp)
	if err := webhook.Verify(secret, id, ts, d.header.Get(webhook.HeaderSignature), d.body); err != nil {
		t.Errorf("webhook.Verify: %v (headers %v)", err, d.header)
	}
	var body struct {
		Type string `json:"type"`
		Data struct {
			JobID string `json:"jobId"`
			Run   struct {
				Outcome string `json:"outcome"`
				Token   int    `json:"token"`
			} `json:"run"`
			Lease struct {
				State string `json:"state"`
			} `json:"lease"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d.body, &body); err != nil || body.Type != "run.failed" || body.Data.JobID != "billing:invoices" ||
		body.Data.Run.Outcome != "failed" || body.Data.Run.Token != 1 || body.Data.Lease.State != "released" {
		t.Errorf("delivered body %s, %v: want run.failed of billing:invoices token 1, released", d.body, err)
	}

	// The attempt is recorded once it is reported, after the receiver
	// answered: in the log of deliveries and in the counter.
	hookID, _ := created.body["id"].(string)
	var log response
	var list []any
	for range 1000 {
		log = do(t, http.MethodGet, srv.url+"/webhooks/"+hookID+"/deliveries", "")
		if list, _ = log.body["deliveries"].([]any); log.status != http.StatusOK || len(list) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if log.status != http.StatusOK || len(list) != 1 {
		t.Fatalf("GET deliveries = %d %v, want the one attempt", log.status, log.body)
	}
	if a := list[0].(map[string]any); a["eventId"] != id || a["status"] != float64(http.StatusAccepted) || a["delivered"] != true {
		t.Errorf("attempt %v, want event %s delivered with 202", a, id)
	}
	for range 1000 {
		m := getMetrics(t, srv.url, "")
		if bytes.Contains(m, []byte(`leaseapi_webhook_deliveries_total{result="delivered"} 1`)) &&
			bytes.Contains(m, []byte("leaseapi_webhook_outbox 0")) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m := getMetrics(t, srv.url, ""); !bytes.Contains(m, []byte(`leaseapi_webhook_deliveries_total{result="delivered"} 1`)) {
		t.Errorf("/metrics lacks the delivery:\n%s", grepLines(m, "leaseapi_webhook"))
	}
	logs := srv.logs.String()
	for _, leak := range []string{secret, strings.TrimPrefix(secret, "whsec_"), hookPath, cfg.WebhookKey} {
		if strings.Contains(logs, leak) {
			t.Errorf("the log holds %q", leak)
		}
	}
	if n := len(srv.logs.records(t, "webhook created")); n != 1 {
		t.Errorf("%d \"webhook created\" log lines, want 1", n)
	}
}

// TestServeWarnsWithoutWebhookKey: without LEASEAPI_WEBHOOK_KEY, and with
// private targets allowed, leaseapi says so at start.
func TestServeWarnsWithoutWebhookKey(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	cfg.WebhookAllowPrivate = true
	srv := startServe(t, cfg)
	var warnings []string
	for _, line := range strings.Split(srv.logs.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) {
			warnings = append(warnings, line)
		}
	}
	all := strings.Join(warnings, "\n")
	for _, want := range []string{"LEASEAPI_WEBHOOK_KEY is not set", "LEASEAPI_WEBHOOK_ALLOW_PRIVATE=true"} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning says %q; warnings:\n%s", want, all)
		}
	}
}

// grepLines are the lines of b that contain s.
func grepLines(b []byte, s string) string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
