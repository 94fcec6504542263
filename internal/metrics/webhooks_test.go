package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/metrics"
)

// TestWebhookMetrics: every result of the deliveries counter exists from
// the start; an attempt counts under its result; the refresher counts the
// outbox with the other gauges.
func TestWebhookMetrics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg, m := newMetrics(t)
	w, err := metrics.NewWebhooks(reg)
	if err != nil {
		t.Fatal(err)
	}
	w.WebhookAttempted(leaseapi.WebhookFailed)
	s := openSQLite(t, m)
	hook := leaseapi.Webhook{ID: "wh_000000000001", URL: "https://hooks.example/x", URLRedacted: "https://hooks.example/…",
		Secret: "whsec_c2VjcmV0", Events: []string{"run.failed"}, Scopes: []string{"*"}, Format: leaseapi.WebhookFormatStandard}
	if err := s.CreateWebhook(ctx, &hook); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		l, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: "a", Owner: "o", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Release(ctx, &leaseapi.ReleaseParams{JobID: "a", Owner: "o", Token: l.Token, Outcome: leaseapi.OutcomeFailed}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := metrics.NewStatsRefresher(s, m, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.CountOutbox(s, w)
	if err := metrics.RefreshOnce(ctx, r); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP leaseapi_webhook_deliveries_total Webhook delivery attempts by result, counted by the instance that made them: delivered (2xx), failed (tried again later), gave_up (failed, and the event is older than the 24 h of retries).
# TYPE leaseapi_webhook_deliveries_total counter
leaseapi_webhook_deliveries_total{result="delivered"} 0
leaseapi_webhook_deliveries_total{result="failed"} 1
leaseapi_webhook_deliveries_total{result="gave_up"} 0
# HELP leaseapi_webhook_outbox Webhook events waiting for delivery (or for their next attempt), as of the last refresh.
# TYPE leaseapi_webhook_outbox gauge
leaseapi_webhook_outbox 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "leaseapi_webhook_deliveries_total", "leaseapi_webhook_outbox"); err != nil {
		t.Error(err)
	}
}
