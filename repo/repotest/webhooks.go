package repotest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/webhook"
)

// webhookStore is b's store as a leaseapi.WebhookStore, or skips t.
func webhookStore(t *testing.T, b *bundle) leaseapi.WebhookStore {
	t.Helper()
	ws, ok := b.store.(leaseapi.WebhookStore)
	if !ok {
		// A wrapper of a store (repo.CoalesceAcquires, repo.LimitCalls)
		// keeps no webhooks; both stores assert that they do.
		t.Skipf("%T keeps no webhooks", b.store)
	}
	return ws
}

// newWebhook is a valid webhook of scopes for events.
func newWebhook(t *testing.T, scopes []string, events ...string) leaseapi.Webhook {
	t.Helper()
	id, err := webhook.NewID()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return leaseapi.Webhook{ID: id, URL: "https://hooks.example/" + id, URLRedacted: "https://hooks.example/…",
		Secret: secret, Events: events, Scopes: scopes, Format: leaseapi.WebhookFormatStandard, CreatedBy: "repotest"}
}

// eventKey names an event by its webhook, type and job.
func eventKey(webhookID, typ, jobID string) string { return webhookID + " " + typ + " " + jobID }

// claimAll claims the due events until none is left and returns them,
// failing t when one comes twice.
func claimAll(t *testing.T, ws leaseapi.WebhookStore) []leaseapi.WebhookEvent {
	t.Helper()
	var out []leaseapi.WebhookEvent
	seen := make(map[string]bool)
	for {
		events, err := ws.ClaimWebhookEvents(t.Context(), &leaseapi.ClaimWebhookParams{Limit: 7, Claim: time.Hour})
		if err != nil {
			t.Fatalf("ClaimWebhookEvents: %v", err)
		}
		if len(events) == 0 {
			return out
		}
		for _, e := range events {
			if seen[e.ID] {
				t.Errorf("event %s (%s) claimed twice", e.ID, eventKey(e.WebhookID, e.Type, e.JobID))
			}
			seen[e.ID] = true
			out = append(out, e)
		}
	}
}

// eventKeys are the sorted keys of events, one per event.
func eventKeys(events []leaseapi.WebhookEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = eventKey(e.WebhookID, e.Type, e.JobID)
	}
	sort.Strings(out)
	return out
}

// findEvent is the first of events with key k.
func findEvent(t *testing.T, events []leaseapi.WebhookEvent, k string) leaseapi.WebhookEvent {
	t.Helper()
	for _, e := range events {
		if eventKey(e.WebhookID, e.Type, e.JobID) == k {
			return e
		}
	}
	t.Fatalf("no event %s among %s", k, fmtEvents(events))
	return leaseapi.WebhookEvent{}
}

