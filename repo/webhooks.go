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
	// Interval is the time between looks at an outbox with nothing due
	// (default 1 s): an event is first tried about this long after it was
	// decided, at most, when a slot is free.
	Interval time.Duration
	// Concurrency is the number of delivery slots: attempts in flight at
	// once (default 4). Each webhook holds at most one of them.
	Concurrency int
	// Timeout bounds one attempt (default webhook.Timeout, 10 s).
	Timeout time.Duration
	// Claim is how long a claimed event stays this instance's (default
	// 1 min): should the instance die mid-attempt, another one tries the
	// event again once the claim has passed. It must outlast an attempt
	// and its report.
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

// reportTimeout bounds the store calls of the deliverer: a claim, a report.
const reportTimeout = 10 * time.Second

func (c *WebhookDelivererConfig) setDefaults() {
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.Timeout == 0 {
		c.Timeout = webhook.Timeout
	}
	if c.Claim == 0 {
		c.Claim = time.Minute
	}
}

// Validate reports a configuration the deliverer cannot run with.
func (c *WebhookDelivererConfig) Validate() error {
	switch {
	case c.Interval <= 0 || c.Timeout <= 0:
		return fmt.Errorf("webhook deliverer: interval %s and timeout %s must be positive", c.Interval, c.Timeout)
	case c.Concurrency <= 0:
		return fmt.Errorf("webhook deliverer: concurrency %d must be positive", c.Concurrency)
	case c.DataFunc == nil:
		return errors.New("webhook deliverer: DataFunc is required")
	}
	if need := c.Timeout + reportTimeout; c.Claim <= need {
		return fmt.Errorf("webhook deliverer: claim %s must outlast an attempt (%s) and its report (%s): more than %s",
			c.Claim, c.Timeout, reportTimeout, need)
	}
	return nil
}

// WebhookDeliverer delivers the webhook outbox. Each webhook is its own
// queue: the deliverer has Concurrency slots, claims the oldest due event
// of as many webhooks as it has free slots, passing over the webhooks it
// has an attempt in flight for, and claims again as soon as a slot frees.
// A webhook thus holds at most one slot of an instance, and one whose last
// attempt timed out at most one slot of all instances (the store sees to
// it), so that while the webhooks whose receivers time out are fewer than
// the slots, another webhook's due event starts within one Timeout. Each
// attempt is made with no transaction open (webhook.Deliver: the timeout,
// no redirect, no proxy, and unless AllowPrivate a dialer that refuses
// private addresses, checked on the address it dials) and reported:
// delivered (2xx) and gone, or due again after a backoff from seconds to
// hours (webhook.NextAttempt), or given up 24 h after the event. Every
// instance may run one: each attempt is claimed by one of them.
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
	client := webhook.NewClient(cfg.AllowPrivate, cfg.Timeout)
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

// webhookPass is what a round of attempts did.
type webhookPass struct {
	Delivered, Failed, GaveUp int
	// Lost counts the attempts whose report came after their claim had
	// passed and the event was claimed again (tried again, so perhaps
	// delivered twice).
	Lost int
}

// attemptDone is what an attempt tells the loop when it ends.
type attemptDone struct {
	webhookID string
	result    leaseapi.WebhookResult
	err       error
}

// add counts a finished attempt in p, and returns its error unless it is
// a lost claim.
func (p *webhookPass) add(a attemptDone) error {
	switch {
	case errors.Is(a.err, leaseapi.ErrClaimLost):
		p.Lost++
	case a.err != nil:
		return a.err
	case a.result == leaseapi.WebhookDelivered:
		p.Delivered++
	case a.result == leaseapi.WebhookFailed:
		p.Failed++
	case a.result == leaseapi.WebhookGaveUp:
		p.GaveUp++
	}
	return nil
}

// Run delivers until ctx is cancelled: it fills its free slots whenever
// one frees, and looks for due events every interval otherwise. An
// attempt in flight when ctx is cancelled is cut short and not reported:
// its claim passes and the event is tried again.
func (d *WebhookDeliverer) Run(ctx context.Context) {
	done := make(chan attemptDone, d.cfg.Concurrency)
	busy := make(map[string]bool, d.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	ticker := time.NewTicker(d.cfg.Interval)
	defer ticker.Stop()
	failing := false // a claim failed: said once until one succeeds
	for {
		if free := d.cfg.Concurrency - len(busy); free > 0 && ctx.Err() == nil {
			events, err := d.claim(ctx, free, busy)
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				d.logger.WarnContext(ctx, "claiming webhook events failed", slog.Any("error", err))
				failing = true
			case err == nil:
				failing = false
			}
			for i := range events {
				e := &events[i]
				busy[e.WebhookID] = true
				wg.Go(func() {
					result, err := d.attempt(ctx, e)
					done <- attemptDone{webhookID: e.WebhookID, result: result, err: err}
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case a := <-done:
			delete(busy, a.webhookID)
			if a.err != nil && !errors.Is(a.err, leaseapi.ErrClaimLost) && ctx.Err() == nil {
				d.logger.WarnContext(ctx, "recording a webhook attempt failed", slog.Any("error", a.err))
			}
		case <-ticker.C:
		}
	}
}

// claim claims up to free events of webhooks other than busy ones.
func (d *WebhookDeliverer) claim(ctx context.Context, free int, busy map[string]bool) ([]leaseapi.WebhookEvent, error) {
	ids := make([]string, 0, len(busy))
	for id := range busy {
		ids = append(ids, id)
	}
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	return d.store.ClaimWebhookEvents(ctx, &leaseapi.ClaimWebhookParams{Limit: free, Claim: d.cfg.Claim, Busy: ids})
}

// runOnce is one round of Run, for tests: it fills every slot, at most one
// event per webhook, waits for those attempts, and returns what they did.
func (d *WebhookDeliverer) runOnce(ctx context.Context) (webhookPass, error) {
	var total webhookPass
	events, err := d.claim(ctx, d.cfg.Concurrency, nil)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return total, nil
		}
		return total, err
	}
	done := make(chan attemptDone, len(events))
	for i := range events {
		go func() {
			result, err := d.attempt(ctx, &events[i])
			done <- attemptDone{webhookID: events[i].WebhookID, result: result, err: err}
		}()
	}
	var errs []error
	for range events {
		if err := total.add(<-done); err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
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
	a := &leaseapi.WebhookAttempt{Event: e, At: now, Status: res.Status, Error: res.Err, Delivered: res.Delivered,
		TimedOut: res.TimedOut}
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
	if res.TimedOut {
		log.InfoContext(ctx, "webhook attempt timed out; the webhook holds one delivery slot until an attempt ends in time",
			slog.Duration("timeout", d.cfg.Timeout))
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
