//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/internal/checker"
	"github.com/leaseapi/leaseapi/webhook"
)

// The alert policies of a chaos run (I14): every PolicyEvery-th job (job
// 1, 1 + k, ...) gets a policy, consecutiveFailures 1 or 2,
// maxRuntimeMs policyMaxRuntimeMs and recoveryThreshold 1 or 2 (drawn from
// the seed), set with PUT /leases/{jobId}/policy as soon as the job exists
// (its first grant, in the warm-up). The workload's faults fail runs and
// let leases expire, and about a third of its job bodies outlast
// policyMaxRuntimeMs, so those jobs alert and recover in every tier, with
// or without faults that fail runs. (Not missed ticks: after the replicas
// stop every tick is missed, and mutant M14, which loses the state
// written, would then tell job.alerting at every sweep, so that the
// outbox never drains and I14 judges nothing.) Before the replicas start the harness
// registers a webhook subscribed to job.alerting and job.ok of every job
// on a receiver of its own, which verifies every message and refuses the
// first attempt of a seeded share of the events (so that retries repeat
// webhook-ids). After the faults end and the replicas stopped, it waits
// until that webhook's outbox is empty, reads every policy's status (GET
// policy) and checks that the outbox is still empty: the checker then
// holds the last transition told to the job's status.

// policyMaxRuntimeMs is the policies' maxRuntimeMs: within the replicas'
// job bodies (-work-min to -work-max, 50 ms to 1.5 s by default).
const policyMaxRuntimeMs = 1000

// policyRefuse is the share of policy events whose first attempt the
// receiver refuses (503).
const policyRefuse = 0.25

// policyJob is a job's policy in a run.
type policyJob struct {
	id                  string
	consecutiveFailures int
	recoveryThreshold   int
}

// policyJobs are the run's jobs with a policy, drawn from the seed.
func (e *env) policyJobs() []policyJob {
	k := e.cfg.PolicyEvery
	if k <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(e.cfg.Seed, 0x706f6c69))
	var out []policyJob
	for i := range e.cfg.Jobs {
		if i%k == 1%k {
			out = append(out, policyJob{id: e.jobID(i), consecutiveFailures: 1 + rng.IntN(2), recoveryThreshold: 1 + rng.IntN(2)})
		}
	}
	return out
}

// policyRun is the run's policies and the receiver of their webhook.
type policyRun struct {
	jobs      []policyJob
	rv        *policyReceiver
	webhookID string
	// set are the jobs whose PUT policy was answered 200.
	mu  sync.Mutex
	set map[string]bool
}

// registerPolicies starts the policy webhook's receiver and registers the
// webhook (job.alerting and job.ok of every job); nil without policies.
func (e *env) registerPolicies() (*policyRun, error) {
	jobs := e.policyJobs()
	if len(jobs) == 0 {
		return nil, nil
	}
	rv, err := startPolicyReceiver(e.cfg.Seed, policyRefuse)
	if err != nil {
		return nil, err
	}
	e.t.Cleanup(rv.close)
	pr := &policyRun{jobs: jobs, rv: rv, set: make(map[string]bool)}
	if pr.webhookID, err = e.createWebhook(rv.URL(), checker.PolicyEvents, []string{"*"}, rv.setSecret); err != nil {
		return nil, err
	}
	return pr, nil
}

