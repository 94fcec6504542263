package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/client"
)

// APIError is a response of leaseapi that the runner cannot act on by
// retrying or skipping: a 4xx other than the lease conflicts, or a body it
// could not read. It unwraps to leaseapi.ErrNotFound for 404 and to
// leaseapi.ErrUnavailable for 5xx, so errors.Is works on it.
type APIError struct {
	// StatusCode is the HTTP status of the response.
	StatusCode int
	// Code and Detail are the problem's machine code and detail, when the
	// body was a problem document.
	Code   string
	Detail string
	// RetryAfter is the response's Retry-After in whole seconds, or 0.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("leaseapi answered %d", e.StatusCode)
	}
	return fmt.Sprintf("leaseapi answered %d %s: %s", e.StatusCode, e.Code, e.Detail)
}

// Unwrap returns the sentinel that matches the status, if any.
func (e *APIError) Unwrap() error {
	switch {
	case e.StatusCode == http.StatusNotFound:
		return leaseapi.ErrNotFound
	case e.StatusCode >= 500:
		return leaseapi.ErrUnavailable
	}
	return nil
}

// retryable reports whether an operation that failed with err may be sent
// again: the service or the network did not answer, so the outcome is
// unknown, and acquire (same owner and tick), heartbeat and release (same
// owner and token) are idempotent; or the service refused it before doing
// anything (429 rate_limited, 503 overloaded) and said when to come back.
func retryable(err error) bool {
	if e, ok := errors.AsType[*APIError](err); ok && e.StatusCode == http.StatusTooManyRequests {
		return true // rate_limited: nothing was done; retry after Retry-After
	}
	return errors.Is(err, leaseapi.ErrUnavailable)
}

// Skipped reports whether an acquire refused with err means "not this
// replica, not this tick": another replica holds or held it (lease_held,
// tick_done), its previous run started less than the job's MinInterval
// ago (too_soon), the job is paused (job_paused), the tick lies ahead of the
// server's clock (tick_ahead, a *leaseapi.TickAheadError: this host's
// clock is fast, which the runner logs as a warning), the job's group
// stayed full while the tick could still start (group_full, a
// *leaseapi.GroupFullError), or an adapter's scheduler fired at a time that
// is not a tick (ErrNotATick). It is no failure of the job.
func Skipped(err error) bool {
	return errors.Is(err, leaseapi.ErrLeaseHeld) || errors.Is(err, leaseapi.ErrTickDone) || errors.Is(err, leaseapi.ErrTooSoon) ||
		errors.Is(err, leaseapi.ErrJobPaused) || errors.Is(err, leaseapi.ErrTickAhead) ||
		errors.Is(err, leaseapi.ErrGroupFull) || errors.Is(err, ErrNotATick)
}

// leaseClient is the part of the generated client the runner uses.
type leaseClient = client.ClientWithResponsesInterface

// acquireRequest is what one acquire sends.
type acquireRequest struct {
	jobID, owner  string
	ttl           time.Duration
	tick          time.Time // zero: no tick
	schedule      string    // "": none
	grace         time.Duration
	catchUp       leaseapi.CatchUp // "": keep the stored policy
	catchUpWindow time.Duration
	group         *string       // nil: keep the stored group; "": leave it
	minInterval   time.Duration // 0: none
}

// acquireFields are the fields of an acquire besides the job and its owner
// and TTL, as the single call and a batch item both send them.
type acquireFields struct {
	Tick            *time.Time
	Schedule        *string
	GraceMs         *int64
	CatchUp         *string
	CatchUpWindowMs *int64
	Group           *string
	MinIntervalMs   *int64
}

// fields returns what a sends besides its job, owner and TTL.
func (a *acquireRequest) fields() acquireFields {
	var f acquireFields
	if !a.tick.IsZero() {
		t := a.tick.UTC()
		f.Tick = &t
	}
	if a.schedule != "" {
		spec := a.schedule
		f.Schedule = &spec
		if a.grace > 0 {
			ms := a.grace.Milliseconds()
			f.GraceMs = &ms
		}
		if a.catchUp != "" {
			policy := string(a.catchUp)
			f.CatchUp = &policy
			if a.catchUpWindow > 0 {
				ms := a.catchUpWindow.Milliseconds()
				f.CatchUpWindowMs = &ms
			}
		}
	}
	f.Group = a.group
	if a.minInterval > 0 {
		ms := a.minInterval.Milliseconds()
		f.MinIntervalMs = &ms
	}
	return f
}

