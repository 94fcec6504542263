package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/repo/repotest"
	"github.com/leaseapi/leaseapi/webhook"
)

// TestPolicyEndToEnd: a job with the policy consecutiveFailures 2 fails
// twice and is alerting (GET policy, the lease's alerting), then succeeds
// and is ok again. Two webhooks subscribed to job.alerting and job.ok each
// get exactly one job.alerting and then one job.ok, signed with their own
// secret; one receiver answers 500 to its first attempt, and the retry
// carries the same webhook-id and the same body.
func TestPolicyEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("skipping the end-to-end test in -short mode")
	}
	const (
		job = "e2e-policy.nightly"
		// deliveryWait bounds the wait for one event at both receivers:
		// a pass every second, a retry about 5 s after a refused attempt.
		deliveryWait = 30 * time.Second
	)
	// A database of its own: the package's other services share theirs,
	// and their delivery loops would claim these events and fail to open
	// URLs sealed with another key.
	_, _, baseURL, _ := startService(t, "leaseapi-policy", repotest.NewPostgresURL(t),
		"LEASEAPI_WEBHOOK_ALLOW_PRIVATE=true", // the receivers are on loopback
		"LEASEAPI_WEBHOOK_KEY="+webhookKey(t))

	plain := startHookReceiver(t, false)
	refusing := startHookReceiver(t, true)
	for i, rv := range []*hookReceiver{plain, refusing} {
		// A named webhook with the test's own secret, so that a creation
		// whose outcome is unknown (503) can be retried: a second one of
		// the name is refused, and the secret is known either way.
		secret, err := webhook.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		body := map[string]any{"name": fmt.Sprintf("policy-%d", i), "secret": secret, "url": rv.srv.URL + "/hook",
			"events": []string{"job.alerting", "job.ok"}, "scopes": []string{"e2e-policy."}}
		created := doJSON(t, http.MethodPost, baseURL+"/webhooks", body)
		for attempt := 0; created.status == http.StatusServiceUnavailable && attempt < 5; attempt++ {
			time.Sleep(time.Second)
			created = doJSON(t, http.MethodPost, baseURL+"/webhooks", body)
		}
		if created.status != http.StatusCreated && created.body["code"] != "webhook_exists" {
			t.Fatalf("POST /webhooks = %d %v, want 201 (or webhook_exists after an unanswered attempt)", created.status, created.body)
		}
		rv.setSecret(secret)
	}

	// The job exists once it was granted; its policy is set while it is held.
	lease := baseURL + "/leases/" + job
	token := acquireJSON(t, lease, "replica-a")
	put := doJSON(t, http.MethodPut, lease+"/policy", map[string]any{"consecutiveFailures": 2})
	if put.status != http.StatusOK || put.body["status"] != "ok" || put.body["consecutiveFailures"] != float64(2) ||
		put.body["recoveryThreshold"] != float64(1) {
		t.Fatalf("PUT policy = %d %v, want 200, ok, consecutiveFailures 2, recoveryThreshold 1", put.status, put.body)
	}
	releaseJSON(t, lease, "replica-a", token, "failed")
	wantStatus(t, lease, "ok", nil) // one failure of two

	token = acquireJSON(t, lease, "replica-b")
	releaseJSON(t, lease, "replica-b", token, "failed")
	wantStatus(t, lease, "alerting", []any{"failures"})
	alerting := map[*hookReceiver]hookAttempt{}
	for _, rv := range []*hookReceiver{plain, refusing} {
		alerting[rv] = rv.await(t, "job.alerting", deliveryWait)
	}

	token = acquireJSON(t, lease, "replica-c")
	releaseJSON(t, lease, "replica-c", token, "succeeded")
	wantStatus(t, lease, "ok", nil)
	for _, rv := range []*hookReceiver{plain, refusing} {
		rv.await(t, "job.ok", deliveryWait)
	}
	// Nothing more is told: give a straggler a few delivery passes.
	time.Sleep(3 * time.Second)

	for _, rv := range []*hookReceiver{plain, refusing} {
		name := "the receiver"
		if rv.refuseFirst {
			name = "the refusing receiver"
		}
		events := rv.events()
		if len(events) != 2 || events[0].typ != "job.alerting" || events[1].typ != "job.ok" {
			t.Errorf("%s got the events %v, want one job.alerting, then one job.ok", name, typesOf(events))
			continue
		}
		a, ok := events[0], events[1]
		if !a.due.Before(ok.due) {
			t.Errorf("%s: job.alerting decided at %s, not before job.ok at %s", name, a.due, ok.due)
		}
		if a.job != job || ok.job != job || !slices.Equal(a.reasons, []string{"failures"}) || a.repeat ||
			!slices.Equal(ok.reasons, []string{"failures"}) {
			t.Errorf("%s: job.alerting %+v and job.ok %+v, want both of %s with the reason failures, no repeat", name, a, ok, job)
		}
		if a.token != 2 || ok.token != 3 {
			t.Errorf("%s: job.alerting about token %d, job.ok about %d, want the runs 2 and 3 that decided them", name, a.token, ok.token)
		}
	}
	if a, b := alerting[plain], alerting[refusing]; a.id == b.id {
		t.Errorf("both webhooks were told job.alerting with the webhook-id %s, want one per webhook", a.id)
	}

	// The refused first attempt and its retry: one webhook-id, one body.
	attempts := refusing.all()
	if len(attempts) < 2 || attempts[0].status != http.StatusInternalServerError {
		t.Fatalf("the refusing receiver's attempts %v, want a 500 first and a retry", attempts)
	}
	first := attempts[0]
	var retried bool
	for _, a := range attempts[1:] {
		if a.id == first.id {
			retried = true
			if !bytes.Equal(a.raw, first.raw) || a.status != http.StatusNoContent {
				t.Errorf("the retry of %s answered %d with the body %s, want 204 and the first attempt's body %s", a.id, a.status, a.raw, first.raw)
			}
		}
	}
	if !retried {
		t.Errorf("the refused event %s (%s) was never tried again; attempts %v", first.id, first.typ, attempts)
	}
	if plain.attemptsOf(alerting[plain].id) != 1 {
		t.Errorf("the plain receiver got job.alerting %d times, want once", plain.attemptsOf(alerting[plain].id))
	}
}

