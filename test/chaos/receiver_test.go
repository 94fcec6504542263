//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/internal/checker"
	"github.com/leaseapi/leaseapi/webhook"
)

// receiver is the chaos run's webhook endpoint: it checks every message's
// signature with the webhook's secret (webhook.Verify), records every
// message for I12 (those whose signature or body is wrong too, answered
// 401 or 400), and refuses the first attempt of a seeded share of the
// events with a 503, so that the service's retries are exercised too. It
// records the first attempt of every event (webhook-id) for I12b: when
// it arrived, and the event's timestamp, its outbox row's created_at.
//
// A hung receiver (startHungReceiver) reads every message and never
// answers: it holds the connection until the client closes it (the
// attempt's timeout) or hangMax passes, then drops it; it records when
// each attempt arrived and when its connection closed.
type receiver struct {
	srv *http.Server
	ln  net.Listener
	// refuse is the share of events whose first attempt is answered 503.
	refuse float64
	// hang: never answer.
	hang bool

	mu         sync.Mutex
	secret     string
	rng        *rand.Rand
	seen       map[string]bool // webhook-ids that reached it verified
	deliveries []checker.Delivery
	refused    int
	// first are the first attempts of each webhook-id (firstSeen).
	first     []checker.Attempt
	firstSeen map[string]bool
	// hung are the attempts a hung receiver got; ended is told of each
	// one's end, if someone listens (TestReceiver).
	hung  []checker.Attempt
	ended chan struct{}
}

// hangMax bounds how long a hung receiver holds one attempt.
const hangMax = 2 * time.Minute

// maxWebhookBody bounds what the receiver reads of one message.
const maxWebhookBody = 1 << 20

// startReceiver listens on a free loopback port.
func startReceiver(seed uint64, refuse float64) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	rv := &receiver{ln: ln, refuse: refuse, rng: rand.New(rand.NewPCG(seed, 0x77656268)), seen: make(map[string]bool),
		firstSeen: make(map[string]bool)}
	rv.srv = &http.Server{Handler: rv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = rv.srv.Serve(ln) }()
	return rv, nil
}

// startHungReceiver starts a receiver that never answers.
func startHungReceiver() (*receiver, error) {
	rv, err := startReceiver(0, 0)
	if err != nil {
		return nil, err
	}
	rv.hang, rv.ended = true, make(chan struct{}, 1)
	return rv, nil
}

// URL is where the webhook is registered.
func (rv *receiver) URL() string { return "http://" + rv.ln.Addr().String() + "/hook" }

// setSecret gives the receiver the secret POST /webhooks answered with.
func (rv *receiver) setSecret(s string) {
	rv.mu.Lock()
	rv.secret = s
	rv.mu.Unlock()
}

func (rv *receiver) close() { _ = rv.srv.Close() }

// webhookBody is a standard-format body, read with the API's own types.
type webhookBody struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      api.WebhookData `json:"data"`
}