// postAcquire asks for the lease of a.jobID for a.tick.
func postAcquire(ctx context.Context, c leaseClient, a *acquireRequest) (leaseapi.Lease, error) {
	jobID := a.jobID
	ttlMs := a.ttl.Milliseconds()
	f := a.fields()
	body := client.AcquireRequest{
		Owner: a.owner, TtlMs: &ttlMs, Tick: f.Tick, Schedule: f.Schedule, GraceMs: f.GraceMs,
		CatchUpWindowMs: f.CatchUpWindowMs, Group: f.Group, MinIntervalMs: f.MinIntervalMs,
	}
	if f.CatchUp != nil {
		policy := client.AcquireRequestCatchUp(*f.CatchUp)
		body.CatchUp = &policy
	}
	resp, err := c.AcquireLeaseWithResponse(ctx, jobID, body)
	if err != nil {
		return leaseapi.Lease{}, fmt.Errorf("acquire %q: %w: %w", jobID, leaseapi.ErrUnavailable, err)
	}
	if resp.JSON200 != nil {
		return fromWire(*resp.JSON200), nil
	}
	return leaseapi.Lease{}, acquireError(a, responseError(resp.HTTPResponse, resp.Body))
}

// acquireError is the error of a's acquire refused with err.
func acquireError(a *acquireRequest, err error) error {
	if ahead, ok := errors.AsType[*leaseapi.TickAheadError](err); ok {
		ahead.Tick = a.tick.UTC() // as sent: the server may have snapped it
	}
	if c, ok := errors.AsType[*leaseapi.ConflictError](err); ok {
		if soon, ok := c.Err.(*leaseapi.TooSoonError); ok {
			// The interval as sent, from the start of the grant the
			// refusal carries: both by the server's clock.
			soon.MinInterval, soon.Until = a.minInterval, c.Lease.AcquiredAt.Add(a.minInterval)
		}
	}
	return fmt.Errorf("acquire %q: %w", a.jobID, err)
}

// heartbeatRequest is what one heartbeat sends.
type heartbeatRequest struct {
	jobID, owner string
	token        int64
	ttl          time.Duration
}

// postHeartbeat extends the grant identified by h's owner and token.
func postHeartbeat(ctx context.Context, c leaseClient, h *heartbeatRequest) (leaseapi.Lease, error) {
	jobID := h.jobID
	ttlMs := h.ttl.Milliseconds()
	resp, err := c.HeartbeatLeaseWithResponse(ctx, jobID, client.HeartbeatRequest{Owner: h.owner, Token: h.token, TtlMs: &ttlMs})
	if err != nil {
		return leaseapi.Lease{}, fmt.Errorf("heartbeat %q: %w: %w", jobID, leaseapi.ErrUnavailable, err)
	}
	if resp.JSON200 != nil {
		return fromWire(*resp.JSON200), nil
	}
	return leaseapi.Lease{}, fmt.Errorf("heartbeat %q: %w", jobID, responseError(resp.HTTPResponse, resp.Body))
}

// postRelease ends the grant identified by owner and token with outcome.
func postRelease(ctx context.Context, c leaseClient, jobID, owner string, token int64, outcome leaseapi.Outcome) error {
	o := client.ReleaseRequestOutcome(outcome)
	resp, err := c.ReleaseLeaseWithResponse(ctx, jobID, client.ReleaseRequest{Owner: owner, Token: token, Outcome: &o})
	if err != nil {
		return fmt.Errorf("release %q: %w: %w", jobID, leaseapi.ErrUnavailable, err)
	}
	if resp.JSON200 != nil {
		return nil
	}
	return fmt.Errorf("release %q: %w", jobID, responseError(resp.HTTPResponse, resp.Body))
}

// responseError turns a response other than 200 into an error: a lease
// conflict becomes a *leaseapi.ConflictError (errors.Is with ErrLeaseHeld,
// ErrTickDone, ErrJobPaused, ErrTooSoon or ErrLeaseLost, errors.As for the
// lease), anything else an *APIError.
func responseError(resp *http.Response, body []byte) error {
	var retryAfter time.Duration
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	return problemError(resp.StatusCode, retryAfter, body)
}