// webhookKey is a fresh LEASEAPI_WEBHOOK_KEY.
func webhookKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// jsonAnswer is an HTTP answer with a JSON object body.
type jsonAnswer struct {
	status int
	body   map[string]any
}

// doJSON sends body (nil for none) as JSON and reads the JSON answer.
func doJSON(t *testing.T, method, url string, body any) jsonAnswer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	a := jsonAnswer{status: resp.StatusCode}
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Fatalf("%s %s = %d: the body %q is not a JSON object: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	return a
}

// acquireJSON acquires lease (a /leases/{jobId} URL) for owner and returns
// the token.
func acquireJSON(t *testing.T, lease, owner string) int64 {
	t.Helper()
	a := doJSON(t, http.MethodPost, lease+"/acquire", map[string]any{"owner": owner, "ttlMs": 30000})
	tok, _ := a.body["token"].(float64)
	if a.status != http.StatusOK || tok == 0 {
		t.Fatalf("acquire as %s = %d %v, want 200 with a token", owner, a.status, a.body)
	}
	return int64(tok)
}

// releaseJSON releases owner's grant token with outcome.
func releaseJSON(t *testing.T, lease, owner string, token int64, outcome string) {
	t.Helper()
	if a := doJSON(t, http.MethodPost, lease+"/release", map[string]any{"owner": owner, "token": token, "outcome": outcome}); a.status != http.StatusOK {
		t.Fatalf("release of token %d %s = %d %v", token, outcome, a.status, a.body)
	}
}

// wantStatus checks the job's policy status and reasons (GET policy) and
// what its lease shows of them (alerting, alertReasons).
func wantStatus(t *testing.T, lease, status string, reasons []any) {
	t.Helper()
	p := doJSON(t, http.MethodGet, lease+"/policy", nil)
	got, _ := p.body["alertReasons"].([]any)
	if p.status != http.StatusOK || p.body["status"] != status || !slices.Equal(got, reasons) {
		t.Errorf("GET policy = %d %v, want status %s with the reasons %v", p.status, p.body, status, reasons)
	}
	l := doJSON(t, http.MethodGet, lease, nil)
	shown, _ := l.body["alertReasons"].([]any)
	if l.status != http.StatusOK || l.body["alerting"] != (status == "alerting") || !slices.Equal(shown, reasons) {
		t.Errorf("GET lease = %d %v, want alerting %v with the reasons %v", l.status, l.body, status == "alerting", reasons)
	}
}

