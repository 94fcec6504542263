package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// requestError is a refusal decided by the handlers themselves (bad input,
// authentication, media type, size, routing). Its detail is safe to show:
// it says what to change.
type requestError struct {
	status int
	code   string
	detail string
	// header is set on the response (WWW-Authenticate, Allow).
	header http.Header
}

func (e *requestError) Error() string { return e.code + ": " + e.detail }

// invalidf is a 400 invalid_request whose detail names the field and what
// to change.
func invalidf(format string, args ...any) error {
	return &requestError{status: http.StatusBadRequest, code: api.CodeInvalidRequest, detail: fmt.Sprintf(format, args...)}
}

// clip shortens s for echoing it in a problem detail.
func clip(s string) string {
	const maxLen = 40
	if len(s) > maxLen {
		return s[:maxLen] + "…"
	}
	return s
}

// titles are the fixed titles of the problem codes.
var titles = map[string]string{
	api.CodeInvalidRequest:         "Invalid request",
	api.CodeUnauthorized:           "Unauthorized",
	api.CodeForbidden:              "Forbidden",
	api.CodeNotFound:               "Not found",
	api.CodeMethodNotAllowed:       "Method not allowed",
	api.CodeLeaseHeld:              "Lease held",
	api.CodeTickDone:               "Tick already done",
	api.CodeJobPaused:              "Job paused",
	api.CodeTickAhead:              "Tick ahead of the clock",
	api.CodeLeaseLost:              "Lease lost",
	api.CodePayloadTooLarge:        "Payload too large",
	api.CodeUnsupportedMediaType:   "Unsupported media type",
	api.CodeInternal:               "Internal server error",
	api.CodeUnavailable:            "Service unavailable",
	api.CodeOverloaded:             "Overloaded",
	api.CodeRateLimited:            "Rate limited",
	api.CodeCredentialExists:       "Credential exists",
	api.CodeWebhookExists:          "Webhook exists",
	api.CodeIdempotencyKeyReused:   "Idempotency-Key reused",
	api.CodeIdempotencyKeyInFlight: "Idempotency-Key in flight",
	api.CodeGroupFull:              "Group full",
	api.CodeGroupInUse:             "Group in use",
	api.CodePolicyNotFound:         "Policy not found",
	api.CodeTooSoon:                "Too soon",
	api.CodeFeatureDisabled:        "Feature disabled",
}

