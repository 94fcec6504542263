package handlers

import (
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

// jobID returns the validated jobId path parameter.
func jobID(r *http.Request) (string, error) {
	id := jobIDParam(r)
	if !leaseapi.ValidJobID(id) {
		return "", invalidf("jobId in the path must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
	}
	return id, nil
}

func validateOwner(owner string) error {
	if !leaseapi.ValidOwner(owner) {
		return invalidf("owner is required: 1 to 128 printable ASCII characters without spaces (0x21-0x7E)")
	}
	return nil
}

func validateToken(token int64) error {
	if token < 1 {
		return invalidf("token is required: the integer (>= 1) that acquire returned")
	}
	return nil
}

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
// milliseconds as it is stored and shown. Its UTC year must have four
// digits: "0000-01-01T00:00:00+01:00" is RFC 3339 but in UTC it is in year
// -1, which no lease on the wire could show again (api.TimeLayout).
func parseTick(s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := api.ParseTime(*s)
	if err != nil || t.Year() < 0 || t.Year() > 9999 {
		return nil, invalidf("tick must be an RFC 3339 time from year 0000 to 9999 in UTC, such as 2026-11-30T07:00:00Z")
	}
	return &t, nil
}

// scheduleAndGrace validates an acquire's optional schedule and grace and
// returns the effective grace: the requested one (or the configured
// default) capped at the shortest gap between two ticks of the schedule.
func (h *handler) scheduleAndGrace(spec *string, graceMs *int64) (string, time.Duration, error) {
	if spec == nil {
		if graceMs != nil {
			return "", 0, invalidf("graceMs is the grace of a schedule: send it with schedule")
		}
		return "", 0, nil
	}
	s, err := schedule.Parse(*spec)
	if err != nil {
		return "", 0, invalidf("schedule is not a valid cron spec: %s", clip(err.Error()))
	}
	grace := h.missedGrace
	if graceMs != nil {
		if *graceMs < 1 || *graceMs > leaseapi.MaxGrace.Milliseconds() {
			return "", 0, invalidf("graceMs must be an integer from 1 to %d (milliseconds)", leaseapi.MaxGrace.Milliseconds())
		}
		grace = time.Duration(*graceMs) * time.Millisecond
	}
	return *spec, min(grace, s.MinGap()), nil
}

func parseOutcome(o *leaseapi.Outcome) (leaseapi.Outcome, error) {
	if o == nil {
		return leaseapi.OutcomeSucceeded, nil
	}
	if !o.ValidRelease() {
		return "", invalidf("outcome must be succeeded or failed")
	}
	return *o, nil
}