// hookReceiver is a webhook endpoint: it verifies every message with the
// webhook's secret (webhook.Verify) and records every attempt; with
// refuseFirst it answers 500 to the first attempt it gets.
type hookReceiver struct {
	srv         *httptest.Server
	refuseFirst bool

	mu       sync.Mutex
	secret   string
	attempts []hookAttempt
}

// hookAttempt is one message a receiver got and what it answered.
type hookAttempt struct {
	id, typ string
	raw     []byte
	status  int
	// Read off the body: the event's timestamp (when it was decided), job,
	// reasons, repeat and the token of its run.
	due     time.Time
	job     string
	reasons []string
	repeat  bool
	token   int64
}

func startHookReceiver(t *testing.T, refuseFirst bool) *hookReceiver {
	rv := &hookReceiver{refuseFirst: refuseFirst}
	rv.srv = httptest.NewServer(rv)
	t.Cleanup(rv.srv.Close)
	return rv
}

func (rv *hookReceiver) setSecret(s string) {
	rv.mu.Lock()
	rv.secret = s
	rv.mu.Unlock()
}

func (rv *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	a := hookAttempt{id: r.Header.Get(webhook.HeaderID), raw: raw}
	var body struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      struct {
			JobID   string   `json:"jobId"`
			Reasons []string `json:"reasons"`
			Repeat  bool     `json:"repeat"`
			Run     *struct {
				Token int64 `json:"token"`
			} `json:"run"`
		} `json:"data"`
	}
	perr := json.Unmarshal(raw, &body)
	a.typ, a.due, a.job, a.reasons, a.repeat = body.Type, body.Timestamp, body.Data.JobID, body.Data.Reasons, body.Data.Repeat
	if body.Data.Run != nil {
		a.token = body.Data.Run.Token
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	verr := webhook.Verify(rv.secret, a.id, r.Header.Get(webhook.HeaderTimestamp), r.Header.Get(webhook.HeaderSignature), raw)
	switch {
	case verr != nil:
		a.status = http.StatusUnauthorized
	case perr != nil:
		a.status = http.StatusBadRequest
	case rv.refuseFirst && len(rv.attempts) == 0:
		a.status = http.StatusInternalServerError
	default:
		a.status = http.StatusNoContent
	}
	rv.attempts = append(rv.attempts, a)
	w.WriteHeader(a.status)
}

// all returns a copy of every attempt, in the order they came.
func (rv *hookReceiver) all() []hookAttempt {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return slices.Clone(rv.attempts)
}

// events are the distinct events accepted (answered 204), in the order of
// their first acceptance.
func (rv *hookReceiver) events() []hookAttempt {
	var out []hookAttempt
	for _, a := range rv.all() {
		if a.status == http.StatusNoContent && !slices.ContainsFunc(out, func(o hookAttempt) bool { return o.id == a.id }) {
			out = append(out, a)
		}
	}
	return out
}

// attemptsOf counts the attempts of webhook-id id.
func (rv *hookReceiver) attemptsOf(id string) int {
	n := 0
	for _, a := range rv.all() {
		if a.id == id {
			n++
		}
	}
	return n
}

// await waits until an event of type typ was accepted and returns it; it
// fails the test after limit, or at once on an attempt that did not
// verify or whose body was not an event.
func (rv *hookReceiver) await(t *testing.T, typ string, limit time.Duration) hookAttempt {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(100 * time.Millisecond) {
		for _, a := range rv.all() {
			switch a.status {
			case http.StatusUnauthorized:
				t.Fatalf("webhook-id %s: the signature does not verify with the webhook's secret", a.id)
			case http.StatusBadRequest:
				t.Fatalf("webhook-id %s: the body %s is not an event", a.id, a.raw)
			}
		}
		for _, a := range rv.events() {
			if a.typ == typ {
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s accepted within %s; attempts %v", typ, limit, typesOf(rv.all()))
		}
	}
}

// typesOf lists the attempts as webhook-id, type and answer.
func typesOf(as []hookAttempt) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.id + " " + a.typ + " " + http.StatusText(a.status)
	}
	return out
}
