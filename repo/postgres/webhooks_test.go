package postgres_test

import (
	"database/sql"
	"sync"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
	"github.com/leaseapi/leaseapi/webhook"
)

// TestWebhookTriggersOnlyWhileWebhooksExist: the outbox triggers are off
// while no webhook exists (the lease calls pay nothing for them), on from
// the creation of the first webhook, and off again with the deletion of
// the last, also when several instances create and delete at once.
func TestWebhookTriggersOnlyWhileWebhooksExist(t *testing.T) {
	t.Parallel()
	dsn := repotest.NewPostgresURL(t)
	stores := make([]*postgres.Store, 2)
	for i := range stores {
		s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores[i] = s
	}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// states are the tgenabled of the three triggers: O on, D off.
	states := func() string {
		t.Helper()
		var s string
		if err := db.QueryRowContext(t.Context(), `SELECT string_agg(tgenabled::text, '' ORDER BY tgname) FROM pg_trigger
			WHERE tgname IN ('runs_webhook_insert', 'runs_webhook_update', 'leases_webhook_overdue')`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	newHook := func() leaseapi.Webhook {
		id, _ := webhook.NewID()
		return leaseapi.Webhook{ID: id, URL: "https://hooks.example/x", URLRedacted: "https://hooks.example/…", Secret: "whsec_eA==",
			Events: []string{"run.failed"}, Scopes: []string{"*"}, Format: leaseapi.WebhookFormatStandard}
	}
	if got := states(); got != "DDD" {
		t.Fatalf("triggers with no webhook: %q, want all off (DDD)", got)
	}
	first, second := newHook(), newHook()
	for _, w := range []*leaseapi.Webhook{&first, &second} {
		if err := stores[0].CreateWebhook(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		if got := states(); got != "OOO" {
			t.Fatalf("triggers with a webhook: %q, want all on (OOO)", got)
		}
	}
	if err := stores[1].DeleteWebhook(t.Context(), first.ID); err != nil {
		t.Fatal(err)
	}
	if got := states(); got != "OOO" {
		t.Fatalf("triggers with one webhook left: %q, want all on", got)
	}
	if err := stores[1].DeleteWebhook(t.Context(), second.ID); err != nil {
		t.Fatal(err)
	}
	if got := states(); got != "DDD" {
		t.Fatalf("triggers after the last webhook went: %q, want all off", got)
	}

	// Creates and deletes racing on two instances: whatever is left decides.
	var wg sync.WaitGroup
	kept := make([]leaseapi.Webhook, 8)
	for i := range 8 {
		wg.Go(func() {
			s := stores[i%2]
			w := newHook()
			if err := s.CreateWebhook(t.Context(), &w); err != nil {
				t.Errorf("CreateWebhook: %v", err)
				return
			}
			if i%4 == 0 {
				kept[i] = w
				return
			}
			if err := stores[(i+1)%2].DeleteWebhook(t.Context(), w.ID); err != nil {
				t.Errorf("DeleteWebhook: %v", err)
			}
		})
	}
	wg.Wait()
	if got := states(); got != "OOO" {
		t.Fatalf("triggers with two webhooks left after the race: %q, want all on", got)
	}
	for _, w := range kept {
		if w.ID == "" {
			continue
		}
		wg.Go(func() {
			if err := stores[0].DeleteWebhook(t.Context(), w.ID); err != nil {
				t.Errorf("DeleteWebhook: %v", err)
			}
		})
	}
	wg.Wait()
	if got := states(); got != "DDD" {
		t.Fatalf("triggers after the race deleted every webhook: %q, want all off", got)
	}
}
