//go:build chaos

package chaos

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/internal/checker"
	"github.com/leaseapi/leaseapi/webhook"
)

// The webhook of a chaos run (I12): the harness starts a receiver on
// loopback, registers one webhook on it through the API with the admin
// token before the replicas start (run.failed, run.expired and run.missed
// of every job), and after the faults end waits until every event the
// run history then owed has reached the receiver, or the outbox holds
// none of the events it held then, or webhookWaitMax has passed.
//
// With HungWebhook the jobs belong to two teams (jobID) and each team has
// its webhook, scoped to its jobs: team A's on a receiver that reads every
// message and never answers (each attempt runs out of time), team B's on
// the answering receiver. I12 judges team B's; I12b judges that team A's
// held at most one delivery slot across the instances and that team B's
// events kept flowing meanwhile (internal/checker/fairness.go).

// The teams of a run with HungWebhook: their scopes, which prefix their
// jobs' ids.
const (
	teamA = "team-a."
	teamB = "team-b."
)

// teamScope is the team of job i of n: the first half team A's.
func teamScope(i, n int) string {
	if i < n/2 {
		return teamA
	}
	return teamB
}

// deliverInterval is the instances' deliverer's pass interval (its
// default; not a setting).
const deliverInterval = time.Second

// webhookEvents are the events the chaos webhook subscribes to.
var webhookEvents = []string{checker.EventRunFailed, checker.EventRunExpired, checker.EventRunMissed}

// webhookRefuse is the share of events whose first attempt the receiver
// refuses (503): the service retries them about 5 s later.
const webhookRefuse = 0.25

// webhookWaitMax bounds the wait for delivery: an event claimed by an
// instance that was killed, or whose report a database fault lost, is
// tried again once its claim (1 min) has passed, so the last faults of a
// run can leave events for up to a minute after they end.
const webhookWaitMax = 75 * time.Second

// outboxOff is a step of a negative control (M8), not a fault the
// service must survive: the harness switches off the trigger that writes
// the events of a run's update to the outbox (a release's, an expiry's),
// so that the failed and expired runs decided afterwards are never told,
// which I12 must catch. The trigger of the missed runs stays on: their
// deliveries show the webhook still works.
const outboxOff checker.FaultKind = "outbox_off"

// switchOutboxOff disables the outbox trigger of the runs' updates.
func (e *env) switchOutboxOff() {
	_, err := bounded(10*time.Second, func(ctx context.Context) (struct{}, error) {
		_, err := e.leases().ExecContext(ctx, `ALTER TABLE runs DISABLE TRIGGER runs_webhook_update`)
		return struct{}{}, err
	})
	if err != nil {
		e.logf("switch the outbox trigger off: %v", err)
		return
	}
	e.logf("the outbox trigger of the runs' updates is off: no failed or expired run is told from now on")
}

// hook is the judged webhook of a run, and with HungWebhook the hung one.
type hook struct {
	rv     *receiver
	id     string
	scopes []string
	// hung is team A's receiver, which never answers (HungWebhook).
	hung       *receiver
	hungScopes []string
}

// newWebhookKey returns a LEASEAPI_WEBHOOK_KEY: the instances store the
// webhook's URL and secret sealed, as a production deployment should.
func newWebhookKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// webhooks reports whether the run registers any webhook: I12's, or the
// policies' (PolicyEvery).
func (cfg *runConfig) webhooks() bool { return cfg.Webhook || cfg.PolicyEvery > 0 }

// webhookEnv is what the instances need for the webhook: a receiver on
// loopback, and the key.
func (e *env) webhookEnv() []string {
	if !e.cfg.webhooks() {
		return nil
	}
	env := []string{"LEASEAPI_WEBHOOK_ALLOW_PRIVATE=true", "LEASEAPI_WEBHOOK_KEY=" + e.webhookKey}
	if e.cfg.WebhookTimeout > 0 {
		env = append(env, "LEASEAPI_WEBHOOK_TIMEOUT="+e.cfg.WebhookTimeout.String())
	}
	return env
}

// registerWebhook starts the receivers and registers the webhooks: one of
// scope * on the answering receiver, or with HungWebhook team A's on the
// hung receiver and team B's on the answering one.
func (e *env) registerWebhook() (*hook, error) {
	rv, err := startReceiver(e.cfg.Seed, webhookRefuse)
	if err != nil {
		return nil, err
	}
	e.t.Cleanup(rv.close)
	hk := &hook{rv: rv, scopes: []string{"*"}}
	if e.cfg.HungWebhook {
		hung, err := startHungReceiver()
		if err != nil {
			return nil, err
		}
		e.t.Cleanup(hung.close)
		hk.hung, hk.hungScopes, hk.scopes = hung, []string{teamA}, []string{teamB}
		if _, err := e.createWebhook(hung.URL(), webhookEvents, hk.hungScopes, hung.setSecret); err != nil {
			return nil, err
		}
	}
	if hk.id, err = e.createWebhook(rv.URL(), webhookEvents, hk.scopes, rv.setSecret); err != nil {
		return nil, err
	}
	return hk, nil
}