// claimAgain waits, by bounded polling, until the event id is due again
// and claims it; nothing else may be due.
func claimAgain(t *testing.T, ws leaseapi.WebhookStore, id string) leaseapi.WebhookEvent {
	t.Helper()
	for range pollAttempts {
		if events := claimAll(t, ws); len(events) > 0 {
			if len(events) != 1 || events[0].ID != id {
				t.Fatalf("claimed %s, want only %s again", fmtEvents(events), id)
			}
			return events[0]
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("event %s never due again", id)
	return leaseapi.WebhookEvent{}
}

// finish reports an attempt at e.
func finish(t *testing.T, ws leaseapi.WebhookStore, e leaseapi.WebhookEvent, status int, retryIn time.Duration) {
	t.Helper()
	a := &leaseapi.WebhookAttempt{Event: &e, At: time.Now(), Status: status, Delivered: status/100 == 2, RetryIn: retryIn}
	if status == 0 {
		a.Error = "connection refused"
	}
	if err := ws.FinishWebhookAttempt(t.Context(), a); err != nil {
		t.Fatalf("FinishWebhookAttempt(%s): %v", e.ID, err)
	}
}

// testWebhooks: the outbox gets one event for each webhook subscribed to
// it whose scopes hold the job, written by the decision itself (a release,
// the sweep, a takeover) with the run and the lease as they were; nothing
// without a webhook. Claims go to one claimant at a time, a retry comes
// back with the next attempt number, a stale report is refused, the log
// keeps the newest 100 attempts, and a deleted webhook takes its outbox
// and log with it. It claims every due event of the store, so it must not
// run beside another test that claims.
func testWebhooks(t *testing.T, b *bundle) {
	ws := webhookStore(t, b)
	ctx := t.Context()
	job := func(name string) string { return b.prefix + ":" + name }
	scope := b.prefix + ":"

	// No webhook: a finished run writes nothing to the outbox.
	quiet := job("quiet")
	l := b.acquire(t, leaseapi.AcquireParams{JobID: quiet, Owner: b.owner("a"), TTL: longTTL})
	b.release(t, leaseapi.ReleaseParams{JobID: quiet, Owner: b.owner("a"), Token: l.Token, Outcome: leaseapi.OutcomeFailed})
	if n, err := ws.WebhookOutbox(ctx); err != nil || n != 0 {
		t.Fatalf("WebhookOutbox with no webhook: got %d, %v; want 0", n, err)
	}

	all := newWebhook(t, []string{scope}, leaseapi.WebhookEvents...)
	failed := newWebhook(t, []string{scope + "b."}, "run.failed")
	other := newWebhook(t, []string{b.prefix + "-other:"}, leaseapi.WebhookEvents...)
	for _, w := range []*leaseapi.Webhook{&all, &failed, &other} {
		if err := ws.CreateWebhook(ctx, w); err != nil {
			t.Fatalf("CreateWebhook: %v", err)
		}
		if w.CreatedAt.IsZero() {
			t.Errorf("CreateWebhook: CreatedAt not set")
		}
	}
	t.Cleanup(func() {
		for _, w := range []leaseapi.Webhook{all, failed, other} {
			_ = ws.DeleteWebhook(t.Context(), w.ID)
		}
	})
	listed, err := ws.Webhooks(ctx)
	if err != nil {
		t.Fatalf("Webhooks: %v", err)
	}
	i := slices.IndexFunc(listed, func(w leaseapi.Webhook) bool { return w.ID == all.ID })
	if i < 0 {
		t.Fatalf("Webhooks: %s missing", all.ID)
	}
	got := listed[i]
	if got.URL != "" || got.Secret != "" || got.URLRedacted != all.URLRedacted || !slices.Equal(got.Events, all.Events) ||
		!slices.Equal(got.Scopes, all.Scopes) || got.Format != all.Format || got.CreatedBy != all.CreatedBy ||
		!got.CreatedAt.Equal(all.CreatedAt) || got.LastDelivery != nil {
		t.Errorf("Webhooks: got %+v, want %+v without URL and secret, and no delivery yet", got, all)
	}

	// A failed run then a succeeded one: run.failed (for both webhooks
	// covering b.), run.succeeded and job.recovered.
	bJob, owner := job("b.x"), b.owner("a")
	l = b.acquire(t, leaseapi.AcquireParams{JobID: bJob, Owner: owner, TTL: longTTL, Tick: tickAt(1)})
	b.release(t, leaseapi.ReleaseParams{JobID: bJob, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeFailed})
	l = b.acquire(t, leaseapi.AcquireParams{JobID: bJob, Owner: owner, TTL: longTTL, Tick: tickAt(2)})
	succeeded := b.release(t, leaseapi.ReleaseParams{JobID: bJob, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	// A second success recovers nothing.
	l = b.acquire(t, leaseapi.AcquireParams{JobID: bJob, Owner: owner, TTL: longTTL, Tick: tickAt(3)})
	b.release(t, leaseapi.ReleaseParams{JobID: bJob, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})

	// An expiry counted by the sweep, then taken over: run.expired once.
	swept := job("swept")
	l = b.acquire(t, leaseapi.AcquireParams{JobID: swept, Owner: owner, TTL: shortTTL})
	b.waitForState(t, swept, leaseapi.StateExpired)
	b.sweep(t)
	b.acquire(t, leaseapi.AcquireParams{JobID: swept, Owner: b.owner("b"), TTL: longTTL})
	// An expiry closed by a takeover before any sweep: run.expired once.
	taken := job("taken")
	l = b.acquire(t, leaseapi.AcquireParams{JobID: taken, Owner: owner, TTL: shortTTL})
	b.waitForState(t, taken, leaseapi.StateExpired)
	b.acquire(t, leaseapi.AcquireParams{JobID: taken, Owner: b.owner("b"), TTL: longTTL})
	b.sweep(t)

	// A job of another scope: only the other webhook hears of it.
	elsewhere := b.prefix + "-other:x"
	l = b.acquire(t, leaseapi.AcquireParams{JobID: elsewhere, Owner: owner, TTL: longTTL})
	b.release(t, leaseapi.ReleaseParams{JobID: elsewhere, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})

	want := sortedCopy([]string{
		eventKey(all.ID, "run.failed", bJob),
		eventKey(failed.ID, "run.failed", bJob),
		eventKey(all.ID, "run.succeeded", bJob),
		eventKey(all.ID, "job.recovered", bJob),
		eventKey(all.ID, "run.succeeded", bJob), // the second success: no second job.recovered
		eventKey(all.ID, "run.expired", swept),
		eventKey(all.ID, "run.expired", taken),
		eventKey(other.ID, "run.succeeded", elsewhere),
	})
	claimed := claimAll(t, ws)
	if k := eventKeys(claimed); !slices.Equal(k, want) {
		t.Fatalf("claimed events:\n got %q\nwant %q", k, want)
	}
	if n, err := ws.WebhookOutbox(ctx); err != nil || n != int64(len(want)) {
		t.Errorf("WebhookOutbox: got %d, %v; want %d (claimed events wait until reported)", n, err, len(want))
	}

	recovered := findEvent(t, claimed, eventKey(all.ID, "job.recovered", bJob))
	if recovered.Attempt != 1 || recovered.URL != all.URL || recovered.Secret != all.Secret || recovered.Format != all.Format ||
		!strings.HasPrefix(recovered.ID, "msg_") || recovered.CreatedAt.IsZero() {
		t.Errorf("claimed event: got %+v, want attempt 1, the webhook's URL, secret and format, an id msg_…", recovered)
	}
	if r := recovered.Run; r == nil || r.Outcome != leaseapi.OutcomeSucceeded || r.Token != succeeded.Token || r.Owner != owner ||
		!equalTimePtr(r.Tick, tickAt(2)) || r.JobID != bJob {
		t.Errorf("job.recovered run: got %+v, want the succeeded run of token %d", r, succeeded.Token)
	}
	if l := recovered.Lease; l == nil || l.State != leaseapi.StateReleased || l.Token != succeeded.Token ||
		l.LastOutcome != leaseapi.OutcomeSucceeded || !equalTimePtr(l.LastCompletedTick, tickAt(2)) {
		t.Errorf("job.recovered lease: got %+v, want the lease as the release left it", l)
	}
	expired := findEvent(t, claimed, eventKey(all.ID, "run.expired", swept))
	if r := expired.Run; r == nil || r.Outcome != leaseapi.OutcomeExpired || r.EndedAt == nil || r.StartedAt == nil {
		t.Errorf("run.expired run (counted by the sweep): got %+v, want expired with its start and end", r)
	}
	if l := expired.Lease; l == nil || l.State != leaseapi.StateExpired || l.Owner != owner {
		t.Errorf("run.expired lease (counted by the sweep): got %+v, want the expired grant", l)
	}
	if r := findEvent(t, claimed, eventKey(all.ID, "run.expired", taken)).Run; r == nil || r.Outcome != leaseapi.OutcomeExpired {
		t.Errorf("run.expired run (closed by the takeover): got %+v, want expired", r)
	}

	// Claimed events are not claimed again until reported.
	if again := claimAll(t, ws); len(again) != 0 {
		t.Errorf("claimed again while claimed: %q", eventKeys(again))
	}

	// retried is reported failed with a retry, the rest delivered or given
	// up, some of them after a restart.
	retried := findEvent(t, claimed, eventKey(failed.ID, "run.failed", bJob))
	t.Run("RetryAndStaleReport", func(t *testing.T) {
		finish(t, ws, retried, 503, time.Millisecond)
		next := claimAgain(t, ws, retried.ID)
		if next.Attempt != 2 {
			t.Fatalf("retried event: got attempt %d, want 2 (same id %s)", next.Attempt, retried.ID)
		}
		// The report of the first claim comes too late: refused, nothing written.
		stale := &leaseapi.WebhookAttempt{Event: &retried, At: time.Now(), Status: 200, Delivered: true}
		if err := ws.FinishWebhookAttempt(ctx, stale); !errors.Is(err, leaseapi.ErrClaimLost) {
			t.Errorf("stale report: got %v, want ErrClaimLost", err)
		}
		finish(t, ws, next, 204, 0)
		log, err := ws.WebhookDeliveries(ctx, failed.ID)
		if err != nil {
			t.Fatalf("WebhookDeliveries: %v", err)
		}
		if len(log) != 2 || log[0].Attempt != 2 || log[0].Status != 204 || !log[0].Delivered || log[0].EventID != retried.ID ||
			log[0].Type != "run.failed" || log[0].JobID != bJob || log[1].Attempt != 1 || log[1].Status != 503 || log[1].Delivered {
			t.Errorf("WebhookDeliveries: got %+v, want attempt 2 (204, delivered) then attempt 1 (503)", log)
		}
	})

	// A restart (a new store over the same data, in t: a subtest's store
	// would be another) loses no event and no claim.
	b.reopen(t)
	ws = webhookStore(t, b)
	// The claims outlive the store; a new claimant waits for them.
	if again := claimAll(t, ws); len(again) != 0 {
		t.Errorf("after a restart: claimed %q while still claimed", eventKeys(again))
	}
	for _, e := range claimed {
		if e.ID != retried.ID {
			finish(t, ws, e, 0, 0) // given up
		}
	}
	if n, err := ws.WebhookOutbox(ctx); err != nil || n != 0 {
		t.Errorf("WebhookOutbox after every report: got %d, %v; want 0", n, err)
	}
	log, err := ws.WebhookDeliveries(ctx, all.ID)
	if err != nil {
		t.Fatalf("WebhookDeliveries: %v", err)
	}
	if len(log) != len(want)-2 || log[0].Status != 0 || log[0].Error != "connection refused" || log[0].Delivered {
		t.Errorf("WebhookDeliveries(all): got %+v, want %d attempts with their error", log, len(want)-2)
	}
	if listed, err = ws.Webhooks(ctx); err != nil {
		t.Fatalf("Webhooks: %v", err)
	}
	i = slices.IndexFunc(listed, func(w leaseapi.Webhook) bool { return w.ID == all.ID })
	if i < 0 || listed[i].LastDelivery == nil || *listed[i].LastDelivery != log[0] {
		t.Errorf("Webhooks: LastDelivery of %s: got %+v, want %+v", all.ID, listed[i].LastDelivery, log[0])
	}

	t.Run("LogKeepsTheNewest", func(t *testing.T) {
		// One more event, failed and retried 103 times.
		l := b.acquire(t, leaseapi.AcquireParams{JobID: bJob, Owner: owner, TTL: longTTL, Tick: tickAt(4)})
		b.release(t, leaseapi.ReleaseParams{JobID: bJob, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeFailed})
		events := claimAll(t, ws)
		if len(events) != 2 {
			t.Fatalf("claimed %q, want run.failed for two webhooks", eventKeys(events))
		}
		e := findEvent(t, events, eventKey(failed.ID, "run.failed", bJob))
		finish(t, ws, findEvent(t, events, eventKey(all.ID, "run.failed", bJob)), 200, 0)
		for n := 1; n <= leaseapi.MaxWebhookDeliveries+3; n++ {
			if n > 1 {
				e = claimAgain(t, ws, e.ID)
			}
			if e.Attempt != n {
				t.Fatalf("claim %d: got attempt %d", n, e.Attempt)
			}
			finish(t, ws, e, 500, time.Millisecond)
		}
		log, err := ws.WebhookDeliveries(ctx, failed.ID)
		if err != nil {
			t.Fatalf("WebhookDeliveries: %v", err)
		}
		if len(log) != leaseapi.MaxWebhookDeliveries || log[0].Attempt != leaseapi.MaxWebhookDeliveries+3 || log[0].EventID != e.ID ||
			log[len(log)-1].Attempt != 4 {
			t.Errorf("WebhookDeliveries: got %d attempts, newest %+v, oldest %+v; want the newest %d: attempts %d down to 4",
				len(log), log[0], log[len(log)-1], leaseapi.MaxWebhookDeliveries, leaseapi.MaxWebhookDeliveries+3)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		for name, mutate := range map[string]func(w *leaseapi.Webhook){
			"id":             func(w *leaseapi.Webhook) { w.ID = "wh_ABC" },
			"no events":      func(w *leaseapi.Webhook) { w.Events = nil },
			"unknown event":  func(w *leaseapi.Webhook) { w.Events = []string{"run.started"} },
			"repeated event": func(w *leaseapi.Webhook) { w.Events = []string{"run.failed", "run.failed"} },
			"scope":          func(w *leaseapi.Webhook) { w.Scopes = []string{"team"} },
			"no scope":       func(w *leaseapi.Webhook) { w.Scopes = nil },
			"format":         func(w *leaseapi.Webhook) { w.Format = "teams" },
			"no url":         func(w *leaseapi.Webhook) { w.URL = "" },
			"no secret":      func(w *leaseapi.Webhook) { w.Secret = "" },
		} {
			w := newWebhook(t, []string{scope}, "run.failed")
			mutate(&w)
			if err := ws.CreateWebhook(ctx, &w); !errors.Is(err, leaseapi.ErrInvalid) {
				t.Errorf("CreateWebhook with %s: got %v, want ErrInvalid", name, err)
			}
		}
		for _, bad := range []struct {
			limit int
			claim time.Duration
		}{{0, time.Minute}, {1, 0}} {
			if _, err := ws.ClaimWebhookEvents(ctx, &leaseapi.ClaimWebhookParams{Limit: bad.limit, Claim: bad.claim}); !errors.Is(err, leaseapi.ErrInvalid) {
				t.Errorf("ClaimWebhookEvents(%d, %s): got %v, want ErrInvalid", bad.limit, bad.claim, err)
			}
		}
	})

	// Deleting a webhook takes its outbox and log with it.
	for _, w := range []leaseapi.Webhook{all, failed, other} {
		if err := ws.DeleteWebhook(ctx, w.ID); err != nil {
			t.Fatalf("DeleteWebhook: %v", err)
		}
	}
	if n, err := ws.WebhookOutbox(ctx); err != nil || n != 0 {
		t.Errorf("WebhookOutbox after deleting the webhooks: got %d, %v; want 0", n, err)
	}
	for _, id := range []string{all.ID, "wh_000000000000", "nonsense"} {
		if err := ws.DeleteWebhook(ctx, id); !errors.Is(err, leaseapi.ErrWebhookNotFound) || !errors.Is(err, leaseapi.ErrNotFound) {
			t.Errorf("DeleteWebhook(%q): got %v, want ErrWebhookNotFound", id, err)
		}
		if _, err := ws.WebhookDeliveries(ctx, id); !errors.Is(err, leaseapi.ErrWebhookNotFound) {
			t.Errorf("WebhookDeliveries(%q): got %v, want ErrWebhookNotFound", id, err)
		}
	}
}

// testWebhookNames: a webhook's name and digest are kept and listed; a
// name is unique among the webhooks of the same scopes (in any order and
// spelling), free in other scopes, free again once its webhook is deleted,
// and webhooks without a name never collide.
func testWebhookNames(t *testing.T, b *bundle) {
	ws := webhookStore(t, b)
	ctx := t.Context()
	scopes := []string{b.prefix + "-n:", b.prefix + "-m:"}
	create := func(w *leaseapi.Webhook) {
		t.Helper()
		if err := ws.CreateWebhook(ctx, w); err != nil {
			t.Fatalf("CreateWebhook %q %v: %v", w.Name, w.Scopes, err)
		}
		id := w.ID
		t.Cleanup(func() { _ = ws.DeleteWebhook(context.WithoutCancel(ctx), id) })
	}
	named := newWebhook(t, scopes, "job.alerting", "job.ok")
	named.Name, named.Digest = "oncall", webhook.Digest("https://hooks.example/oncall", named.Secret)
	create(&named)
	listed, err := ws.Webhooks(ctx)
	if err != nil {
		t.Fatalf("Webhooks: %v", err)
	}
	i := slices.IndexFunc(listed, func(w leaseapi.Webhook) bool { return w.ID == named.ID })
	if i < 0 || listed[i].Name != "oncall" || listed[i].Digest != named.Digest {
		t.Fatalf("Webhooks: got %+v, want %s named oncall with digest %s", listed, named.ID, named.Digest)
	}

	// The same name and scopes, in another order and with a scope the
	// others cover: taken.
	dup := newWebhook(t, []string{b.prefix + "-m:", b.prefix + "-n:x.", b.prefix + "-n:"}, "run.failed")
	dup.Name = "oncall"
	if err := ws.CreateWebhook(ctx, &dup); !errors.Is(err, leaseapi.ErrWebhookExists) {
		t.Errorf("CreateWebhook with a taken name and the same scopes: got %v, want ErrWebhookExists", err)
	}
	// Other scopes may use the name; webhooks without one never collide.
	for _, s := range [][]string{{b.prefix + "-n:"}, {b.prefix + "-other:"}} {
		other := newWebhook(t, s, "run.failed")
		other.Name = "oncall"
		create(&other)
	}
	for range 2 {
		anon := newWebhook(t, scopes, "run.failed")
		create(&anon)
	}
	// Deleted, its name is free again.
	if err := ws.DeleteWebhook(ctx, named.ID); err != nil {
		t.Fatalf("DeleteWebhook: %v", err)
	}
	again := newWebhook(t, scopes, "run.failed")
	again.Name = "oncall"
	create(&again)

	for name, mutate := range map[string]func(w *leaseapi.Webhook){
		"upper-case name": func(w *leaseapi.Webhook) { w.Name = "OnCall" },
		"long name":       func(w *leaseapi.Webhook) { w.Name = strings.Repeat("a", leaseapi.MaxWebhookNameLen+1) },
		"name with space": func(w *leaseapi.Webhook) { w.Name = "on call" },
		"short digest":    func(w *leaseapi.Webhook) { w.Digest = "abc" },
	} {
		w := newWebhook(t, scopes, "run.failed")
		mutate(&w)
		if err := ws.CreateWebhook(ctx, &w); !errors.Is(err, leaseapi.ErrInvalid) {
			t.Errorf("CreateWebhook with a %s: got %v, want ErrInvalid", name, err)
		}
	}
}

// testWebhookSweepEvents: a scheduled job whose ticks nobody runs gets
// run.missed for each missed tick and job.overdue once, when it becomes
// overdue; the run that ends the episode gets run.succeeded and
// job.recovered.
func testWebhookSweepEvents(t *testing.T, b *bundle) {
	ws := webhookStore(t, b)
	ctx := t.Context()
	job := b.prefix + ":late"
	w := newWebhook(t, []string{b.prefix + ":"}, "run.missed", "job.overdue", "job.recovered")
	if err := ws.CreateWebhook(ctx, &w); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	t.Cleanup(func() { _ = ws.DeleteWebhook(t.Context(), w.ID) })

	b.register(t, job, everySecond, shortGrace)
	l := b.sweepUntil(t, job, "two missed ticks", func(l leaseapi.Lease) bool { return l.MissedTicks >= 2 })
	if _, err := b.store.ForgetSchedule(ctx, job); err != nil { // no more ticks: the counts stand still
		t.Fatalf("ForgetSchedule: %v", err)
	}
	owner := b.owner("a")
	g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})

	counts := make(map[string]int)
	var overdue leaseapi.WebhookEvent
	for {
		events, err := ws.ClaimWebhookEvents(ctx, &leaseapi.ClaimWebhookParams{Limit: 100, Claim: time.Hour})
		if err != nil {
			t.Fatalf("ClaimWebhookEvents: %v", err)
		}
		if len(events) == 0 {
			break
		}
		for _, e := range events {
			if e.WebhookID != w.ID || e.JobID != job {
				t.Errorf("event %s %s of %s: another webhook's or job's", e.Type, e.WebhookID, e.JobID)
			}
			counts[e.Type]++
			if e.Type == "job.overdue" {
				overdue = e
			}
			if e.Type == "run.missed" && (e.Run == nil || e.Run.Outcome != leaseapi.OutcomeMissed || e.Run.Tick == nil) {
				t.Errorf("run.missed: run %+v, want the missed run with its tick", e.Run)
			}
			finish(t, ws, e, 200, 0)
		}
	}
	if int64(counts["run.missed"]) != l.MissedTicks || counts["job.overdue"] != 1 || counts["job.recovered"] != 1 || len(counts) != 3 {
		t.Errorf("events: got %v, want run.missed %d times (the missed ticks), job.overdue once, job.recovered once", counts, l.MissedTicks)
	}
	if overdue.Run == nil || overdue.Run.Outcome != leaseapi.OutcomeMissed || overdue.Lease == nil || overdue.Lease.MissedTicks < 1 {
		t.Errorf("job.overdue: run %+v lease %+v, want the missed run and the lease that counts it", overdue.Run, overdue.Lease)
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// fmtEvents is for messages.
func fmtEvents(events []leaseapi.WebhookEvent) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "%s %s %s; ", e.WebhookID, e.Type, e.JobID)
	}
	return b.String()
}

// testWebhookFairClaims: each webhook is its own queue. A claim takes at
// most one event per webhook, its oldest due one, and passes over the
// webhooks the caller names busy; a webhook whose last attempt timed out
// is claimed only while no claim of it is live, whoever holds it, and
// once an attempt ends in time it is claimed as before. It claims every
// due event of the store, so it must not run beside another test that
// claims.
func testWebhookFairClaims(t *testing.T, b *bundle) {
	ws := webhookStore(t, b)
	ctx := t.Context()
	slow := newWebhook(t, []string{b.prefix + ":slow."}, "run.failed")
	fast := newWebhook(t, []string{b.prefix + ":fast."}, "run.failed")
	for _, w := range []*leaseapi.Webhook{&slow, &fast} {
		if err := ws.CreateWebhook(ctx, w); err != nil {
			t.Fatalf("CreateWebhook: %v", err)
		}
	}
	t.Cleanup(func() {
		_ = ws.DeleteWebhook(t.Context(), slow.ID)
		_ = ws.DeleteWebhook(t.Context(), fast.ID)
	})
	owner := b.owner("a")
	fail := func(job string, n int) {
		for i := range n {
			l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: tickAt(i + 1)})
			b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeFailed})
		}
	}
	fail(b.prefix+":slow.job", 5)
	fail(b.prefix+":fast.job", 3)

	// claim claims with busy and returns the events of the two webhooks
	// by webhook; another webhook's event (none is expected) fails t.
	claim := func(busy ...string) map[string][]leaseapi.WebhookEvent {
		t.Helper()
		events, err := ws.ClaimWebhookEvents(ctx, &leaseapi.ClaimWebhookParams{Limit: 10, Claim: time.Hour, Busy: busy})
		if err != nil {
			t.Fatalf("ClaimWebhookEvents: %v", err)
		}
		out := make(map[string][]leaseapi.WebhookEvent)
		for _, e := range events {
			if e.WebhookID != slow.ID && e.WebhookID != fast.ID {
				t.Fatalf("claimed %s of another webhook %s", e.ID, e.WebhookID)
			}
			out[e.WebhookID] = append(out[e.WebhookID], e)
		}
		return out
	}
	report := func(e leaseapi.WebhookEvent, timedOut bool) {
		t.Helper()
		a := &leaseapi.WebhookAttempt{Event: &e, At: time.Now(), Delivered: !timedOut, TimedOut: timedOut}
		if timedOut {
			a.Error, a.RetryIn = "context deadline exceeded", time.Hour
		}
		if err := ws.FinishWebhookAttempt(ctx, a); err != nil {
			t.Fatalf("FinishWebhookAttempt(%s): %v", e.ID, err)
		}
	}

	// One event per webhook per claim, the oldest first.
	first := claim()
	if len(first[slow.ID]) != 1 || len(first[fast.ID]) != 1 {
		t.Fatalf("first claim: %d events of one webhook, %d of the other; want one of each", len(first[slow.ID]), len(first[fast.ID]))
	}
	if tick := first[slow.ID][0].Run.Tick; tick == nil || !tick.Equal(*tickAt(1)) {
		t.Errorf("first claim of a webhook: the run of tick %v, want its oldest event (tick %v)", tick, *tickAt(1))
	}
	// Busy webhooks are passed over.
	if got := claim(slow.ID, fast.ID); len(got) != 0 {
		t.Errorf("claim with both webhooks busy: got %d webhooks' events, want none", len(got))
	}
	// Another instance (no webhook busy) claims the next of each.
	second := claim()
	if len(second[slow.ID]) != 1 || len(second[fast.ID]) != 1 || second[slow.ID][0].ID == first[slow.ID][0].ID {
		t.Fatalf("second claim: %v; want the next event of each webhook", second)
	}

	// The first attempt at slow times out: while the other claim of slow
	// is live, slow is not claimed again, by anyone; fast is.
	report(first[slow.ID][0], true)
	if got := claim(); len(got[slow.ID]) != 0 || len(got[fast.ID]) != 1 {
		t.Fatalf("claim after a timeout, another claim of it live: %d of the timed-out webhook, %d of the other; want 0 and 1",
			len(got[slow.ID]), len(got[fast.ID]))
	}
	// Its other attempt times out too: its slot is free, one claim takes it.
	report(second[slow.ID][0], true)
	third := claim()
	if len(third[slow.ID]) != 1 {
		t.Fatalf("claim once the timed-out webhook's claims ended: %d of its events, want 1", len(third[slow.ID]))
	}
	if got := claim(); len(got[slow.ID]) != 0 {
		t.Fatalf("claim while the timed-out webhook's one slot is held: %d of its events, want none", len(got[slow.ID]))
	}
	// An attempt that ends in time: slow is claimed as any webhook again.
	report(third[slow.ID][0], false)
	if got, again := claim(), claim(); len(got[slow.ID]) != 1 || len(again[slow.ID]) != 1 {
		t.Fatalf("claims after an attempt in time: %d then %d events of the webhook, want 1 and 1", len(got[slow.ID]), len(again[slow.ID]))
	}
}

