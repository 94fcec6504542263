package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/jobs"
)

// Owed ticks: `leasectl trigger JOB` makes a job owe a manual tick (run
// now), and `leasectl run --owed JOB -- COMMAND` claims what a job owes.

// newIdempotencyKey is the Idempotency-Key of one `leasectl trigger`: its
// own retries send it again, so a retry after a 503 never owes a second run.
func newIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "leasectl-" + hex.EncodeToString(b)
}

// triggerCommand is `leasectl trigger`; it returns the exit status.
func triggerCommand(ctx context.Context, args []string, env environment) int {
	err := trigger(ctx, args, env)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintf(env.stderr, "leasectl trigger: %v\n", err)
	return errorExit(err)
}

// trigger is `leasectl trigger [--reason R] [--key K] JOB`: POST
// /leases/{jobId}/trigger (admin). It retries what may be retried (the
// network, 5xx, 429, a key still in flight) with the same Idempotency-Key
// for up to --wait.
func trigger(ctx context.Context, args []string, env environment) error {
	fs := newFlagSet("trigger", env.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: leasectl trigger [flags] JOB

Run now: JOB owes one manual tick, which the next replica or host that
claims owed ticks runs once (jobs.Runner does by itself; a crontab host with
'leasectl run --owed JOB -- COMMAND'). Needs an admin token. A second trigger
while the tick is still owed answers the same tick. The Idempotency-Key is
printed on stderr; pass it with --key to retry this trigger later without
owing a second run.

Flags:
`)
		fs.PrintDefaults()
	}
	apiURL, caFile := apiFlags(fs, env)
	output := fs.String("o", "", "output format: json prints the API's JSON (default one line)")
	reason := fs.String("reason", "", "why the job is run now (at most 256 characters), shown with the owed tick as triggerReason")
	key := fs.String("key", "", "the Idempotency-Key to send (default a new one per invocation)")
	wait := fs.Duration("wait", 10*time.Second, "how long to retry while leaseapi is unreachable or unavailable")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *output != "" && *output != "json" {
		return usagef("-o %q: want json (or nothing for one line)", *output)
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one JOB, got %q", fs.Args())
	}
	job := fs.Arg(0)
	if !leaseapi.ValidJobID(job) {
		return usagef("invalid JOB %q: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", job)
	}
	if *wait <= 0 {
		return usagef("--wait %s: want a positive duration", *wait)
	}
	if *key == "" {
		*key = newIdempotencyKey()
	}
	p := leaseapi.TriggerParams{JobID: job, Reason: *reason, Key: *key, Grace: time.Millisecond}
	if err := p.Validate(); err != nil {
		if inv, ok := errors.AsType[*leaseapi.InvalidError](err); ok && inv.Field == "Idempotency-Key" {
			return usagef("--key: %s", inv.Rule)
		}
		return usagef("--reason: %w", err)
	}
	c, err := newClient(*apiURL, *caFile, env.token)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "leasectl trigger: %s: Idempotency-Key %s\n", job, *key)
	var body client.TriggerRequest
	if *reason != "" {
		body.Reason = reason
	}
	answer, err := retrying(ctx, *wait, func(ctx context.Context) (*http.Response, error) {
		return c.TriggerJob(ctx, job, &client.TriggerJobParams{IdempotencyKey: key}, body)
	})
	if err != nil {
		return err
	}
	if *output == "json" {
		return printJSON(env.stdout, answer)
	}
	var l client.Lease
	bad, err := decodeTolerant(answer, &l)
	if _, unreadable := bad["owedTick"]; err != nil || (l.OwedTick == nil && !unreadable) {
		return fmt.Errorf("leaseapi answered a lease without an owed tick: %s", answer)
	}
	reasonText := client.LeaseOwedReasonManual
	if l.OwedReason != nil {
		reasonText = *l.OwedReason
	}
	tick, unreadable := bad["owedTick"]
	if !unreadable {
		tick = api.FormatTime(*l.OwedTick)
	}
	_, err = fmt.Fprintf(env.stdout, "job %q owes tick %s (%s)\n", l.JobId, tick, reasonText)
	return err
}

// retrying sends with do until it is answered, retrying the network, 5xx
// and 429 with backoff (never sooner than a Retry-After) for up to wait.
func retrying(ctx context.Context, wait time.Duration, send func(context.Context) (*http.Response, error)) ([]byte, error) {
	deadline := time.Now().Add(wait)
	backoff := 100 * time.Millisecond
	for {
		body, err := do(ctx, send)
		if err == nil || !retryableErr(err) {
			return body, err
		}
		pause := backoff
		if e, ok := errors.AsType[*jobs.APIError](err); ok && e.RetryAfter > pause {
			pause = e.RetryAfter
		}
		if time.Now().Add(pause).After(deadline) {
			return nil, fmt.Errorf("%w (%w)", errWaitExpired, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%w)", context.Cause(ctx), err)
		case <-time.After(pause):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// retryableErr: leaseapi did not answer, answered 5xx, or 429, or 409
// idempotency_key_in_flight (an earlier attempt of this trigger is still
// being answered).
func retryableErr(err error) bool {
	if e, ok := errors.AsType[*jobs.APIError](err); ok {
		return e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500 ||
			e.StatusCode == http.StatusConflict && e.Code == api.CodeIdempotencyKeyInFlight
	}
	return errors.Is(err, leaseapi.ErrUnavailable)
}

// owedTick asks leaseapi what job owes (POST /owed), retrying until ctx is
// done; ok is false when it owes nothing.
func owedTick(ctx context.Context, c *client.ClientWithResponses, job string) (tick time.Time, ok bool, err error) {
	send := func(ctx context.Context) (*http.Response, error) {
		return c.OwedTicks(ctx, client.OwedRequest{Jobs: []string{job}})
	}
	backoff := 100 * time.Millisecond
	for {
		body, err := do(ctx, send)
		if err == nil {
			var w struct {
				Owed []struct {
					JobID string    `json:"jobId"`
					Tick  time.Time `json:"tick"`
				} `json:"owed"`
			}
			if err := json.Unmarshal(body, &w); err != nil {
				return time.Time{}, false, fmt.Errorf("owed: leaseapi answered invalid JSON: %w", err)
			}
			for _, o := range w.Owed {
				if o.JobID == job {
					return o.Tick.UTC(), true, nil
				}
			}
			return time.Time{}, false, nil
		}
		if e, ok := errors.AsType[*jobs.APIError](err); ok && (e.StatusCode == http.StatusNotFound || e.StatusCode == http.StatusMethodNotAllowed) {
			return time.Time{}, false, fmt.Errorf("owed: this leaseapi does not serve POST /owed (an older version?): %w", err)
		}
		if !retryableErr(err) {
			return time.Time{}, false, fmt.Errorf("owed: %w", err)
		}
		pause := backoff
		if e, ok := errors.AsType[*jobs.APIError](err); ok && e.RetryAfter > pause {
			pause = e.RetryAfter
		}
		select {
		case <-ctx.Done():
			return time.Time{}, false, fmt.Errorf("%w (owed: %w)", jobs.ErrShutdown, err)
		case <-time.After(pause):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
