package repo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
	"github.com/leaseapi/leaseapi/webhook"
)

// Bounded polling of the webhook tests: a hang guard, never a timing
// assertion.
const (
	hookPoll     = 5 * time.Millisecond
	hookAttempts = 4000
)

// received is one request a receiver got.
type received struct {
	id, timestamp, signature string
	body                     []byte
}

// receiver is a webhook receiver on a loopback port that answers 204 and
// records every request; down, its port refuses connections.
type receiver struct {
	mu  sync.Mutex
	got []received
	// before, if set, runs first; false ends the request unanswered.
	before func(*http.Request) bool
	addr   string
	srv    *httptest.Server
}

// newReceiver starts a receiver, up unless down.
func newReceiver(t *testing.T, down bool) *receiver {
	t.Helper()
	r := &receiver{}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// The body first: the server notices a client gone only once it
		// is read.
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		before := r.before
		r.mu.Unlock()
		if before != nil && !before(req) {
			return // the attempt ended without an answer
		}
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Get(webhook.HeaderID), req.Header.Get(webhook.HeaderTimestamp),
			req.Header.Get(webhook.HeaderSignature), body})
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	r.addr = r.srv.Listener.Addr().String()
	t.Cleanup(r.srv.Close)
	if down {
		_ = r.srv.Listener.Close() // the port refuses connections until up
	} else {
		r.srv.Start()
	}
	return r
}

// up starts a receiver that was down, on its port.
func (r *receiver) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", r.addr, err)
	}
	r.srv.Listener = ln
	r.srv.Start()
}

func (r *receiver) url() string { return "http://" + r.addr + "/hook" }

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// hookFixture is a webhook of scope "<prefix>:" on a store.
type hookFixture struct {
	id, secret, prefix string
}

// createHook creates a webhook of every event for the jobs under a fresh
// prefix, delivered to target.
func createHook(t *testing.T, ws leaseapi.WebhookStore, target, format string, sealer *webhook.Sealer) hookFixture {
	t.Helper()
	id, err := webhook.NewID()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	sealedURL, err := sealer.Seal(target, webhook.AAD(id, webhook.FieldURL))
	if err != nil {
		t.Fatal(err)
	}
	sealedSecret, err := sealer.Seal(secret, webhook.AAD(id, webhook.FieldSecret))
	if err != nil {
		t.Fatal(err)
	}
	prefix := "hooks-" + id[3:]
	w := leaseapi.Webhook{ID: id, URL: sealedURL, URLRedacted: webhook.Redact(target), Secret: sealedSecret,
		Events: leaseapi.WebhookEvents, Scopes: []string{prefix + ":"}, Format: format}
	if err := ws.CreateWebhook(t.Context(), &w); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	return hookFixture{id: id, secret: secret, prefix: prefix}
}

// finishRuns makes n runs of jobs under prefix, each acquired and released
// (alternately failed and succeeded): n run.failed or run.succeeded events
// and the job.recovered events of the successes after a failure.
func finishRuns(t *testing.T, s leaseapi.Store, prefix string, n int) (events int) {
	t.Helper()
	for i := range n {
		job := fmt.Sprintf("%s:job-%d", prefix, i%5)
		l, err := s.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: "replica", TTL: time.Hour})
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		outcome := leaseapi.OutcomeSucceeded
		if (i/5)%2 == 0 {
			outcome = leaseapi.OutcomeFailed
		}
		if _, err := s.Release(t.Context(), &leaseapi.ReleaseParams{JobID: job, Owner: "replica", Token: l.Token, Outcome: outcome}); err != nil {
			t.Fatalf("Release: %v", err)
		}
		events++
		if outcome == leaseapi.OutcomeSucceeded && i >= 5 {
			events++ // job.recovered: the job's previous run failed
		}
	}
	return events
}

