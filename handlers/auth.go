package handlers

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leaseapi/leaseapi"
)

// principal is the caller a request was authenticated as.
type principal struct {
	// open: the API is in open mode (no credential was ever created and
	// no token is configured); the caller is anonymous and unrestricted.
	open bool
	// id is the credential's id, "" for a configured token.
	id     string
	name   string
	role   leaseapi.Role
	scopes []string // leaseapi.NormalizeScopes
	// rate is the credential's own rate limit, nil for the default.
	rate *float64
}

// openPrincipal is the caller in open mode.
var openPrincipal = &principal{open: true, role: leaseapi.RoleAdmin, scopes: []string{leaseapi.ScopeAll}}

// key identifies the credential for its rate limit: its id, or for a
// configured token its name.
func (p *principal) key() string {
	if p.id != "" {
		return p.id
	}
	return p.name
}

// audit names the caller in what the store records (pausedBy, revokedBy,
// triggeredBy, createdBy) and in the logs: "name (id)" for a credential of
// the database, whose name is unique only within its scopes; a configured
// token's name; "" in open mode.
func (p *principal) audit() string {
	if p.id != "" {
		return p.name + " (" + p.id + ")"
	}
	return p.name
}

// inScope reports whether the caller may see jobID.
func (p *principal) inScope(jobID string) bool { return leaseapi.InScope(p.scopes, jobID) }

// maxCredentialAge is the oldest set of credentials an instance serves: a
// credential revoked on another instance stops working here within it.
const maxCredentialAge = 5 * time.Second

// DefaultCredentialRefresh is how often an instance rereads the credentials
// of the database: a credential created or revoked on another instance
// takes effect here within that time (and at once on the instance that
// created or revoked it).
const DefaultCredentialRefresh = 2 * time.Second

// authenticator checks bearer tokens in constant time, against the tokens
// configured in the environment and the credentials of the database.
//
// Tokens and secrets are compared as SHA-256 digests with
// subtle.ConstantTimeCompare, so neither their length nor how many of
// their bytes match leaks through timing; every configured token is
// compared on every check, and a credential id that does not exist is
// compared against a dummy digest, so timing does not tell a known id
// either.
type authenticator struct {
	env     []envToken
	store   leaseapi.CredentialStore // nil: configured tokens only
	refresh time.Duration

	reloading chan struct{} // holds a token while one request rereads
	snap      atomic.Pointer[credentialSnapshot]
}

type envToken struct {
	sum [sha256.Size]byte
	p   *principal
}

// noCredentials is the snapshot of an authenticator without a store.
var noCredentials = &credentialSnapshot{}

// credentialSnapshot is the credentials of the database as last read.
type credentialSnapshot struct {
	byID   map[string]credentialEntry
	closed bool
	loaded time.Time
}

type credentialEntry struct {
	sum [sha256.Size]byte
	p   *principal
}

// dummySum is compared when a token names no known credential.
var dummySum = sha256.Sum256([]byte("leaseapi: no such credential"))

// newAuthenticator names the configured tokens by their position
// (api-token-1, admin-token-1, …), never by their value: API tokens are
// unscoped credentials of role lease, admin tokens of role admin.
func newAuthenticator(apiTokens, adminTokens []string, store leaseapi.CredentialStore, refresh time.Duration) *authenticator {
	a := &authenticator{store: store, refresh: refresh, reloading: make(chan struct{}, 1)}
	add := func(tokens []string, kind string, role leaseapi.Role) {
		for i, t := range tokens {
			if t != "" {
				a.env = append(a.env, envToken{sum: sha256.Sum256([]byte(t)), p: &principal{
					name: fmt.Sprintf("%s-token-%d", kind, i+1), role: role, scopes: []string{leaseapi.ScopeAll},
				}})
			}
		}
	}
	// Admin tokens first: a token configured as both is an admin token.
	add(adminTokens, "admin", leaseapi.RoleAdmin)
	add(apiTokens, "api", leaseapi.RoleLease)
	return a
}

// snapshot returns the credentials, rereading them when the last read is
// older than the refresh interval. A failed reread is an error: serving
// an old set could let a revoked credential in.
func (a *authenticator) snapshot(ctx context.Context) (*credentialSnapshot, error) {
	if a.store == nil {
		return noCredentials, nil
	}
	s := a.snap.Load()
	if s != nil && time.Since(s.loaded) < a.refresh {
		return s, nil
	}
	select {
	case a.reloading <- struct{}{}:
	default:
		// Another request is rereading them. Serve the last set while it
		// is within the promise (a revocation takes effect everywhere
		// within maxCredentialAge), else wait for the reread, but never
		// past this request's deadline.
		if s != nil && time.Since(s.loaded) < maxCredentialAge {
			return s, nil
		}
		select {
		case a.reloading <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("read credentials: %w: %w", leaseapi.ErrUnavailable, ctx.Err())
		}
	}
	defer func() { <-a.reloading }()
	if s := a.snap.Load(); s != nil && time.Since(s.loaded) < a.refresh {
		return s, nil // another request reread them meanwhile
	}
	set, err := a.store.Credentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	s = &credentialSnapshot{byID: make(map[string]credentialEntry, len(set.Credentials)), closed: set.Closed, loaded: time.Now()}
	for _, c := range set.Credentials {
		s.byID[c.ID] = credentialEntry{sum: c.SecretHash, p: &principal{
			id: c.ID, name: c.Name, role: c.Role, scopes: leaseapi.NormalizeScopes(c.Scopes), rate: c.RatePerSecond,
		}}
	}
	a.snap.Store(s)
	return s, nil
}

// invalidate makes the next request reread the credentials: this
// instance created or revoked one.
func (a *authenticator) invalidate() { a.snap.Store(nil) }

// open reports whether the API is in open mode: no token configured and no
// credential ever created.
func (a *authenticator) open(s *credentialSnapshot) bool {
	return len(a.env) == 0 && !s.closed && len(s.byID) == 0
}

// check returns the principal of token, or nil.
func (a *authenticator) check(s *credentialSnapshot, token string) *principal {
	sum := sha256.Sum256([]byte(token))
	var found *principal
	for _, e := range a.env {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 && found == nil {
			found = e.p
		}
	}
	id, secret, ok := leaseapi.ParseToken(token)
	e, known := s.byID[id]
	want := dummySum
	if ok && known {
		want = e.sum
	}
	got := leaseapi.HashSecret(secret)
	if subtle.ConstantTimeCompare(got[:], want[:]) == 1 && ok && known && found == nil {
		found = e.p
	}
	return found
}

// named returns the credential whose id token names, whether or not the
// secret is right, or nil.
func (a *authenticator) named(s *credentialSnapshot, token string) *principal {
	id, _, ok := leaseapi.ParseToken(token)
	if !ok {
		return nil
	}
	if e, known := s.byID[id]; known {
		return e.p
	}
	return nil
}

// principalFrom returns the caller of an authorized request.
func principalFrom(ctx context.Context) *principal {
	if s := stateFrom(ctx); s != nil {
		return s.principal
	}
	return nil
}

// bearerToken extracts the token of the one Authorization header
// "Bearer <token>". The scheme is case-insensitive (RFC 9110); the token is
// taken verbatim, so a token with extra spaces does not match.
func bearerToken(r *http.Request) (token string, ok bool, several bool) {
	values := r.Header.Values("Authorization")
	if len(values) > 1 {
		return "", false, true
	}
	if len(values) == 0 {
		return "", false, false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false, false
	}
	return token, true, false
}