// problemError is responseError of an answer with status, Retry-After
// retryAfter (0: none) and body: a single call's, or one item's of a batch
// (its status and problem).
func problemError(status int, retryAfter time.Duration, body []byte) error {
	var code struct {
		Code string `json:"code"`
	}
	if status == http.StatusConflict && json.Unmarshal(body, &code) == nil && code.Code == api.CodeGroupFull {
		// Read apart from the other problems, so that a group the client
		// cannot read does not turn the refusal into an error.
		return groupFullError(body, retryAfter)
	}
	var p client.Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Code == "" {
		return &APIError{StatusCode: status, RetryAfter: retryAfter}
	}
	if status == http.StatusConflict && p.Code == api.CodeTickAhead && p.Now != nil {
		ahead := &leaseapi.TickAheadError{Now: p.Now.UTC()}
		if p.Lease != nil {
			l := fromWire(*p.Lease)
			ahead.Lease = &l
		}
		return ahead
	}
	if status == http.StatusConflict && p.Lease != nil {
		var sentinel error
		switch p.Code {
		case api.CodeLeaseHeld:
			sentinel = leaseapi.ErrLeaseHeld
		case api.CodeTickDone:
			sentinel = leaseapi.ErrTickDone
		case api.CodeJobPaused:
			sentinel = leaseapi.ErrJobPaused
		case api.CodeLeaseLost:
			sentinel = leaseapi.ErrLeaseLost
		case api.CodeTooSoon:
			// Its interval and end are the acquire's (acquireError); the
			// server's clock at the refusal is not in the answer.
			sentinel = &leaseapi.TooSoonError{}
		}
		if sentinel != nil {
			return &leaseapi.ConflictError{Err: sentinel, Lease: fromWire(*p.Lease)}
		}
	}
	return &APIError{StatusCode: status, Code: string(p.Code), Detail: p.Detail, RetryAfter: retryAfter}
}

// retryAfter is how long err asks the client to wait before retrying: a
// 503's Retry-After (an overloaded leaseapi sheds with Retry-After: 1), or 0.
func retryAfter(err error) time.Duration {
	if e, ok := errors.AsType[*APIError](err); ok {
		return e.RetryAfter
	}
	return 0
}

// fromWire converts a lease of the generated client to the domain type.
func fromWire(l client.Lease) leaseapi.Lease {
	out := leaseapi.Lease{
		JobID:             l.JobId,
		Owner:             l.Owner,
		Token:             l.Token,
		State:             leaseapi.State(l.State),
		AcquiredAt:        l.AcquiredAt,
		RenewedAt:         l.RenewedAt,
		ExpiresAt:         l.ExpiresAt,
		ReleasedAt:        l.ReleasedAt,
		TTL:               time.Duration(l.TtlMs) * time.Millisecond,
		Tick:              l.Tick,
		LastCompletedTick: l.LastCompletedTick,
	}
	if l.LastOutcome != nil {
		out.LastOutcome = leaseapi.Outcome(*l.LastOutcome)
	}
	if l.Schedule != nil {
		out.Schedule = *l.Schedule
	}
	if l.GraceMs != nil {
		out.Grace = time.Duration(*l.GraceMs) * time.Millisecond
	}
	if l.Group != nil {
		out.Group = *l.Group
	}
	if l.Slot != nil {
		out.Slot = int(*l.Slot)
	}
	if l.SlotToken != nil {
		out.SlotToken = *l.SlotToken
	}
	return out
}

// groupFromWire converts a group of the generated client to the domain type.
func groupFromWire(w client.Group) leaseapi.Group {
	g := leaseapi.Group{Name: w.Name, Limit: int(w.Limit), Held: int(w.Held), CreatedAt: w.CreatedAt}
	if w.CreatedBy != nil {
		g.CreatedBy = *w.CreatedBy
	}
	for _, h := range w.Holders {
		g.Holders = append(g.Holders, leaseapi.GroupHolder{
			JobID: h.JobId, Owner: h.Owner, Token: h.Token, Slot: int(h.Slot), SlotToken: h.SlotToken, ExpiresAt: h.ExpiresAt,
		})
	}
	return g
}