// createWebhook registers a webhook of events and scopes on the receiver
// at url through instance 0 (then 1, ...) with the admin token, trying
// again on a 503 or no answer (the creation enables the outbox triggers
// under a lock timeout, and answers 503 when it cannot take it), gives
// the receiver its secret (setSecret) and returns its id.
func (e *env) createWebhook(url string, events, scopes []string, setSecret func(string)) (string, error) {
	body, err := json.Marshal(api.CreateWebhookRequest{URL: url, Events: events, Scopes: scopes})
	if err != nil {
		return "", err
	}
	var last string
	for attempt := range 10 {
		inst := e.insts[attempt%len(e.insts)]
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/webhooks", inst.port), bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		if !e.open {
			req.Header.Set("Authorization", "Bearer "+adminToken)
		}
		resp, err := e.httpc.Do(req)
		if err != nil {
			last = err.Error()
			time.Sleep(500 * time.Millisecond)
			continue
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusCreated:
			var created api.CreatedWebhook
			if err := json.Unmarshal(rb, &created); err != nil {
				return "", fmt.Errorf("POST /webhooks: %w", err)
			}
			setSecret(created.Secret)
			e.logf("webhook %s registered on %s for %v of %v", created.ID, url, created.Events, created.Scopes)
			return created.ID, nil
		case http.StatusServiceUnavailable:
			last = string(rb)
			time.Sleep(500 * time.Millisecond)
		default:
			return "", fmt.Errorf("POST /webhooks: %d %s", resp.StatusCode, rb)
		}
	}
	return "", fmt.Errorf("POST /webhooks: no webhook after 10 attempts: %s", last)
}

// alertingRunsQuery reads the runs that owe an event I12 judges: failed,
// expired, missed, or whose expiry the service counted while they ran.
const alertingRunsQuery = `SELECT id, job_id, COALESCE(token, 0), COALESCE(owner, ''), tick, started_at, ended_at, outcome, trigger, expiry_counted
FROM runs WHERE outcome IN ('failed', 'expired', 'missed') OR expiry_counted ORDER BY id`

// outboxQuery reads the outbox's events of webhook $1, named by the run
// they carry.
const outboxQuery = `SELECT id, type, job_id, COALESCE((run->>'token')::bigint, 0), (run->>'tick')::timestamptz, COALESCE(run->>'trigger', ''),
	created_at, attempts, next_attempt, claimed_until
FROM webhook_outbox WHERE webhook_id = $1 ORDER BY created_at, id`

// outboxLeftQuery reads which of the events $1 are still in the outbox.
const outboxLeftQuery = `SELECT id, attempts, next_attempt, claimed_until FROM webhook_outbox WHERE id = ANY($1)`

// queryer is what a *sql.DB and a *sql.Tx share.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func readAlertingRuns(ctx context.Context, q queryer) ([]checker.Run, error) {
	rows, err := q.QueryContext(ctx, alertingRunsQuery)
	if err != nil {
		return nil, fmt.Errorf("read the alerting runs: %w", err)
	}
	defer rows.Close()
	var out []checker.Run
	for rows.Next() {
		var r checker.Run
		var tick, started, ended sql.NullTime
		if err := rows.Scan(&r.ID, &r.Job, &r.Token, &r.Owner, &tick, &started, &ended, &r.Outcome, &r.Trigger, &r.ExpiryCounted); err != nil {
			return nil, err
		}
		r.Tick, r.StartedAt, r.EndedAt = nullTime(tick), nullTime(started), nullTime(ended)
		out = append(out, r)
	}
	return out, rows.Err()
}

func readOutbox(ctx context.Context, q queryer, webhookID string) ([]checker.OutboxEvent, error) {
	rows, err := q.QueryContext(ctx, outboxQuery, webhookID)
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", err)
	}
	defer rows.Close()
	var out []checker.OutboxEvent
	for rows.Next() {
		var o checker.OutboxEvent
		var tick, claimed sql.NullTime
		if err := rows.Scan(&o.ID, &o.Type, &o.Job, &o.Token, &tick, &o.Trigger, &o.Created, &o.Attempts, &o.NextAttempt, &claimed); err != nil {
			return nil, err
		}
		o.Tick, o.ClaimedUntil, o.Left = nullTime(tick), nullTime(claimed), true
		out = append(out, o)
	}
	return out, rows.Err()
}

// snapshot reads, in one transaction, the runs that owe an event and the
// events of webhook webhookID waiting in the outbox: an event is written
// in the transaction that decides it, so every event of those runs is
// either in that outbox or already left it.
func (e *env) snapshot(webhookID string) ([]checker.Run, []checker.OutboxEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := e.leases().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = tx.Rollback() }()
	runs, err := readAlertingRuns(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	outbox, err := readOutbox(ctx, tx, webhookID)
	if err != nil {
		return nil, nil, err
	}
	return runs, outbox, nil
}

