package metrics

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaseapi/leaseapi"
)

// Webhooks are the metrics of the webhook deliveries; they implement
// leaseapi.WebhookObserver. The outbox gauge is computed with the other
// gauges (StatsRefresher.CountOutbox).
type Webhooks struct {
	deliveries *prometheus.CounterVec
	outbox     prometheus.Gauge
}

var _ leaseapi.WebhookObserver = (*Webhooks)(nil)

// NewWebhooks registers the webhook metrics on reg.
func NewWebhooks(reg prometheus.Registerer) (*Webhooks, error) {
	m := &Webhooks{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_webhook_deliveries_total",
			Help: "Webhook delivery attempts by result, counted by the instance that made them: delivered (2xx), failed (tried again later), gave_up (failed, and the event is older than the 24 h of retries).",
		}, []string{"result"}),
		outbox: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leaseapi_webhook_outbox",
			Help: "Webhook events waiting for delivery (or for their next attempt), as of the last refresh.",
		}),
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.outbox} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	for _, r := range leaseapi.WebhookResults {
		m.deliveries.WithLabelValues(string(r))
	}
	return m, nil
}

// WebhookAttempted counts one attempt.
func (m *Webhooks) WebhookAttempted(r leaseapi.WebhookResult) {
	m.deliveries.WithLabelValues(string(r)).Inc()
}

// CountOutbox makes r also count the webhook outbox of ws into m, every
// time it computes the gauges.
func (r *StatsRefresher) CountOutbox(ws leaseapi.WebhookStore, m *Webhooks) {
	r.outbox = func(ctx context.Context) error {
		n, err := ws.WebhookOutbox(ctx)
		if err == nil {
			m.outbox.Set(float64(n))
		}
		return err
	}
}
