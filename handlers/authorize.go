package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// permission is what a route of the API needs from its caller.
type permission struct {
	// role is the least role that may call the route.
	role leaseapi.Role
	// always: a credential is needed even in open mode (/credentials).
	always bool
	// unlimited: never rate limited (heartbeat and release: limiting them
	// could make a holder lose its lease).
	unlimited bool
	// batch: the request carries items (POST /acquire, POST /heartbeat).
	// Its deadline is BatchTimeout, and unless unlimited the handler
	// spends one call of the rate per item, not one for the request.
	batch bool
}

// apiRoute is one route of the API: what it needs, and its handler.
type apiRoute struct {
	method, pattern string
	perm            permission
	handler         http.HandlerFunc
}

// authorize is the one place every API route passes through. It finds the
// route's permission (a route without one is refused: deny by default),
// authenticates the caller, refuses a role too weak for the route (403),
// refuses a job or a group outside the caller's scopes (403, before any
// lookup: scopes are name prefixes, so the answer says nothing of whether
// the job or group exists), and puts the caller into the request's state, where the lists
// and counts read its scopes.
func (h *handler) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		perm, ok := h.perms[r.Method+" "+routePattern(r)]
		if !ok {
			writeProblem(w, r, fmt.Errorf("route %s %s has no permission", r.Method, routePattern(r)))
			return
		}
		p, err := h.authenticate(r, perm)
		if err != nil {
			writeProblem(w, r, err)
			return
		}
		if !p.open && !perm.unlimited && !perm.batch {
			if wait, limited := h.limits.take("credential:"+p.key(), p.rate); limited {
				writeProblem(w, r, rateLimited(wait))
				return
			}
		}
		st := stateFrom(r.Context())
		if st == nil {
			writeProblem(w, r, fmt.Errorf("route %s %s is not behind requestID", r.Method, routePattern(r)))
			return
		}
		st.principal = p
		if !p.open && !p.role.Allows(perm.role) {
			writeProblem(w, r, &requestError{
				status: http.StatusForbidden, code: api.CodeForbidden,
				detail: fmt.Sprintf("this operation needs a credential of role %s; this one has role %s", perm.role, p.role),
			})
			return
		}
		if id := jobIDParam(r); leaseapi.ValidJobID(id) && !p.inScope(id) {
			writeProblem(w, r, outOfScope(p, "job", id))
			return
		}
		if name := groupNameParam(r); leaseapi.ValidJobID(name) && !p.inScope(name) {
			writeProblem(w, r, outOfScope(p, "group", name))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate returns the caller of r, or the problem to answer.
func (h *handler) authenticate(r *http.Request, perm permission) (*principal, error) {
	token, ok, several := bearerToken(r)
	if several {
		return nil, unauthorized("send one Authorization header, not several", `, error="invalid_request"`)
	}
	snap, err := h.auth.snapshot(r.Context())
	if err != nil {
		return nil, err
	}
	if h.auth.open(snap) {
		if perm.always {
			return nil, unauthorized("managing credentials needs an admin credential; create the first one with leaseapi credentials create", "")
		}
		return openPrincipal, nil
	}
	if !ok {
		return nil, unauthorized("send the header Authorization: Bearer <token>", "")
	}
	p := h.auth.check(snap, token)
	if p == nil {
		// Guessing the secret of a known credential is no faster than its
		// rate, counted apart from its own calls so that a guesser cannot
		// use them up.
		if c := h.auth.named(snap, token); c != nil {
			if wait, limited := h.limits.take("guess:"+c.key(), c.rate); limited {
				return nil, rateLimited(wait)
			}
		}
		return nil, unauthorized("the bearer token is not valid (unknown, revoked or mistyped); send a valid credential's token", `, error="invalid_token"`)
	}
	return p, nil
}

// outOfScope is the 403 of a job (what is "job") or a group outside the
// caller's scopes. It names the scopes (clipped: up to 32 of 128
// characters each), which the caller may know anyway (GET /whoami), and
// nothing about the job or group.
func outOfScope(p *principal, what, name string) error {
	scopes := strings.Join(p.scopes, " ")
	if len(scopes) > 200 {
		scopes = scopes[:200] + "… (GET /whoami lists them all)"
	}
	return &requestError{status: http.StatusForbidden, code: api.CodeForbidden,
		detail: fmt.Sprintf("%s %s lies outside this credential's scopes (%s); use a credential whose scopes cover it", what, clip(name), scopes)}
}

func unauthorized(detail, challengeParams string) error {
	return &requestError{
		status: http.StatusUnauthorized, code: api.CodeUnauthorized, detail: detail,
		header: http.Header{"Www-Authenticate": {`Bearer realm="leaseapi"` + challengeParams}},
	}
}

// scopedPrefixes are the job id prefixes a caller of scopes may read under
// the filter prefix: disjoint, sorted, so that listing them one after the
// other lists the jobs in job id order. None when the filter lies outside
// every scope. Every read across jobs (the lease list, counts) goes
// through it.
func scopedPrefixes(scopes []string, prefix string) []string {
	var out []string
	for _, s := range scopes { // normalized: disjoint and sorted
		switch {
		case s == leaseapi.ScopeAll || strings.HasPrefix(prefix, s):
			return []string{prefix}
		case strings.HasPrefix(s, prefix):
			out = append(out, s)
		}
	}
	return out
}

// pageInScope lists one page of up to limit items after the cursor after,
// from the prefixes in turn: list lists up to n items under a prefix after
// the cursor, and whether more follow. It reports whether any item follows
// the page.
func pageInScope[T any](prefixes []string, after string, limit int, list func(prefix string, n int) ([]T, bool, error)) ([]T, bool, error) {
	var items []T
	for _, prefix := range prefixes {
		if after > prefix && !strings.HasPrefix(after, prefix) {
			continue // every item of this prefix sorts before the cursor
		}
		n := limit - len(items)
		full := n == 0
		if full {
			n = 1 // only: does anything follow?
		}
		sub, more, err := list(prefix, n)
		if err != nil {
			return nil, false, err
		}
		if full {
			if len(sub) > 0 {
				return items, true, nil
			}
			continue
		}
		items = append(items, sub...)
		if more {
			return items, true, nil
		}
	}
	return items, false, nil
}

// listInScope lists one page of the leases the caller may see: the store's
// list under each of its scoped prefixes in turn. A cursor is only a job
// id to start after, so a forged one can skip jobs but never lead out of
// scope.
// lastJobID sorts after every other job id: listing after it lists nothing.
var lastJobID = strings.Repeat("z", 128)

func (h *handler) listInScope(ctx context.Context, p *leaseapi.ListParams) (leaseapi.LeasePage, error) {
	prefixes := scopedPrefixes(principalFrom(ctx).scopes, p.Prefix)
	if len(prefixes) == 1 && prefixes[0] == p.Prefix {
		return h.store.List(ctx, p)
	}
	var page leaseapi.LeasePage
	var err error
	page.Leases, page.More, err = pageInScope(prefixes, p.After, p.Limit, func(prefix string, limit int) ([]leaseapi.Lease, bool, error) {
		q := *p
		q.Prefix, q.Limit = prefix, limit
		sub, err := h.store.List(ctx, &q)
		if page.Now.IsZero() {
			page.Now = sub.Now
		}
		return sub.Leases, sub.More, err
	})
	if err != nil {
		return leaseapi.LeasePage{}, err
	}
	if page.Now.IsZero() { // no prefix in scope: an empty page, at the store's clock
		empty := *p
		empty.Limit, empty.Prefix, empty.After = 1, "", lastJobID
		sub, err := h.store.List(ctx, &empty)
		if err != nil {
			return leaseapi.LeasePage{}, err
		}
		page.Now = sub.Now
	}
	if page.Leases == nil {
		page.Leases = []leaseapi.Lease{}
	}
	return page, nil
}
