package handlers

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/leaseapi/leaseapi"
)

// query returns r's query parameters after checking that each is one of
// allowed and given at most once.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	if r.URL.RawQuery == "" {
		return nil, nil // no parameters (the lease calls): nothing to parse
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalidf("the query string is malformed; escape it as application/x-www-form-urlencoded")
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(allowed, k):
			if len(allowed) == 0 {
				return nil, invalidf("query parameter %q is unknown; this operation takes none", clip(k))
			}
			return nil, invalidf("query parameter %q is unknown; the parameters are %s", clip(k), strings.Join(allowed, ", "))
		case len(q[k]) > 1:
			return nil, invalidf("query parameter %q is given %d times; give it once", k, len(q[k]))
		}
	}
	return q, nil
}

// parseLimit parses the limit parameter: 1 to 1000, def when absent.
func parseLimit(q url.Values, def int) (int, error) {
	if !q.Has("limit") {
		return def, nil
	}
	s := q.Get("limit")
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1000 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, invalidf("limit must be an integer from 1 to 1000 (default %d)", def)
	}
	return n, nil
}

// listParams validates the query of GET /leases.
func listParams(_ http.ResponseWriter, r *http.Request) (*leaseapi.ListParams, error) {
	q, err := query(r, "state", "owner", "prefix", "paused", "overdue", "alerting", "limit", "cursor")
	if err != nil {
		return nil, err
	}
	p := &leaseapi.ListParams{}
	if p.Paused, err = parseBool(q, "paused"); err != nil {
		return nil, err
	}
	if p.Overdue, err = parseBool(q, "overdue"); err != nil {
		return nil, err
	}
	if p.Alerting, err = parseBool(q, "alerting"); err != nil {
		return nil, err
	}
	// A filter given empty is a mistake, not "every": the domain reads the
	// empty state and owner as no filter.
	for _, name := range []string{"state", "owner"} {
		if q.Has(name) && q.Get(name) == "" {
			return nil, invalidf("%s must not be empty; leave it out for every lease", name)
		}
	}
	p.State = leaseapi.State(q.Get("state"))
	p.Owner = q.Get("owner")
	p.Prefix = q.Get("prefix")
	if q.Has("cursor") {
		after, err := decodeCursor(q.Get("cursor"))
		if err != nil {
			return nil, err
		}
		p.After = after
	}
	limit, err := parseLimit(q, 100)
	if err != nil {
		return nil, err
	}
	p.Limit = limit
	return p, p.Validate()
}

// runsQuery is the validated input of GET /leases/{jobId}/runs.
type runsQuery struct {
	jobID string
	limit int
}

func runsParams(_ http.ResponseWriter, r *http.Request) (runsQuery, error) {
	id := jobID(r)
	if err := leaseapi.ValidateJobID(id); err != nil {
		return runsQuery{}, err
	}
	q, err := query(r, "limit")
	if err != nil {
		return runsQuery{}, err
	}
	limit, err := parseLimit(q, 50)
	if err != nil {
		return runsQuery{}, err
	}
	return runsQuery{jobID: id, limit: limit}, nil
}

// parseBool parses an optional boolean parameter: true, false, or absent
// (nil).
func parseBool(q url.Values, name string) (*bool, error) {
	if !q.Has(name) {
		return nil, nil
	}
	switch q.Get(name) {
	case "true":
		return new(true), nil
	case "false":
		return new(false), nil
	}
	return nil, invalidf("%s must be true or false (or left out for every job)", name)
}

// recentRunsParams validates the query of GET /runs.
func recentRunsParams(_ http.ResponseWriter, r *http.Request) (*leaseapi.RecentRunsParams, error) {
	q, err := query(r, "outcome", "limit", "cursor")
	if err != nil {
		return nil, err
	}
	p := &leaseapi.RecentRunsParams{}
	if s := q.Get("outcome"); s != "" {
		for o := range strings.SplitSeq(s, ",") {
			outcome := leaseapi.Outcome(o)
			if !outcome.Valid() {
				return nil, invalidf("outcome must be a comma-separated list of running, succeeded, failed, expired, revoked, missed, discarded (or left out for all); %q is none of them", clip(o))
			}
			if slices.Contains(p.Outcomes, outcome) {
				return nil, invalidf("outcome names %s twice; name each outcome once", outcome)
			}
			p.Outcomes = append(p.Outcomes, outcome)
		}
	}
	if q.Has("cursor") {
		if p.After, err = decodeRunCursor(q.Get("cursor")); err != nil {
			return nil, err
		}
	}
	if p.Limit, err = parseLimit(q, 50); err != nil {
		return nil, err
	}
	return p, nil
}