// updateLeft marks which events of outbox are still in it, and returns
// how many.
func (e *env) updateLeft(outbox []checker.OutboxEvent) (int, error) {
	ids := make([]string, 0, len(outbox))
	for _, o := range outbox {
		ids = append(ids, o.ID)
	}
	type left struct {
		attempts       int
		next, claimant time.Time
	}
	seen, err := bounded(5*time.Second, func(ctx context.Context) (map[string]left, error) {
		rows, err := e.leases().QueryContext(ctx, outboxLeftQuery, pq.Array(ids))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := make(map[string]left)
		for rows.Next() {
			var id string
			var l left
			var claimed sql.NullTime
			if err := rows.Scan(&id, &l.attempts, &l.next, &claimed); err != nil {
				return nil, err
			}
			l.claimant = nullTime(claimed)
			out[id] = l
		}
		return out, rows.Err()
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range outbox {
		l, ok := seen[outbox[i].ID]
		outbox[i].Left = ok
		if ok {
			n++
			outbox[i].Attempts, outbox[i].NextAttempt, outbox[i].ClaimedUntil = l.attempts, l.next, l.claimant
		}
	}
	return n, nil
}

// awaitDelivery waits, after the faults ended and with the instances
// still up, until every event that the runs of the moment owe the judged
// webhook has reached its receiver, or none of its outbox's events of the
// moment is left in it (what is missing then is lost), or webhookWaitMax
// has passed; then it collects what the receivers got and the runs that
// owe events again (a delivery must be about one of them).
func (e *env) awaitDelivery(hk *hook) (*checker.Webhook, error) {
	began := time.Now()
	alerting, outbox, err := e.snapshot(hk.id)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	w := &checker.Webhook{Events: webhookEvents, Scopes: hk.scopes, Alerting: alerting, Outbox: outbox}
	var why string
	for {
		w.Deliveries, w.Refused = hk.rv.accepted()
		missing := len(checker.Undelivered(w))
		left, err := e.updateLeft(w.Outbox)
		switch {
		case missing == 0:
			why = "every event due delivered"
		case err == nil && left == 0:
			why = fmt.Sprintf("the outbox's events of the wait's start are gone, %d events due undelivered", missing)
		case time.Since(began) > webhookWaitMax:
			why = fmt.Sprintf("stopped waiting at %s: %d events due undelivered, %d events of the wait's start still in the outbox (last read: %v)",
				webhookWaitMax, missing, left, err)
		}
		if why != "" {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	w.Waited = time.Since(began)
	w.Deliveries, w.Refused = hk.rv.accepted()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if w.Known, err = readAlertingRuns(ctx, e.leases()); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	e.logf("webhook: %d runs owed events and %d events were in the outbox when the wait began; after %s, %s; the receiver got %d messages, refused %d first attempts",
		len(w.Alerting), len(w.Outbox), w.Waited.Round(100*time.Millisecond), why, len(w.Deliveries), w.Refused)
	if hk.hung != nil {
		f := &checker.Fairness{
			Timeout: cmp.Or(e.cfg.WebhookTimeout, webhook.Timeout), Interval: deliverInterval, Instances: e.cfg.Instances,
			HungScopes: hk.hungScopes, Hung: hk.hung.hungAttempts(), First: hk.rv.firstAttempts(),
		}
		f.Ended = time.Now()
		w.Fairness = f
		e.logf("webhook: the hung receiver of %v got %d attempts; the answering one got %d events", f.HungScopes, len(f.Hung), len(f.First))
	}
	return w, nil
}

// webhookNotExercised says what a run with a webhook should have made for
// I12 to judge anything and did not: failed, expired or missed runs that
// owed an event when the wait for delivery began, expired ones among them
// when the plan kills replicas, missed ones when it pauses every replica
// across a tick, and deliveries; with HungWebhook, attempts at the hung
// receiver and team B events judged by I12b.
func webhookNotExercised(cfg *runConfig, r *checker.Report) []string {
	if !cfg.Webhook {
		return nil
	}
	var missing []string
	due := r.Stats.AlertsDue
	if due[checker.EventRunFailed]+due[checker.EventRunExpired]+due[checker.EventRunMissed] == 0 {
		missing = append(missing, "no failed, expired or missed run owed a webhook event")
	}
	if cfg.planned(checker.ReplicaKill) && due[checker.EventRunExpired] == 0 {
		missing = append(missing, "no expired run owed run.expired")
	}
	if cfg.planned(replicasPause) && due[checker.EventRunMissed] == 0 {
		missing = append(missing, "no missed tick owed run.missed")
	}
	if r.Stats.Deliveries == 0 {
		missing = append(missing, "the webhook's receiver got nothing")
	}
	if cfg.HungWebhook && r.Stats.HungAttempts == 0 {
		missing = append(missing, "team A's hung receiver got no attempt")
	}
	if cfg.HungWebhook && r.Stats.FairnessJudged == 0 {
		missing = append(missing, "no event of team B became due while team A's receiver hung, away from faults (I12b)")
	}
	return missing
}
