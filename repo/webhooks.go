package repo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/webhook"
)

// WebhookDelivererConfig configures a WebhookDeliverer.
type WebhookDelivererConfig struct {
	// Interval is the time between looks at an empty outbox (default
	// 1 s): an event is first tried about this long after it was decided,
	// at most.
	Interval time.Duration
	// BatchSize bounds the events one claim takes (default 16).
	BatchSize int
	// Concurrency bounds the attempts in flight (default 4).
	Concurrency int
	// Claim is how long a claimed event stays this instance's (default
	// 1 min): should the instance die mid-attempt, another one tries the
	// event again once the claim has passed. It must outlast the attempts
	// of a whole batch.
	Claim time.Duration
	// AllowPrivate lets deliveries reach loopback, private, link-local and
	// the other addresses webhook.CheckAddr refuses
	// (LEASEAPI_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate bool
	// PublicURL is leaseapi's base URL as its users reach it, for the
	// console link of a slack message; "" for no link.
	PublicURL string
	// Sealer opens the stored URLs and secrets; nil when they are stored
	// as given.
	Sealer *webhook.Sealer
	// DataFunc writes an event's data, {"jobId","run","lease"} in the
	// API's schemas (api.WebhookData). Required.
	DataFunc func(*leaseapi.WebhookEvent) ([]byte, error)
	// Observer is told what became of each attempt; nil tells nobody.
	Observer leaseapi.WebhookObserver
}

// reportTimeout bounds the store calls of a pass: a claim, a report.
const reportTimeout = 10 * time.Second

func (c *WebhookDelivererConfig) setDefaults() {
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.BatchSize == 0 {
		c.BatchSize = 16
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.Claim == 0 {
		c.Claim = time.Minute
	}
}

// Validate reports a configuration the deliverer cannot run with.
func (c *WebhookDelivererConfig) Validate() error {
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("webhook deliverer: interval %s must be positive", c.Interval)
	case c.BatchSize <= 0 || c.Concurrency <= 0:
		return fmt.Errorf("webhook deliverer: batch size %d and concurrency %d must be positive", c.BatchSize, c.Concurrency)
	case c.DataFunc == nil:
		return errors.New("webhook deliverer: DataFunc is required")
	}
	rounds := time.Duration((c.BatchSize + c.Concurrency - 1) / c.Concurrency)
	if need := rounds*webhook.Timeout + reportTimeout; c.Claim < need {
		return fmt.Errorf("webhook deliverer: claim %s must outlast the attempts of a batch (%d rounds of %s, and the report): at least %s",
			c.Claim, rounds, webhook.Timeout, need)
	}
	return nil
}

// WebhookDeliverer delivers the webhook outbox: it claims the due events,
// makes one attempt at each with no transaction open (webhook.Deliver: a
// 10 s timeout, no redirect, no proxy, and unless AllowPrivate a dialer
// that refuses private addresses, checked on the address it dials), and
// reports each attempt: delivered (2xx) and gone, or due again after a
// backoff from seconds to hours (webhook.NextAttempt), or given up 24 h
// after the event. Every instance may run one: each attempt is claimed by
// one of them.
type WebhookDeliverer struct {
	store  leaseapi.WebhookStore
	cfg    WebhookDelivererConfig
	logger *slog.Logger
	// send makes one attempt (webhook.Deliver with the deliverer's client).
	send func(ctx context.Context, target, secret string, format webhook.Format, m webhook.Message, now time.Time) webhook.Result
	now  func() time.Time
	// nextAttempt is the backoff: webhook.NextAttempt (tests shorten it).
	nextAttempt func(created, now time.Time, attempts int) (time.Time, bool)
}

// maxWebhookBatchesPerPass bounds one pass; what is left waits for the
// next one.
const maxWebhookBatchesPerPass = 100

// NewWebhookDeliverer returns a deliverer of store's outbox; zero config
// fields get defaults.
func NewWebhookDeliverer(store leaseapi.WebhookStore, cfg WebhookDelivererConfig, logger *slog.Logger) (*WebhookDeliverer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	client := webhook.NewClient(cfg.AllowPrivate)
	publicURL := cfg.PublicURL
	return &WebhookDeliverer{
		store:  store,
		cfg:    cfg,
		logger: logger,
		send: func(ctx context.Context, target, secret string, format webhook.Format, m webhook.Message, now time.Time) webhook.Result {
			return webhook.Deliver(ctx, client, target, secret, format, publicURL, m, now)
		},
		now:         time.Now,
		nextAttempt: webhook.NextAttempt,
	}, nil
}

// webhookPass is what one pass did.
type webhookPass struct {
	Delivered, Failed, GaveUp int
	// Lost counts the attempts whose report came after their claim had
	// passed and the event was claimed again (tried again, so perhaps
	// delivered twice).
	Lost int
}