// newDeliverer is a deliverer of ws that retries after a millisecond.
func newDeliverer(t *testing.T, ws leaseapi.WebhookStore, allowPrivate bool, sealer *webhook.Sealer) *WebhookDeliverer {
	t.Helper()
	d, err := NewWebhookDeliverer(ws, WebhookDelivererConfig{Interval: 5 * time.Millisecond, AllowPrivate: allowPrivate,
		Sealer: sealer, DataFunc: api.MarshalWebhookData, PublicURL: "https://leaseapi.example"}, nil)
	if err != nil {
		t.Fatalf("NewWebhookDeliverer: %v", err)
	}
	d.nextAttempt = func(created, now time.Time, attempts int) (time.Time, bool) {
		return now.Add(time.Millisecond), true
	}
	return d
}

func openPostgres(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// waitOutboxEmpty runs pass until the outbox is empty.
func waitOutboxEmpty(t *testing.T, ws leaseapi.WebhookStore, pass func()) {
	t.Helper()
	for range hookAttempts {
		if pass != nil {
			pass()
		}
		n, err := ws.WebhookOutbox(t.Context())
		if err != nil {
			t.Fatalf("WebhookOutbox: %v", err)
		}
		if n == 0 {
			return
		}
		time.Sleep(hookPoll)
	}
	t.Fatalf("the outbox never emptied")
}

// checkDeliveredOnce checks that r got want distinct events, each once,
// signed with secret.
func checkDeliveredOnce(t *testing.T, r *receiver, secret string, want int) {
	t.Helper()
	got := r.requests()
	seen := make(map[string]int)
	for _, req := range got {
		seen[req.id]++
		if err := webhook.Verify(secret, req.id, req.timestamp, req.signature, req.body); err != nil {
			t.Errorf("event %s: webhook.Verify: %v", req.id, err)
		}
		var body struct {
			Type      string          `json:"type"`
			Timestamp time.Time       `json:"timestamp"`
			Data      api.WebhookData `json:"data"`
		}
		if err := json.Unmarshal(req.body, &body); err != nil {
			t.Errorf("event %s: body %s: %v", req.id, req.body, err)
			continue
		}
		if body.Data.Run == nil || body.Data.Lease == nil || body.Data.Run.JobID != body.Data.JobID || body.Timestamp.IsZero() ||
			(!strings.HasPrefix(body.Type, "run.") && body.Type != "job.recovered") {
			t.Errorf("event %s: body %s, want a run event with its run and lease", req.id, req.body)
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s delivered %d times, want once", id, n)
		}
	}
	if len(seen) != want || len(got) != want {
		t.Errorf("got %d requests of %d events, want %d events once each", len(got), len(seen), want)
	}
}

// TestWebhookTwoInstancesDeliverOnce: two instances on one database, each
// with its own store and delivery loop, deliver every event, and none
// twice, when nothing fails.
func TestWebhookTwoInstancesDeliverOnce(t *testing.T) {
	t.Parallel()
	dsn := repotest.NewPostgresURL(t)
	a, b := openPostgres(t, dsn), openPostgres(t, dsn)
	r := newReceiver(t, false)
	h := createHook(t, a, r.url(), leaseapi.WebhookFormatStandard, nil)
	want := finishRuns(t, a, h.prefix, 20)

	ctx, stop := context.WithCancel(t.Context())
	var loops sync.WaitGroup
	observers := []*countingObserver{{}, {}}
	for i, s := range []*postgres.Store{a, b} {
		d := newDeliverer(t, s, true, nil)
		d.cfg.Observer = observers[i]
		loops.Go(func() { d.Run(ctx) })
	}
	// More events while both loops run.
	want += finishRuns(t, b, h.prefix, 20)
	waitOutboxEmpty(t, a, nil)
	stop()
	loops.Wait()
	checkDeliveredOnce(t, r, h.secret, want)
	byA, byB := observers[0].count(leaseapi.WebhookDelivered), observers[1].count(leaseapi.WebhookDelivered)
	if byA+byB != want {
		t.Errorf("deliveries reported: %d by one instance, %d by the other; want %d in all", byA, byB, want)
	}
	t.Logf("delivered by one instance: %d, by the other: %d", byA, byB)
}

// TestWebhookReceiverDownThenUp: a receiver that is down gets nothing and
// each attempt is recorded with its error; once it is up, it gets every
// event, each with the webhook-id its failed attempts had. On both stores.
func TestWebhookReceiverDownThenUp(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t *testing.T) interface {
		leaseapi.Store
		leaseapi.WebhookStore
	}{
		"Postgres": func(t *testing.T) interface {
			leaseapi.Store
			leaseapi.WebhookStore
		} {
			return openPostgres(t, repotest.NewPostgresURL(t))
		},
		"SQLite": func(t *testing.T) interface {
			leaseapi.Store
			leaseapi.WebhookStore
		} {
			return repotest.OpenSQLite(t, filepath.Join(t.TempDir(), "leaseapi.db"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			sealer, err := webhook.NewSealer("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
			if err != nil {
				t.Fatal(err)
			}
			r := newReceiver(t, true)
			h := createHook(t, s, r.url(), leaseapi.WebhookFormatStandard, sealer)
			want := finishRuns(t, s, h.prefix, 6)
			d := newDeliverer(t, s, true, sealer)

			// Passes against the closed port until every event failed twice.
			failedIDs := make(map[string]int)
			for range hookAttempts {
				res, err := d.runOnce(t.Context())
				if err != nil {
					t.Fatalf("runOnce: %v", err)
				}
				if res.Delivered != 0 {
					t.Fatalf("pass while down: %+v, want no delivery", res)
				}
				log, err := s.WebhookDeliveries(t.Context(), h.id)
				if err != nil {
					t.Fatalf("WebhookDeliveries: %v", err)
				}
				clear(failedIDs)
				for _, a := range log {
					if a.Delivered || a.Status != 0 || !strings.Contains(a.Error, "refused") {
						t.Fatalf("attempt while down: %+v, want an error saying the connection was refused", a)
					}
					failedIDs[a.EventID]++
				}
				if len(log) >= 2*want {
					break
				}
				time.Sleep(hookPoll)
			}
			if len(failedIDs) != want || len(r.requests()) != 0 {
				t.Fatalf("while down: %d events attempted, %d requests received; want %d and 0", len(failedIDs), len(r.requests()), want)
			}

			r.up(t)
			waitOutboxEmpty(t, s, func() {
				if _, err := d.runOnce(t.Context()); err != nil {
					t.Fatalf("runOnce: %v", err)
				}
			})
			checkDeliveredOnce(t, r, h.secret, want)
			for _, req := range r.requests() {
				if failedIDs[req.id] == 0 {
					t.Errorf("delivered event %s, which no failed attempt had: want the same webhook-id on every retry", req.id)
				}
			}
			log, err := s.WebhookDeliveries(t.Context(), h.id)
			if err != nil {
				t.Fatalf("WebhookDeliveries: %v", err)
			}
			if len(log) == 0 || !log[0].Delivered || log[0].Status != http.StatusNoContent || log[0].Attempt < 2 {
				t.Errorf("newest attempt: %+v, want a retry delivered with 204", log[0])
			}
		})
	}
}

// TestWebhookRestartLosesNothing: events decided while no loop runs, and
// events an instance claimed before it died, are delivered by the next
// instance on the database once the dead one's claims have passed.
func TestWebhookRestartLosesNothing(t *testing.T) {
	t.Parallel()
	dsn := repotest.NewPostgresURL(t)
	r := newReceiver(t, false)
	first := openPostgres(t, dsn)
	h := createHook(t, first, r.url(), leaseapi.WebhookFormatStandard, nil)
	want := finishRuns(t, first, h.prefix, 8)
	// It claims some events (one of the webhook's a claim) and dies
	// before it delivers them.
	for range 3 {
		claimed, err := first.ClaimWebhookEvents(t.Context(), &leaseapi.ClaimWebhookParams{Limit: 3, Claim: 200 * time.Millisecond})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("ClaimWebhookEvents: %d events, %v; want 1, the webhook's oldest unclaimed", len(claimed), err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	second := openPostgres(t, dsn)
	d := newDeliverer(t, second, true, nil)
	waitOutboxEmpty(t, second, func() {
		if _, err := d.runOnce(t.Context()); err != nil {
			t.Fatalf("runOnce: %v", err)
		}
	})
	checkDeliveredOnce(t, r, h.secret, want)
	log, err := second.WebhookDeliveries(t.Context(), h.id)
	if err != nil {
		t.Fatalf("WebhookDeliveries: %v", err)
	}
	retried := 0
	for _, a := range log {
		if a.Attempt == 2 {
			retried++ // the claimed ones: their first attempt was the dead instance's
		}
	}
	if retried != 3 {
		t.Errorf("attempts numbered 2: got %d, want the 3 events the dead instance had claimed", retried)
	}
}

// TestWebhookPrivateTargets: a name that resolves to loopback passes
// creation (only IP literals are checked then) but is refused when the
// deliverer dials it, and the attempt is recorded with that error; a
// deliverer that allows private targets delivers the event.
func TestWebhookPrivateTargets(t *testing.T) {
	t.Parallel()
	s := repotest.OpenSQLite(t, filepath.Join(t.TempDir(), "leaseapi.db"))
	r := newReceiver(t, false)
	_, port, _ := net.SplitHostPort(r.addr)
	target := "http://localhost:" + port + "/hook"
	if err := webhook.CheckURL(target, false); err != nil {
		t.Fatalf("CheckURL(%s): %v, want it accepted at creation", target, err)
	}
	h := createHook(t, s, target, leaseapi.WebhookFormatStandard, nil)
	want := finishRuns(t, s, h.prefix, 1)

	res, err := newDeliverer(t, s, false, nil).runOnce(t.Context())
	if err != nil || res.Failed != want {
		t.Fatalf("runOnce refusing private targets: %+v, %v; want %d failed", res, err, want)
	}
	log, err := s.WebhookDeliveries(t.Context(), h.id)
	if err != nil {
		t.Fatalf("WebhookDeliveries: %v", err)
	}
	if len(log) != want || log[0].Delivered || !strings.Contains(log[0].Error, "not public") {
		t.Errorf("attempt: %+v, want refused as a target that is not public", log)
	}
	if n := len(r.requests()); n != 0 {
		t.Fatalf("the receiver got %d requests, want none", n)
	}

	allow := newDeliverer(t, s, true, nil)
	waitOutboxEmpty(t, s, func() {
		if _, err := allow.runOnce(t.Context()); err != nil {
			t.Fatalf("runOnce: %v", err)
		}
	})
	checkDeliveredOnce(t, r, h.secret, want)
}

// TestWebhookSlackAndGiveUp: a slack webhook gets {"text"} naming the job
// and the outcome, with no signature; an event whose retries are over is
// given up: recorded, removed, counted.
func TestWebhookSlackAndGiveUp(t *testing.T) {
	t.Parallel()
	s := repotest.OpenSQLite(t, filepath.Join(t.TempDir(), "leaseapi.db"))
	var mu sync.Mutex
	var bodies []string
	var headers []http.Header
	status := http.StatusInternalServerError
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		bodies, headers = append(bodies, string(b)), append(headers, req.Header.Clone())
		st := status
		mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(srv.Close)
	h := createHook(t, s, srv.URL+"/services/T0/B0/secret", leaseapi.WebhookFormatSlack, nil)
	finishRuns(t, s, h.prefix, 1) // run.failed

	counts := &countingObserver{}
	d := newDeliverer(t, s, true, nil)
	d.cfg.Observer = counts
	d.nextAttempt = func(time.Time, time.Time, int) (time.Time, bool) { return time.Time{}, false }
	res, err := d.runOnce(t.Context())
	if err != nil || res.GaveUp != 1 {
		t.Fatalf("runOnce: %+v, %v; want the event given up after its failed attempt", res, err)
	}
	if n, err := s.WebhookOutbox(t.Context()); err != nil || n != 0 {
		t.Errorf("WebhookOutbox: %d, %v; want 0: a given-up event is removed", n, err)
	}
	if n := counts.count(leaseapi.WebhookGaveUp); n != 1 {
		t.Errorf("observer: %d gave_up, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("slack receiver got %d requests, want 1", len(bodies))
	}
	var msg map[string]string
	if err := json.Unmarshal([]byte(bodies[0]), &msg); err != nil || len(msg) != 1 ||
		!strings.Contains(msg["text"], "run.failed") || !strings.Contains(msg["text"], h.prefix+":job-0") ||
		!strings.Contains(msg["text"], "outcome failed") || !strings.Contains(msg["text"], "https://leaseapi.example/ui/#/jobs/") {
		t.Errorf("slack body %s, want {\"text\"} naming the event, the job, the outcome and a console link", bodies[0])
	}
	if headers[0].Get(webhook.HeaderSignature) != "" {
		t.Errorf("slack delivery signed: a Slack URL carries its own secret")
	}
}

// countingObserver counts the results it is told.
type countingObserver struct {
	mu     sync.Mutex
	counts map[leaseapi.WebhookResult]int
}

func (c *countingObserver) WebhookAttempted(r leaseapi.WebhookResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = make(map[leaseapi.WebhookResult]int)
	}
	c.counts[r]++
}

func (c *countingObserver) count(r leaseapi.WebhookResult) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[r]
}

func TestWebhookDelivererConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]WebhookDelivererConfig{
		"no data":         {},
		"negative":        {Interval: -time.Second, DataFunc: api.MarshalWebhookData},
		"claim too short": {Claim: 20 * time.Second, DataFunc: api.MarshalWebhookData},
	} {
		if _, err := NewWebhookDeliverer(nil, cfg, nil); err == nil {
			t.Errorf("%s: NewWebhookDeliverer accepted %+v", name, cfg)
		}
	}
}

// TestWebhookSlowReceiverHarmsNoOtherWebhook: one team's receiver hangs
// and its webhook has a flood of events; another team's webhook gets all
// of its events while the first receiver is still hanging on its first
// request, and that receiver never has more than one request of this
// instance at once. Once it answers, every event of both is delivered
// once. (Before each webhook was its own queue, the flood filled every
// slot and the other team's events waited behind it.)
func TestWebhookSlowReceiverHarmsNoOtherWebhook(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t *testing.T) interface {
		leaseapi.Store
		leaseapi.WebhookStore
	}{
		"Postgres": func(t *testing.T) interface {
			leaseapi.Store
			leaseapi.WebhookStore
		} {
			return openPostgres(t, repotest.NewPostgresURL(t))
		},
		"SQLite": func(t *testing.T) interface {
			leaseapi.Store
			leaseapi.WebhookStore
		} {
			return repotest.OpenSQLite(t, filepath.Join(t.TempDir(), "leaseapi.db"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			release := make(chan struct{})
			var (
				mu                  sync.Mutex
				inFlight, maxFlight int
				slowStarted         bool
				slowEnded           bool
			)
			slow, fast := newReceiver(t, false), newReceiver(t, false)
			slow.before = func(req *http.Request) bool {
				mu.Lock()
				inFlight++
				maxFlight = max(maxFlight, inFlight)
				slowStarted = true
				mu.Unlock()
				defer func() {
					mu.Lock()
					inFlight--
					slowEnded = true
					mu.Unlock()
				}()
				select {
				case <-release:
					return true
				case <-req.Context().Done():
					return false
				}
			}
			slowHook := createHook(t, s, slow.url(), leaseapi.WebhookFormatStandard, nil)
			fastHook := createHook(t, s, fast.url(), leaseapi.WebhookFormatStandard, nil)
			// The flood first, so that its events are the oldest due.
			wantSlow := finishRuns(t, s, slowHook.prefix, 20)
			wantFast := finishRuns(t, s, fastHook.prefix, 6)

			d, err := NewWebhookDeliverer(s, WebhookDelivererConfig{Interval: 5 * time.Millisecond, Concurrency: 2,
				Timeout: time.Hour, Claim: 2 * time.Hour, AllowPrivate: true, DataFunc: api.MarshalWebhookData}, nil)
			if err != nil {
				t.Fatalf("NewWebhookDeliverer: %v", err)
			}
			ctx, stop := context.WithCancel(t.Context())
			var loop sync.WaitGroup
			loop.Go(func() { d.Run(ctx) })
			defer func() { stop(); loop.Wait() }()

			for i := 0; len(fast.requests()) < wantFast; i++ {
				if i == hookAttempts {
					t.Fatalf("the fast receiver got %d of %d events while the slow one hung", len(fast.requests()), wantFast)
				}
				time.Sleep(hookPoll)
			}
			mu.Lock()
			started, ended, most := slowStarted, slowEnded, maxFlight
			mu.Unlock()
			if !started || ended {
				t.Errorf("slow receiver: request started %v, ended %v; want the fast webhook served while its first request hangs", started, ended)
			}
			if most != 1 {
				t.Errorf("slow receiver: %d requests at once, want 1: a webhook holds one slot of an instance", most)
			}

			close(release)
			waitOutboxEmpty(t, s, nil)
			checkDeliveredOnce(t, fast, fastHook.secret, wantFast)
			checkDeliveredOnce(t, slow, slowHook.secret, wantSlow)
		})
	}
}

// TestWebhookTimedOutAttempt: an attempt whose receiver does not answer
// within the deliverer's timeout is cut at it, recorded as failed with
// the timeout, and tried again later with the same webhook-id.
func TestWebhookTimedOutAttempt(t *testing.T) {
	t.Parallel()
	s := repotest.OpenSQLite(t, filepath.Join(t.TempDir(), "leaseapi.db"))
	r := newReceiver(t, false)
	var mu sync.Mutex
	hung := 0
	r.before = func(req *http.Request) bool {
		mu.Lock()
		first := hung == 0
		hung++
		mu.Unlock()
		if first {
			<-req.Context().Done() // until the deliverer gives up on it
			return false
		}
		return true
	}
	h := createHook(t, s, r.url(), leaseapi.WebhookFormatStandard, nil)
	want := finishRuns(t, s, h.prefix, 1)
	d, err := NewWebhookDeliverer(s, WebhookDelivererConfig{Interval: 5 * time.Millisecond, Timeout: 50 * time.Millisecond,
		Claim: time.Minute, AllowPrivate: true, DataFunc: api.MarshalWebhookData}, nil)
	if err != nil {
		t.Fatalf("NewWebhookDeliverer: %v", err)
	}
	d.nextAttempt = func(_, now time.Time, _ int) (time.Time, bool) { return now.Add(time.Millisecond), true }
	res, err := d.runOnce(t.Context())
	if err != nil || res.Failed != 1 {
		t.Fatalf("runOnce against a hanging receiver: %+v, %v; want 1 failed", res, err)
	}
	log, err := s.WebhookDeliveries(t.Context(), h.id)
	// Whichever of the client's bounds fires first names the timeout: the
	// whole attempt's (deadline exceeded) or the response headers'.
	if err != nil || len(log) != 1 || log[0].Delivered ||
		!strings.Contains(log[0].Error, "deadline exceeded") && !strings.Contains(log[0].Error, "timeout awaiting response headers") {
		t.Fatalf("attempts: %+v, %v; want one failed for the timeout", log, err)
	}
	waitOutboxEmpty(t, s, func() {
		if _, err := d.runOnce(t.Context()); err != nil {
			t.Fatalf("runOnce: %v", err)
		}
	})
	checkDeliveredOnce(t, r, h.secret, want)
}