// groupFullError reads the body of a 409 group_full: the group with its
// holders and the job's lease. A group or lease the client cannot read is
// left out; the refusal stands without it.
func groupFullError(body []byte, retryAfter time.Duration) *leaseapi.GroupFullError {
	e := &leaseapi.GroupFullError{RetryAfter: retryAfter}
	var p struct {
		Group json.RawMessage `json:"group"`
		Lease json.RawMessage `json:"lease"`
	}
	if json.Unmarshal(body, &p) != nil {
		return e
	}
	var g client.Group
	if len(p.Group) > 0 && json.Unmarshal(p.Group, &g) == nil {
		e.Group = groupFromWire(g)
	}
	var l client.Lease
	if len(p.Lease) > 0 && string(p.Lease) != "null" && json.Unmarshal(p.Lease, &l) == nil {
		lease := fromWire(l)
		e.Lease = &lease
	}
	return e
}

// rawOwedClient is what *client.ClientWithResponses also offers: POST
// /owed with the answer unparsed.
type rawOwedClient interface {
	OwedTicks(ctx context.Context, body client.OwedTicksJSONRequestBody, reqEditors ...client.RequestEditorFn) (*http.Response, error)
}

// postOwed asks what the jobs ids (1 to 1,000) owe: POST /owed. An entry
// the client cannot read (a tick that time.Time cannot hold, such as year
// 10000) is left out and returned in skipped, so that it costs the other
// jobs nothing; the generated client would fail the whole answer, so the
// answer is read entry by entry when the client offers it unparsed.
func postOwed(ctx context.Context, c leaseClient, ids []string) (owed []leaseapi.Owed, skipped []error, err error) {
	if rc, ok := c.(rawOwedClient); ok {
		return postOwedRaw(ctx, rc, ids)
	}
	resp, err := c.OwedTicksWithResponse(ctx, client.OwedRequest{Jobs: ids})
	if err != nil {
		return nil, nil, fmt.Errorf("owed: %w: %w", leaseapi.ErrUnavailable, err)
	}
	switch {
	case resp.JSON200 != nil:
	default:
		return nil, nil, owedError(resp.HTTPResponse, resp.Body)
	}
	out := make([]leaseapi.Owed, 0, len(resp.JSON200.Owed))
	for _, o := range resp.JSON200.Owed {
		out = append(out, fromWireOwed(o))
	}
	return out, nil, nil
}

// postOwedRaw is postOwed reading each entry of the answer by itself.
func postOwedRaw(ctx context.Context, c rawOwedClient, ids []string) ([]leaseapi.Owed, []error, error) {
	resp, err := c.OwedTicks(ctx, client.OwedRequest{Jobs: ids})
	if err != nil {
		return nil, nil, fmt.Errorf("owed: %w: %w", leaseapi.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("owed: %w: read the answer: %w", leaseapi.ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, owedError(resp, body)
	}
	var list struct {
		Owed []json.RawMessage `json:"owed"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, nil, fmt.Errorf("owed: %w: an answer the client cannot read: %w", leaseapi.ErrUnavailable, err)
	}
	out := make([]leaseapi.Owed, 0, len(list.Owed))
	var skipped []error
	for _, raw := range list.Owed {
		var o client.Owed
		if err := json.Unmarshal(raw, &o); err != nil {
			var id struct {
				JobID string `json:"jobId"`
			}
			_ = json.Unmarshal(raw, &id)
			skipped = append(skipped, fmt.Errorf("owed tick of %q not read: %w", id.JobID, err))
			continue
		}
		out = append(out, fromWireOwed(o))
	}
	return out, skipped, nil
}

// owedError is the error of an answer of POST /owed other than 200.
func owedError(resp *http.Response, body []byte) error {
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		// POST /owed never answers 404 (unknown ids are absent from the
		// answer): the route itself is missing.
		return fmt.Errorf("owed: %w", errNoOwedRoute)
	}
	return fmt.Errorf("owed: %w", responseError(resp, body))
}

func fromWireOwed(o client.Owed) leaseapi.Owed {
	owed := leaseapi.Owed{JobID: o.JobId, Tick: o.Tick, Reason: leaseapi.Trigger(o.Reason)}
	if o.TriggeredBy != nil {
		owed.TriggeredBy = *o.TriggeredBy
	}
	if o.TriggerReason != nil {
		owed.TriggerReason = *o.TriggerReason
	}
	return owed
}