// Run delivers now and then every interval until ctx is cancelled.
func (d *WebhookDeliverer) Run(ctx context.Context) {
	every(ctx, d.cfg.Interval, func(ctx context.Context) {
		res, err := d.runOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			d.logger.WarnContext(ctx, "delivering webhooks failed", slog.Any("error", err))
		case res.Failed > 0 || res.GaveUp > 0 || res.Lost > 0:
			d.logger.InfoContext(ctx, "delivered webhooks", slog.Int("delivered", res.Delivered),
				slog.Int("failed", res.Failed), slog.Int("gave_up", res.GaveUp), slog.Int("claims_lost", res.Lost))
		}
	})
}

// runOnce claims and delivers batches until the outbox has no due event
// left, and returns what it did.
func (d *WebhookDeliverer) runOnce(ctx context.Context) (webhookPass, error) {
	var total webhookPass
	var mu sync.Mutex
	for range maxWebhookBatchesPerPass {
		claimCtx, cancel := context.WithTimeout(ctx, reportTimeout)
		events, err := d.store.ClaimWebhookEvents(claimCtx, d.cfg.BatchSize, d.cfg.Claim)
		cancel()
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return total, nil
			}
			return total, err
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, d.cfg.Concurrency)
		var errs []error
		for i := range events {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				result, err := d.attempt(ctx, &events[i])
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, leaseapi.ErrClaimLost):
					total.Lost++
				case err != nil:
					errs = append(errs, err)
				case result == leaseapi.WebhookDelivered:
					total.Delivered++
				case result == leaseapi.WebhookFailed:
					total.Failed++
				case result == leaseapi.WebhookGaveUp:
					total.GaveUp++
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			return total, errors.Join(errs...)
		}
		if len(events) < d.cfg.BatchSize || ctx.Err() != nil {
			return total, nil
		}
	}
	return total, nil
}

// attempt makes one attempt at e and reports it. An attempt cut short by
// ctx (a shutdown) is not reported: its claim passes and the event is
// tried again, by this instance or another, with the same webhook-id.
func (d *WebhookDeliverer) attempt(ctx context.Context, e *leaseapi.WebhookEvent) (leaseapi.WebhookResult, error) {
	log := d.logger.With(slog.String("webhook_id", e.WebhookID), slog.String("event_id", e.ID),
		slog.String("event", e.Type), slog.String("job_id", e.JobID), slog.Int("attempt", e.Attempt))
	now := d.now()
	res := d.deliver(ctx, e, now)
	if !res.Delivered && ctx.Err() != nil {
		return "", nil
	}
	a := &leaseapi.WebhookAttempt{Event: e, At: now, Status: res.Status, Error: res.Err, Delivered: res.Delivered}
	result := leaseapi.WebhookDelivered
	if !res.Delivered {
		result = leaseapi.WebhookGaveUp
		if next, ok := d.nextAttempt(e.CreatedAt, now, e.Attempt); ok {
			result, a.RetryIn = leaseapi.WebhookFailed, max(next.Sub(now), time.Millisecond)
		}
	}
	reportCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	if err := d.store.FinishWebhookAttempt(reportCtx, a); err != nil {
		if errors.Is(err, leaseapi.ErrClaimLost) {
			log.InfoContext(ctx, "webhook attempt not recorded: its claim had passed and the event was claimed again (it is tried again), or its webhook was deleted",
				slog.Int("status", res.Status))
		}
		return "", err
	}
	if d.cfg.Observer != nil {
		d.cfg.Observer.WebhookAttempted(result)
	}
	switch result {
	case leaseapi.WebhookFailed:
		log.InfoContext(ctx, "webhook attempt failed; trying again later", slog.Int("status", res.Status),
			slog.String("error", res.Err), slog.Duration("retry_in", a.RetryIn))
	case leaseapi.WebhookGaveUp:
		log.WarnContext(ctx, "webhook attempt failed; giving up the event", slog.Int("status", res.Status),
			slog.String("error", res.Err), slog.Duration("since_event", now.Sub(e.CreatedAt)))
	}
	return result, nil
}

// deliver opens e's URL and secret and sends it. It never tells the URL
// (a Slack URL is itself a secret) or the secret.
func (d *WebhookDeliverer) deliver(ctx context.Context, e *leaseapi.WebhookEvent, now time.Time) webhook.Result {
	target, err := d.cfg.Sealer.Open(e.URL, webhook.AAD(e.WebhookID, webhook.FieldURL))
	if err != nil {
		return webhook.Result{Err: "cannot decrypt the webhook's url: " + err.Error()}
	}
	secret, err := d.cfg.Sealer.Open(e.Secret, webhook.AAD(e.WebhookID, webhook.FieldSecret))
	if err != nil {
		return webhook.Result{Err: "cannot decrypt the webhook's secret: " + err.Error()}
	}
	data, err := d.cfg.DataFunc(e)
	if err != nil {
		return webhook.Result{Err: err.Error()}
	}
	m := webhook.Message{ID: e.ID, Type: webhook.Event(e.Type), Timestamp: e.CreatedAt, Data: data}
	res := d.send(ctx, target, secret, webhook.Format(e.Format), m, now)
	if !res.Delivered && res.Err == "" && res.Status >= 300 && res.Status < 400 {
		res.Err = "redirects are not followed"
	}
	return res
}