// writeProblem is the only place that maps errors to responses. It maps
// with errors.Is and errors.As only, so wrapped errors map like their cause.
func writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	p, retry, header := problemOf(r, err)
	for k, vs := range header {
		w.Header()[k] = vs
	}
	buf := responseBuffers.Get().(*[]byte)
	defer responseBuffers.Put(buf)
	body := p.AppendJSON((*buf)[:0])
	*buf = body
	fields := []string{
		"Content-Type", api.ProblemContentType,
		"Content-Length", strconv.Itoa(len(body)),
		"X-Content-Type-Options", "nosniff",
		"Retry-After", retry,
	}
	if retry == "" {
		fields = fields[:6]
	}
	setHeader(w.Header(), fields...)
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// problemOf is the problem err is answered with, its Retry-After ("" for
// none) and any other header fields it sets.
func problemOf(r *http.Request, err error) (p api.Problem, retry string, header http.Header) {
	reqErr, isReqErr := errors.AsType[*requestError](err)
	conflict, isConflict := errors.AsType[*leaseapi.ConflictError](err)
	refused, isRefused := errors.AsType[*leaseapi.RefusedError](err)
	ahead, isAhead := errors.AsType[*leaseapi.TickAheadError](err)
	full, isFull := errors.AsType[*leaseapi.GroupFullError](err)
	inUse, isInUse := errors.AsType[*leaseapi.GroupInUseError](err)
	soon, isSoon := errors.AsType[*leaseapi.TooSoonError](err)
	disabled, isDisabled := errors.AsType[*leaseapi.FeatureDisabledError](err)
	switch {
	case isReqErr:
		p.Status, p.Code, p.Detail = reqErr.status, reqErr.code, reqErr.detail
		header = reqErr.header
	case errors.Is(err, leaseapi.ErrInvalid):
		// The handlers validate every request first; a store that refuses
		// input anyway refused it for its domain rule, which is a 400 too.
		p.Status, p.Code = http.StatusBadRequest, api.CodeInvalidRequest
		p.Detail = err.Error()
		if inv, ok := errors.AsType[*leaseapi.InvalidError](err); ok {
			p.Detail = inv.Field + " " + inv.Rule
		}
	case isDisabled:
		// It names the field, the release that brings it and what the
		// operator does.
		p.Status, p.Code = http.StatusBadRequest, api.CodeFeatureDisabled
		p.Detail = disabled.Error()
	case errors.Is(err, leaseapi.ErrCredentialNotFound):
		p.Status, p.Code = http.StatusNotFound, api.CodeNotFound
		p.Detail = "no credential with this id exists within your scopes; GET /credentials lists them"
	case errors.Is(err, leaseapi.ErrWebhookNotFound):
		p.Status, p.Code = http.StatusNotFound, api.CodeNotFound
		p.Detail = "no webhook with this id exists within your scopes; GET /webhooks lists them"
	case errors.Is(err, leaseapi.ErrCredentialExists):
		p.Status, p.Code = http.StatusConflict, api.CodeCredentialExists
		p.Detail = "a credential of this name and these scopes exists; choose another name or revoke that one first"
	case errors.Is(err, leaseapi.ErrWebhookExists):
		p.Status, p.Code = http.StatusConflict, api.CodeWebhookExists
		p.Detail = "a webhook of this name and these scopes exists; choose another name or delete that one first"
	case errors.Is(err, leaseapi.ErrIdempotencyKeyReused):
		p.Status, p.Code = http.StatusUnprocessableEntity, api.CodeIdempotencyKeyReused
		p.Detail = "this Idempotency-Key was sent with another job or request body within 24 hours; send a fresh key for a new request"
	case errors.Is(err, leaseapi.ErrIdempotencyKeyInFlight):
		p.Status, p.Code = http.StatusConflict, api.CodeIdempotencyKeyInFlight
		p.Detail = "the first request with this Idempotency-Key is still being answered; retry this one in a moment"
	case errors.Is(err, leaseapi.ErrPolicyNotFound):
		p.Status, p.Code = http.StatusNotFound, api.CodePolicyNotFound
		p.Detail = "this job has no alert policy; PUT /leases/{jobId}/policy sets one"
	case errors.Is(err, leaseapi.ErrNotFound):
		p.Status, p.Code = http.StatusNotFound, api.CodeNotFound
		p.Detail = "no lease exists for this job id; acquire it first"
	case isConflict && errors.Is(err, leaseapi.ErrLeaseHeld):
		p.Status, p.Code = http.StatusConflict, api.CodeLeaseHeld
		// The owner is clipped: the full one is in lease.owner, and a problem
		// stays within 1 KiB even for the longest job id and owner.
		p.Detail = "the lease is held by " + clip(conflict.Lease.Owner) + " for another run; retry after Retry-After seconds"
		retry = strconv.Itoa(retryAfter(conflict.Lease, time.Now()))
	case isConflict && isSoon:
		p.Status, p.Code = http.StatusConflict, api.CodeTooSoon
		p.Detail = fmt.Sprintf("the job's previous grant started at %s, less than minIntervalMs (%d) ago; "+
			"it may be granted again from %s: skip this run, or retry after Retry-After seconds",
			api.FormatTime(conflict.Lease.AcquiredAt), soon.MinInterval.Milliseconds(), api.FormatTime(soon.Until))
		retry = strconv.Itoa(retrySeconds(soon.RetryAfter()))
	case isConflict && errors.Is(err, leaseapi.ErrTickDone):
		p.Status, p.Code = http.StatusConflict, api.CodeTickDone
		p.Detail = "this tick is at or before lastCompletedTick and already ran; skip it"
	case isConflict && errors.Is(err, leaseapi.ErrJobPaused):
		p.Status, p.Code = http.StatusConflict, api.CodeJobPaused
		p.Detail = "the job is paused; skip this tick"
	case isAhead:
		// No Retry-After: asking again soon does not help; the caller's
		// clock, not the lease, is the problem.
		p.Status, p.Code = http.StatusConflict, api.CodeTickAhead
		p.Detail = fmt.Sprintf("tick %s lies %s after the server's clock (now), more than the %s a tick may lie ahead (LEASEAPI_MAX_TICK_AHEAD); "+
			"the caller's clock is fast: skip this tick and fix the clock (NTP)", api.FormatTime(ahead.Tick), ahead.Ahead().Round(time.Second), ahead.MaxAhead)
		if ahead.Manual {
			p.Detail = fmt.Sprintf("the manual tick would be %s, %s after the server's clock (now), more than the %s a tick may lie ahead (LEASEAPI_MAX_TICK_AHEAD), "+
				"because the job's lastCompletedTick or tick lies in the future (a replica with a fast clock ran it); nothing was done: "+
				"an admin's POST /leases/{jobId}/repair (leasectl repair) undoes it",
				api.FormatTime(ahead.Tick), ahead.Ahead().Round(time.Second), ahead.MaxAhead)
		}
		now := api.NewTime(ahead.Now)
		p.Now = &now
		if ahead.Lease != nil {
			l := api.FromLease(*ahead.Lease)
			p.Lease = &l
		}
	case isFull:
		p.Status, p.Code = http.StatusConflict, api.CodeGroupFull
		p.Detail = fmt.Sprintf("every slot of group %s is in use (%d held, limit %d); retry after Retry-After seconds, while the tick is within its grace",
			clip(full.Group.Name), full.Group.Held, full.Group.Limit)
		retry = strconv.Itoa(retrySeconds(full.RetryAfter))
		g := api.FromGroup(visibleHolders(r.Context(), full.Group))
		p.Group = &g
		if full.Lease != nil {
			l := api.FromLease(*full.Lease)
			p.Lease = &l
		}
	case isInUse:
		p.Status, p.Code = http.StatusConflict, api.CodeGroupInUse
		p.Detail = fmt.Sprintf("job %s is still in group %s; take it out first (DELETE /leases/{jobId}/group, or an acquire with \"group\": \"\"), then delete the group",
			clip(inUse.JobID), clip(inUse.Group))
	case isConflict && errors.Is(err, leaseapi.ErrLeaseLost):
		p.Status, p.Code = http.StatusConflict, api.CodeLeaseLost
		p.Detail = "owner and token do not match a live grant (another owner, an older token, expired, released or revoked); stop the run and acquire again"
	case errors.Is(err, leaseapi.ErrOverloaded):
		// Load shedding: expected under overload, so not logged per request
		// (the access log and leaseapi_http_requests_total show it).
		p.Status, p.Code = http.StatusServiceUnavailable, api.CodeOverloaded
		p.Detail = "this instance has too many requests in flight and did nothing; retry after Retry-After seconds"
		retry = "1"
	case isRefused:
		p.Status, p.Code = http.StatusServiceUnavailable, api.CodeUnavailable
		p.Detail = "the store refuses every call until this changes: " + refused.Reason + "; nothing was done, retry after Retry-After seconds"
		retry = "1"
		loggerFrom(r.Context()).Warn("store refuses calls", "error", err)
	case errors.Is(err, leaseapi.ErrUnavailable),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled):
		p.Status, p.Code = http.StatusServiceUnavailable, api.CodeUnavailable
		p.Detail = "the store did not answer in time; the outcome of a write is unknown, retrying it is safe"
		retry = "1"
		loggerFrom(r.Context()).Warn("store unavailable", "error", err)
	default:
		p.Status, p.Code = http.StatusInternalServerError, api.CodeInternal
		p.Detail = "internal server error; the request id identifies it in the server log"
		loggerFrom(r.Context()).Error("internal error", "error", err)
	}
	if isConflict && p.Status == http.StatusConflict {
		l := api.FromLease(conflict.Lease)
		p.Lease = &l
	}
	p.Type = problemTypes[p.Code]
	if p.Type == "" {
		p.Type = api.ProblemTypePrefix + p.Code
	}
	p.Title = titles[p.Code]
	return p, retry, header
}