// testWebhookJobMissed: a webhook of job.missed gets one event per sweep
// pass that decided ticks of the job missed, listing that pass's missed
// runs newest first and counting its missed ticks; all of them together
// are the missed runs that run.missed tells one by one.
func testWebhookJobMissed(t *testing.T, b *bundle) {
	ws := webhookStore(t, b)
	ctx := t.Context()
	job := b.prefix + ":flood"
	w := newWebhook(t, []string{b.prefix + ":"}, "run.missed", "job.missed")
	if err := ws.CreateWebhook(ctx, &w); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	t.Cleanup(func() { _ = ws.DeleteWebhook(t.Context(), w.ID) })

	b.register(t, job, everySecond, shortGrace)
	l := b.sweepUntil(t, job, "three missed ticks", func(l leaseapi.Lease) bool { return l.MissedTicks >= 3 })
	if _, err := b.store.ForgetSchedule(ctx, job); err != nil {
		t.Fatalf("ForgetSchedule: %v", err)
	}
	l = b.get(t, job)

	var perRun, listed []string
	var counted int64
	for {
		events, err := ws.ClaimWebhookEvents(ctx, &leaseapi.ClaimWebhookParams{Limit: 10, Claim: time.Hour})
		if err != nil {
			t.Fatalf("ClaimWebhookEvents: %v", err)
		}
		if len(events) == 0 {
			break
		}
		for _, e := range events {
			if e.WebhookID != w.ID || e.JobID != job {
				t.Fatalf("event %s of %s %s: another webhook's or job's", e.Type, e.WebhookID, e.JobID)
			}
			switch e.Type {
			case "run.missed":
				perRun = append(perRun, e.Run.Tick.UTC().Format(time.RFC3339Nano))
			case "job.missed":
				if e.Run != nil || e.Lease == nil || len(e.Missed) == 0 || e.MissedCount < int64(len(e.Missed)) {
					t.Errorf("job.missed: run %v, lease %v, %d missed runs, count %d; want no run, the lease, the pass's missed runs and a count of at least as many",
						e.Run, e.Lease, len(e.Missed), e.MissedCount)
				}
				counted += e.MissedCount
				for i, r := range e.Missed {
					if r.Outcome != leaseapi.OutcomeMissed || r.Tick == nil || r.EndedAt == nil ||
						(i > 0 && !r.Tick.Before(*e.Missed[i-1].Tick)) {
						t.Errorf("job.missed: run %d %+v, want missed runs with tick and end, newest first", i, r)
						continue
					}
					listed = append(listed, r.Tick.UTC().Format(time.RFC3339Nano))
				}
			default:
				t.Errorf("event %s, want only run.missed and job.missed", e.Type)
			}
			finish(t, ws, e, 200, 0)
		}
	}
	if counted != l.MissedTicks {
		t.Errorf("job.missed counts add up to %d, want the job's %d missed ticks", counted, l.MissedTicks)
	}
	if !slices.Equal(sortedCopy(perRun), sortedCopy(listed)) || len(perRun) == 0 {
		t.Errorf("missed runs: run.missed told %v, job.missed listed %v; want the same runs", perRun, listed)
	}
}