// setPolicies puts every job's policy, each as soon as the job exists: it
// tries again while the job is unknown (404: not granted yet), the
// instance cannot answer (503, 429) or does not answer, until until.
func (e *env) setPolicies(pr *policyRun, until time.Time) {
	for _, j := range pr.jobs {
		body, _ := json.Marshal(map[string]int{"consecutiveFailures": j.consecutiveFailures, "maxRuntimeMs": policyMaxRuntimeMs, "recoveryThreshold": j.recoveryThreshold})
		var last string
		for attempt := 0; time.Now().Before(until); attempt++ {
			status, answer, err := e.adminCall(attempt, http.MethodPut, "/leases/"+j.id+"/policy", body)
			if status == http.StatusOK {
				pr.mu.Lock()
				pr.set[j.id] = true
				pr.mu.Unlock()
				break
			}
			last = fmt.Sprintf("%d %s %v", status, answer, err)
			if status != 0 && status != http.StatusNotFound && status != http.StatusServiceUnavailable && status != http.StatusTooManyRequests {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		pr.mu.Lock()
		ok := pr.set[j.id]
		pr.mu.Unlock()
		if !ok {
			e.logf("policy of %s not set: %s", j.id, last)
		}
	}
	pr.mu.Lock()
	e.logf("policies set on %d of %d jobs: %v", len(pr.set), len(pr.jobs), pr.jobs)
	pr.mu.Unlock()
}

// adminCall sends one call with the admin token (unless the instances are
// open) to instance attempt mod n, and returns the status (0 for no
// answer) and the body.
func (e *env) adminCall(attempt int, method, path string, body []byte) (int, []byte, error) {
	inst := e.insts[attempt%len(e.insts)]
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.ClientTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", inst.port, path), rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if !e.open {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	resp, err := e.httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxWebhookBody))
	return resp.StatusCode, b, err
}

// policyOutboxQuery counts the events of webhook $1 still in the outbox.
const policyOutboxQuery = `SELECT count(*) FROM webhook_outbox WHERE webhook_id = $1`

// awaitPolicies waits, after the replicas stopped and with the instances
// still up, until the policy webhook's outbox is empty, then reads every
// job's status (GET policy) and checks that the outbox is still empty and
// the receiver got nothing meanwhile; else it waits and reads again, up
// to webhookWaitMax.
func (e *env) awaitPolicies(pr *policyRun) *checker.Policies {
	began := time.Now()
	p := &checker.Policies{}
	outboxLeft := func() int {
		n, err := bounded(5*time.Second, func(ctx context.Context) (int, error) {
			var n int
			err := e.leases().QueryRowContext(ctx, policyOutboxQuery, pr.webhookID).Scan(&n)
			return n, err
		})
		if err != nil {
			return -1
		}
		return n
	}
	var left int
	for {
		got := pr.rv.count()
		if left = outboxLeft(); left == 0 {
			p.Jobs = e.readPolicies(pr)
			if outboxLeft() == 0 && pr.rv.count() == got {
				p.Drained = true
				break
			}
		}
		if time.Since(began) > webhookWaitMax {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	p.Waited = time.Since(began)
	p.Deliveries, p.Refused = pr.rv.received()
	if !p.Drained {
		e.logf("policies: the outbox still held %d events after %s: the final statuses are not judged", left, webhookWaitMax)
	}
	e.logf("policies: the receiver got %d messages (%d first attempts refused); the outbox drained: %t, after %s",
		len(p.Deliveries), p.Refused, p.Drained, p.Waited.Round(100*time.Millisecond))
	return p
}

// readPolicies reads every job's policy status with GET policy.
func (e *env) readPolicies(pr *policyRun) []checker.PolicyJob {
	out := make([]checker.PolicyJob, 0, len(pr.jobs))
	for _, j := range pr.jobs {
		pr.mu.Lock()
		set := pr.set[j.id]
		pr.mu.Unlock()
		pj := checker.PolicyJob{Job: j.id, ConsecutiveFailures: j.consecutiveFailures, RecoveryThreshold: j.recoveryThreshold, Set: set}
		for attempt := range 4 {
			status, body, err := e.adminCall(attempt, http.MethodGet, "/leases/"+j.id+"/policy", nil)
			var got struct {
				Status string `json:"status"`
			}
			if err == nil && status == http.StatusOK && json.Unmarshal(body, &got) == nil {
				pj.Final = got.Status
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		out = append(out, pj)
	}
	return out
}

// policiesNotExercised says what a run with policies should have made for
// I14 to judge anything and did not: policies set on every job drawn,
// job.alerting and job.ok transitions told, and final statuses judged.
func policiesNotExercised(cfg *runConfig, r *checker.Report) []string {
	if cfg.PolicyEvery <= 0 {
		return nil
	}
	var missing []string
	s := r.Stats
	if s.PolicyJobs == 0 || s.PolicyJobsSet < s.PolicyJobs {
		missing = append(missing, fmt.Sprintf("policies set on %d of %d jobs", s.PolicyJobsSet, s.PolicyJobs))
	}
	if s.PolicyTransitions[checker.EventJobAlerting] == 0 {
		missing = append(missing, "no job with a policy was told job.alerting")
	}
	if s.PolicyTransitions[checker.EventJobOK] == 0 {
		missing = append(missing, "no job with a policy was told job.ok")
	}
	if s.PolicyFinalJudged == 0 {
		missing = append(missing, "no policy's final status was judged (the outbox never drained)")
	}
	return missing
}

// policyReceiver is the policy webhook's endpoint: it verifies every
// message with the webhook's secret, records every message with its body
// for I14 (a refused one too), and refuses the first attempt of a seeded
// share of the events with a 503.
type policyReceiver struct {
	srv *http.Server
	ln  net.Listener
	// refuse is the share of events whose first attempt is answered 503.
	refuse float64

	mu         sync.Mutex
	secret     string
	rng        *rand.Rand
	seen       map[string]bool
	deliveries []checker.PolicyDelivery
	refused    int
}

func startPolicyReceiver(seed uint64, refuse float64) (*policyReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("policy webhook receiver: %w", err)
	}
	rv := &policyReceiver{ln: ln, refuse: refuse, rng: rand.New(rand.NewPCG(seed, 0x616c6572)), seen: make(map[string]bool)}
	rv.srv = &http.Server{Handler: rv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = rv.srv.Serve(ln) }()
	return rv, nil
}

// URL is where the webhook is registered.
func (rv *policyReceiver) URL() string { return "http://" + rv.ln.Addr().String() + "/policy-hook" }

func (rv *policyReceiver) setSecret(s string) {
	rv.mu.Lock()
	rv.secret = s
	rv.mu.Unlock()
}

func (rv *policyReceiver) close() { _ = rv.srv.Close() }

// parsePolicyDelivery reads a policy event's body; Err says why it is not
// one.
func parsePolicyDelivery(id string, body []byte, at time.Time) checker.PolicyDelivery {
	d := checker.PolicyDelivery{ID: id, At: at, Body: string(body)}
	var b struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      struct {
			JobID   string    `json:"jobId"`
			Reasons *[]string `json:"reasons"`
			Repeat  bool      `json:"repeat"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		d.Err = "body: " + err.Error()
		return d
	}
	d.Type, d.Job, d.Due, d.Repeat = b.Type, b.Data.JobID, b.Timestamp, b.Data.Repeat
	switch {
	case d.Type == "" || d.Job == "" || d.Due.IsZero():
		d.Err = "the body lacks type, timestamp or data.jobId"
	case b.Data.Reasons == nil:
		d.Err = "the body lacks data.reasons"
	default:
		d.Reasons = *b.Data.Reasons
	}
	return d
}

func (rv *policyReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	id := r.Header.Get(webhook.HeaderID)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	d := parsePolicyDelivery(id, body, at)
	d.Verified = rv.secret != "" &&
		webhook.Verify(rv.secret, id, r.Header.Get(webhook.HeaderTimestamp), r.Header.Get(webhook.HeaderSignature), body) == nil
	// Recorded whatever it is, a refused first attempt too: I14 compares
	// its body with its retries'.
	rv.deliveries = append(rv.deliveries, d)
	refuse := false
	if d.Verified && d.Err == "" {
		refuse = !rv.seen[id] && rv.rng.Float64() < rv.refuse
		rv.seen[id] = true
	}
	switch {
	case refuse:
		rv.refused++
		http.Error(w, "refused once on purpose", http.StatusServiceUnavailable)
	case !d.Verified:
		http.Error(w, "signature does not verify", http.StatusUnauthorized)
	case d.Err != "":
		http.Error(w, d.Err, http.StatusBadRequest)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// count is how many messages the receiver recorded.
func (rv *policyReceiver) count() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.deliveries)
}

// received returns a copy of what the receiver recorded, and how many
// first attempts it refused on purpose.
func (rv *policyReceiver) received() ([]checker.PolicyDelivery, int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return slices.Clone(rv.deliveries), rv.refused
}

// TestPolicyReceiver: the policy receiver accepts a policy event signed
// with the secret and records its type, job, reasons, repeat, timestamp
// and body; it records a message signed with another secret as
// unverified (401) and one without reasons as malformed (400); told to,
// it refuses a first attempt (503), records it, and accepts the retry,
// with the same body.
func TestPolicyReceiver(t *testing.T) {
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	client := webhook.NewClient(true, 0)
	due := time.Date(2026, 12, 7, 2, 0, 0, 123456000, time.UTC)
	message := func(id string, typ webhook.Event, data string) webhook.Message {
		return webhook.Message{ID: id, Type: typ, Timestamp: due, Data: json.RawMessage(data)}
	}
	send := func(rv *policyReceiver, secret string, m webhook.Message) webhook.Result {
		return webhook.Deliver(context.Background(), client, rv.URL(), secret, webhook.FormatStandard, "", m, time.Now())
	}
	rv, err := startPolicyReceiver(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.close()
	rv.setSecret(secret)
	alerting := message("msg_a", "job.alerting", `{"jobId":"job-04","reasons":["failures"],"repeat":false}`)
	if res := send(rv, secret, alerting); !res.Delivered {
		t.Fatalf("signed policy event refused: %+v", res)
	}
	other, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if res := send(rv, other, message("msg_b", "job.ok", `{"jobId":"job-04","reasons":[]}`)); res.Status != http.StatusUnauthorized {
		t.Fatalf("event signed with another secret: %+v, want 401", res)
	}
	if res := send(rv, secret, message("msg_c", "job.ok", `{"jobId":"job-04"}`)); res.Status != http.StatusBadRequest {
		t.Fatalf("event without reasons: %+v, want 400", res)
	}
	got, _ := rv.received()
	if len(got) != 3 {
		t.Fatalf("recorded %d messages, want 3: %+v", len(got), got)
	}
	if a := got[0]; a.ID != "msg_a" || a.Type != "job.alerting" || a.Job != "job-04" || !slices.Equal(a.Reasons, []string{"failures"}) ||
		a.Repeat || !a.Due.Equal(due) || !a.Verified || a.Err != "" || a.Body == "" {
		t.Errorf("recorded %+v, want msg_a, job.alerting of job-04 for failures, due %s, verified", a, due)
	}
	if got[1].Verified || got[2].Err != "the body lacks data.reasons" {
		t.Errorf("recorded %+v and %+v, want the first unverified, the second without reasons", got[1], got[2])
	}

	// Refusing every first attempt: the first is a 503, recorded; the retry
	// carries the same webhook-id and body and is accepted.
	rv2, err := startPolicyReceiver(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rv2.close()
	rv2.setSecret(secret)
	ok := message("msg_d", "job.ok", `{"jobId":"job-04","reasons":["failures"]}`)
	if first := send(rv2, secret, ok); first.Status != http.StatusServiceUnavailable {
		t.Fatalf("first attempt %+v, want 503", first)
	}
	if retry := send(rv2, secret, ok); !retry.Delivered {
		t.Fatalf("retry %+v, want delivered", retry)
	}
	got2, refused := rv2.received()
	if len(got2) != 2 || refused != 1 || got2[0].ID != "msg_d" || got2[1].ID != "msg_d" || got2[0].Body != got2[1].Body {
		t.Fatalf("two attempts of msg_d: %+v, %d refused; want both recorded with one body, one refused", got2, refused)
	}
}