// problemTypes are the type URIs of the problem codes.
var problemTypes = func() map[string]string {
	m := make(map[string]string, len(titles))
	for code := range titles {
		m[code] = api.ProblemTypePrefix + code
	}
	return m
}()

// responseBuffers hold the bodies of the lease calls' answers and problems
// while they are written (a ResponseWriter keeps nothing of what it is
// given to write).
var responseBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// setHeader sets the header fields of pairs (a canonical name, then its
// value) as Header.Set would, with one allocation for all their values
// instead of one each.
func setHeader(h http.Header, pairs ...string) {
	values := make([]string, len(pairs)/2)
	for i := range values {
		values[i] = pairs[2*i+1]
		h[pairs[2*i]] = values[i : i+1 : i+1]
	}
}

// retryAfter is the whole seconds until l expires as seen from now (at
// least 1). The service's clock may differ from the store's, so the hint is
// capped at the lease's TTL, which the remaining time can never exceed.
func retryAfter(l leaseapi.Lease, now time.Time) int {
	remaining := l.ExpiresAt.Sub(now)
	if l.TTL > 0 && remaining > l.TTL {
		remaining = l.TTL
	}
	secs := math.Ceil(remaining.Seconds())
	if secs < 1 {
		return 1
	}
	return int(secs)
}

// retrySeconds is d in whole seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) int {
	secs := math.Ceil(d.Seconds())
	if secs < 1 {
		return 1
	}
	return int(min(secs, math.MaxInt32))
}

// jsonAppender is a response that encodes itself without reflection
// (api.Lease, the answer of every lease call).
type jsonAppender interface {
	AppendJSON(b []byte) []byte
}

// writeJSON writes v as a 200 application/json response.
func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	if a, ok := v.(jsonAppender); ok {
		buf := responseBuffers.Get().(*[]byte)
		defer responseBuffers.Put(buf)
		*buf = a.AppendJSON((*buf)[:0])
		writeBody(w, *buf)
		return
	}
	writeJSONStatus(w, r, http.StatusOK, v)
}

// writeJSONStatus writes v as an application/json response of status.
func writeJSONStatus(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	writeBodyStatus(w, status, body)
}

// writeBody writes body as a 200 application/json response.
func writeBody(w http.ResponseWriter, body []byte) { writeBodyStatus(w, http.StatusOK, body) }

func writeBodyStatus(w http.ResponseWriter, status int, body []byte) {
	setHeader(w.Header(), "Content-Type", "application/json", "Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