// parseDelivery reads the run an event names from its body; the error
// says why the body is not an event about a run.
func parseDelivery(id string, body []byte, at time.Time) (checker.Delivery, error) {
	var b webhookBody
	if err := json.Unmarshal(body, &b); err != nil {
		return checker.Delivery{ID: id, At: at}, fmt.Errorf("body: %w", err)
	}
	d := checker.Delivery{ID: id, Type: b.Type, Job: b.Data.JobID, At: at}
	if b.Type == checker.EventJobMissed {
		var m struct {
			Data api.JobMissedData `json:"data"`
		}
		if err := json.Unmarshal(body, &m); err != nil || d.Job == "" || len(m.Data.Missed) == 0 {
			return d, errors.New("the job.missed body lacks data.jobId or data.missed")
		}
		d.Count = m.Data.Count
		for _, r := range m.Data.Missed {
			if r.Tick == nil {
				return d, errors.New("a missed run of the job.missed body lacks its tick")
			}
			d.Missed = append(d.Missed, checker.MissedRef{Tick: r.Tick.Time, Trigger: string(r.Trigger)})
		}
		return d, nil
	}
	run := b.Data.Run
	if b.Type == "" || d.Job == "" || run == nil {
		return d, errors.New("the body lacks type, data.jobId or data.run")
	}
	d.Outcome, d.Trigger = string(run.Outcome), string(run.Trigger)
	if run.Token != nil {
		d.Token = *run.Token
	}
	if run.Tick != nil {
		d.Tick = run.Tick.Time
	}
	if run.JobID != d.Job {
		return d, fmt.Errorf("data.run.jobId %q is not data.jobId", run.JobID)
	}
	return d, nil
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	id := r.Header.Get(webhook.HeaderID)
	if rv.hang {
		rv.hold(r, id, body, at)
		return
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if !rv.firstSeen[id] {
		rv.firstSeen[id] = true
		var b webhookBody
		_ = json.Unmarshal(body, &b) // a zero due time is not judged; I12 judges the body
		rv.first = append(rv.first, checker.Attempt{ID: id, Job: b.Data.JobID, Due: b.Timestamp, At: at})
	}
	verified := rv.secret != "" &&
		webhook.Verify(rv.secret, id, r.Header.Get(webhook.HeaderTimestamp), r.Header.Get(webhook.HeaderSignature), body) == nil
	d, perr := parseDelivery(id, body, at)
	d.Verified = verified
	if perr != nil {
		d.Err = perr.Error()
	}
	if verified && perr == nil {
		first := !rv.seen[id]
		rv.seen[id] = true
		if first && rv.rng.Float64() < rv.refuse {
			rv.refused++
			http.Error(w, "refused once on purpose", http.StatusServiceUnavailable)
			return
		}
	}
	// Recorded whatever it is: I12 flags a message signed with anything
	// but the secret, or whose body is not an event about a run.
	rv.deliveries = append(rv.deliveries, d)
	switch {
	case !verified:
		http.Error(w, "signature does not verify", http.StatusUnauthorized)
	case perr != nil:
		http.Error(w, perr.Error(), http.StatusBadRequest)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// hold is a hung receiver's handling of a message: it records the
// attempt, waits until the client gives up (the body has been read, so
// the request's context ends when the connection closes) or hangMax has
// passed, records the end, and drops the connection without an answer.
func (rv *receiver) hold(r *http.Request, id string, body []byte, at time.Time) {
	var b webhookBody
	_ = json.Unmarshal(body, &b)
	rv.mu.Lock()
	i := len(rv.hung)
	rv.hung = append(rv.hung, checker.Attempt{ID: id, Job: b.Data.JobID, Due: b.Timestamp, At: at})
	rv.mu.Unlock()
	t := time.NewTimer(hangMax)
	defer t.Stop()
	select {
	case <-r.Context().Done():
	case <-t.C:
	}
	rv.mu.Lock()
	rv.hung[i].End = time.Now()
	rv.mu.Unlock()
	select {
	case rv.ended <- struct{}{}:
	default:
	}
	panic(http.ErrAbortHandler) // no answer: the server closes the connection
}

// hungAttempts returns a copy of the attempts a hung receiver got.
func (rv *receiver) hungAttempts() []checker.Attempt {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return slices.Clone(rv.hung)
}

// firstAttempts returns a copy of the first attempt of every event.
func (rv *receiver) firstAttempts() []checker.Attempt {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return slices.Clone(rv.first)
}

// accepted returns a copy of what the receiver recorded, and how many
// first attempts it refused on purpose.
func (rv *receiver) accepted() ([]checker.Delivery, int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]checker.Delivery(nil), rv.deliveries...), rv.refused
}

// TestReceiver: the receiver accepts what webhook.Deliver signs with the
// secret, with the data the server writes (api.MarshalWebhookData), and
// records the run it names; it records a message signed with another
// secret as unverified (401) and a signed one without a run as malformed
// (400); told to, it refuses a first attempt (503) and accepts the retry.
func TestReceiver(t *testing.T) {
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	rv, err := startReceiver(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.close()
	rv.setSecret(secret)
	client := webhook.NewClient(true, 0)
	tick := time.Date(2026, 12, 2, 15, 0, 2, 0, time.UTC)
	message := func(id string, typ webhook.Event, run *leaseapi.Run) webhook.Message {
		e := &leaseapi.WebhookEvent{ID: id, Type: string(typ), JobID: "job-03", Run: run}
		if run != nil {
			run.JobID, run.Tick = "job-03", &tick
			if run.Outcome != leaseapi.OutcomeMissed {
				run.StartedAt = &tick // a run with a holder: the data carries its token
			}
		}
		data, err := api.MarshalWebhookData(e)
		if err != nil {
			t.Fatal(err)
		}
		return webhook.Message{ID: id, Type: typ, Timestamp: time.Now(), Data: data}
	}
	send := func(rv *receiver, secret string, m webhook.Message) webhook.Result {
		return webhook.Deliver(context.Background(), client, rv.URL(), secret, webhook.FormatStandard, "", m, time.Now())
	}
	if res := send(rv, secret, message("msg_a", webhook.RunFailed, &leaseapi.Run{Token: 7, Owner: "r1.1", Outcome: leaseapi.OutcomeFailed})); !res.Delivered {
		t.Fatalf("signed delivery refused: %+v", res)
	}
	if res := send(rv, secret, message("msg_b", webhook.RunMissed, &leaseapi.Run{Outcome: leaseapi.OutcomeMissed, Trigger: leaseapi.TriggerManual})); !res.Delivered {
		t.Fatalf("signed delivery refused: %+v", res)
	}
	other, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if res := send(rv, other, message("msg_c", webhook.RunFailed, &leaseapi.Run{Token: 8, Outcome: leaseapi.OutcomeFailed})); res.Delivered || res.Status != http.StatusUnauthorized {
		t.Fatalf("delivery signed with another secret: %+v, want 401", res)
	}
	if res := send(rv, secret, message("msg_d", webhook.RunExpired, nil)); res.Delivered || res.Status != http.StatusBadRequest {
		t.Fatalf("signed delivery without a run: %+v, want 400", res)
	}
	jobMissed := &leaseapi.WebhookEvent{ID: "msg_e", Type: string(webhook.JobMissed), JobID: "job-03", MissedCount: 3,
		Missed: []leaseapi.Run{{JobID: "job-03", Tick: &tick, EndedAt: &tick, Outcome: leaseapi.OutcomeMissed, Trigger: leaseapi.TriggerSchedule}}}
	data, err := api.MarshalWebhookData(jobMissed)
	if err != nil {
		t.Fatal(err)
	}
	if res := send(rv, secret, webhook.Message{ID: "msg_e", Type: webhook.JobMissed, Timestamp: time.Now(), Data: data}); !res.Delivered {
		t.Fatalf("signed job.missed refused: %+v", res)
	}
	if first := rv.firstAttempts(); len(first) != 5 || first[0].ID != "msg_a" || first[0].Job != "job-03" || first[0].Due.IsZero() || first[4].ID != "msg_e" {
		t.Errorf("first attempts %+v, want msg_a to msg_e with their jobs and timestamps", first)
	}
	got, refused := rv.accepted()
	want := []checker.Delivery{
		{ID: "msg_a", Type: "run.failed", Job: "job-03", Token: 7, Tick: tick, Outcome: "failed", Trigger: "schedule", Verified: true},
		{ID: "msg_b", Type: "run.missed", Job: "job-03", Tick: tick, Outcome: "missed", Trigger: "manual", Verified: true},
		{ID: "msg_c", Type: "run.failed", Job: "job-03", Token: 8, Tick: tick, Outcome: "failed", Trigger: "schedule"},
		{ID: "msg_d", Type: "run.expired", Job: "job-03", Verified: true, Err: "the body lacks type, data.jobId or data.run"},
		{ID: "msg_e", Type: "job.missed", Job: "job-03", Verified: true, Count: 3,
			Missed: []checker.MissedRef{{Tick: tick, Trigger: "schedule"}}},
	}
	if len(got) != len(want) || refused != 0 {
		t.Fatalf("recorded %d deliveries (%d refused), want %d: %+v", len(got), refused, len(want), got)
	}
	for i := range want {
		g := got[i]
		g.At = time.Time{}
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("delivery %d: got %+v, want %+v", i, g, want[i])
		}
	}

	// Refusing every first attempt: the first is a 503, its retry (the
	// same webhook-id) is accepted.
	rv2, err := startReceiver(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rv2.close()
	rv2.setSecret(secret)
	m := message("msg_e", webhook.RunExpired, &leaseapi.Run{Token: 9, Outcome: leaseapi.OutcomeExpired})
	if first := send(rv2, secret, m); first.Status != http.StatusServiceUnavailable {
		t.Fatalf("first attempt %+v, want 503", first)
	}
	if retry := send(rv2, secret, m); !retry.Delivered {
		t.Fatalf("retry %+v, want delivered", retry)
	}
	if got, refused := rv2.accepted(); len(got) != 1 || refused != 1 || got[0].Token != 9 || got[0].Type != "run.expired" {
		t.Fatalf("after a refused first attempt: %+v, %d refused; want the retry alone, 1 refused", got, refused)
	}
	if first := rv2.firstAttempts(); len(first) != 1 || !first[0].Due.Equal(m.Timestamp) {
		t.Fatalf("first attempts %+v, want the refused one alone, due at the message's timestamp %s", first, m.Timestamp)
	}

	// A hung receiver never answers: the attempt runs out of time, and the
	// receiver records when it arrived and when its connection closed.
	hung, err := startHungReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer hung.close()
	began := time.Now()
	res := webhook.Deliver(context.Background(), webhook.NewClient(true, time.Second), hung.URL(), secret, webhook.FormatStandard, "",
		message("msg_f", webhook.RunFailed, &leaseapi.Run{Token: 10, Outcome: leaseapi.OutcomeFailed}), time.Now())
	if res.Delivered || !res.TimedOut {
		t.Fatalf("attempt at a hung receiver: %+v, want timed out", res)
	}
	select {
	case <-hung.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung receiver did not see the connection close within 10s")
	}
	if a := hung.hungAttempts(); len(a) != 1 || a[0].ID != "msg_f" || a[0].Job != "job-03" || a[0].At.Before(began) || !a[0].End.After(a[0].At) {
		t.Fatalf("hung attempts %+v, want msg_f, arrived after %s, ended after it arrived", a, began.Format(time.TimeOnly))
	}
}
