package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/schedule"
)

// The validation of every field a request carries, each against its pattern
// in api/openapi.yaml, with a detail that says what to send instead.

// jobIDParam returns the jobId path segment unescaped: chi gives the raw
// segment, and a client may escape a valid id's characters (JavaScript's
// encodeURIComponent sends "etl%3Anightly" for "etl:nightly"). An escaped
// slash or NUL unescapes to an invalid id, and a malformed escape stays as
// it came, invalid. authorize checks scopes on the same value the handler
// uses, so no spelling of an id reaches past the caller's scopes.
func jobIDParam(r *http.Request) string {
	id := chi.URLParam(r, "jobId")
	if strings.Contains(id, "%") {
		if u, err := url.PathUnescape(id); err == nil {
			return u
		}
	}
	return id
}

// jobID returns the jobId path parameter. Its rule is the domain's: the
// params built from it are validated (Validate), and a store refuses an
// invalid id at its entry, as an *leaseapi.InvalidError (writeProblem).
func jobID(r *http.Request) string { return jobIDParam(r) }

// ttl converts an optional ttlMs to a duration within [minTTL, maxTTL];
// nil gives def.
func (h *handler) ttl(ttlMs *int64, def time.Duration) (time.Duration, error) {
	if ttlMs == nil {
		return def, nil
	}
	minMs, maxMs := h.minTTL.Milliseconds(), h.maxTTL.Milliseconds()
	if *ttlMs < minMs || *ttlMs > maxMs {
		return 0, invalidf("ttlMs must be an integer from %d to %d (milliseconds)", minMs, maxMs)
	}
	return time.Duration(*ttlMs) * time.Millisecond, nil
}

// parseTick parses an optional RFC 3339 tick to UTC, truncated to
// milliseconds as it is stored and shown. The wire format is this
// function's rule; the years a tick may lie in are the domain's
// (AcquireParams.Validate).
func parseTick(s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := api.ParseTime(*s)
	if err != nil {
		return nil, invalidf("tick must be an RFC 3339 time from year 0001 to 9999 in UTC, such as 2026-11-30T07:00:00Z")
	}
	return &t, nil
}

// checkSchedule refuses a schedule of a valid acquire p whose shortest gap
// between two ticks is under the smallest lease this server grants (a job
// cannot run more often than that), and caps p's grace at that gap. A job
// whose stored schedule is that very spec (stored before this rule, or
// before LEASEAPI_MIN_TTL was raised) keeps running: its replicas send it
// with every acquire. Only such a fast spec costs the read of the job.
func (h *handler) checkSchedule(ctx context.Context, p *leaseapi.AcquireParams) error {
	if p.Schedule == "" {
		return nil
	}
	s, err := schedule.Parse(p.Schedule)
	if err != nil {
		return leaseapi.InvalidSchedule(err)
	}
	gap := s.MinGap()
	if gap < h.minTTL {
		stored, err := h.store.Get(ctx, p.JobID)
		if err != nil && !errors.Is(err, leaseapi.ErrNotFound) {
			return err
		}
		if err != nil || stored.Schedule != p.Schedule {
			return &leaseapi.InvalidError{Field: "schedule", Rule: fmt.Sprintf(
				"ticks as often as every %s, but the smallest lease this server grants is %s: a job cannot run more often than its smallest lease; "+
					"send a schedule whose ticks are at least %s apart", gap, h.minTTL, h.minTTL)}
		}
	}
	p.Grace = min(p.Grace, gap)
	return nil
}

// outcomeOrDefault is the release's outcome, succeeded when the request
// names none; Validate checks it.
func outcomeOrDefault(o *leaseapi.Outcome) leaseapi.Outcome {
	if o == nil {
		return leaseapi.OutcomeSucceeded
	}
	return *o
}
