package leaseapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Role is what a credential may do. Each role includes the ones before it.
type Role string

// The roles of a credential.
const (
	// RoleRead: read leases, runs, stats and whoami.
	RoleRead Role = "read"
	// RoleLease: read, and acquire, heartbeat and release.
	RoleLease Role = "lease"
	// RoleAdmin: lease, and revoke, pause, resume, forget a schedule and
	// manage credentials.
	RoleAdmin Role = "admin"
)

func (r Role) rank() int {
	switch r {
	case RoleRead:
		return 1
	case RoleLease:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool { return r.rank() > 0 }

// Allows reports whether a credential of role r may do what needs role need.
func (r Role) Allows(need Role) bool { return r.Valid() && r.rank() >= need.rank() }

// ScopeAll is the scope of every job.
const ScopeAll = "*"

// ValidScope reports whether s is a scope: "*", or a job id prefix of 2 to
// 128 characters that ends in ':' or '.', so that a scope names a whole
// segment of job ids ("team-a:" never covers "team-ab:x").
func ValidScope(s string) bool {
	if s == ScopeAll {
		return true
	}
	return len(s) >= 2 && ValidJobID(s) && (strings.HasSuffix(s, ":") || strings.HasSuffix(s, "."))
}

// scopeCovers reports whether scope outer covers every job of scope inner.
func scopeCovers(outer, inner string) bool {
	return outer == ScopeAll || inner != ScopeAll && strings.HasPrefix(inner, outer)
}

// InScope reports whether jobID lies within one of scopes.
func InScope(scopes []string, jobID string) bool {
	for _, s := range scopes {
		if s == ScopeAll || strings.HasPrefix(jobID, s) {
			return true
		}
	}
	return false
}

// ScopesWithin reports whether every scope of inner lies within one of outer.
func ScopesWithin(inner, outer []string) bool {
	for _, in := range inner {
		if !slices.ContainsFunc(outer, func(out string) bool { return scopeCovers(out, in) }) {
			return false
		}
	}
	return true
}

// NormalizeScopes returns scopes sorted, without duplicates and without the
// scopes another one covers: disjoint prefixes, whose jobs are contiguous
// ranges in job id order, or just "*".
func NormalizeScopes(scopes []string) []string {
	out := slices.Sorted(slices.Values(scopes))
	out = slices.Compact(out)
	return slices.DeleteFunc(out, func(s string) bool {
		return slices.ContainsFunc(out, func(o string) bool { return o != s && scopeCovers(o, s) })
	})
}

// Credential is a bearer credential of the API. Its token is
// "<ID>.<secret>"; only the SHA-256 of the secret is kept.
type Credential struct {
	// ID is public: "lk_" and 12 characters of [a-z0-9].
	ID string
	// Name is unique among the credentials of the same scopes only (two
	// teams may each have a "ci"); the audit fields (PausedBy, RevokedBy)
	// and the access log carry it with the id, "name (id)".
	Name   string
	Role   Role
	Scopes []string
	// RatePerSecond limits the credential's acquires and reads per
	// instance; nil takes the server's default, 0 means no limit.
	RatePerSecond *float64
	CreatedAt     time.Time
	// SecretHash is the SHA-256 of the token's secret.
	SecretHash [sha256.Size]byte
}

// The limits of a credential.
const (
	MaxCredentialNameLen = 64
	MaxScopes            = 32
)

// Validate returns an *InvalidError for the first rule c breaks.
func (c *Credential) Validate() error {
	switch {
	case !ValidCredentialID(c.ID):
		return &InvalidError{Field: "id", Rule: "must be lk_ and 12 characters of a-z 0-9"}
	case len(c.Name) > MaxCredentialNameLen || !ValidJobID(c.Name):
		return &InvalidError{Field: "name", Rule: "must be 1 to 64 characters of A-Z a-z 0-9 . _ : -, starting with a letter or digit"}
	case !c.Role.Valid():
		return &InvalidError{Field: "role", Rule: "must be read, lease or admin"}
	case len(c.Scopes) == 0 || len(c.Scopes) > MaxScopes || slices.ContainsFunc(c.Scopes, func(s string) bool { return !ValidScope(s) }):
		return &InvalidError{Field: "scopes", Rule: scopesRule}
	case c.RatePerSecond != nil && (*c.RatePerSecond < 0 || *c.RatePerSecond > 1e6 || math.IsNaN(*c.RatePerSecond)):
		return &InvalidError{Field: "ratePerSecond", Rule: "must be from 0 (no limit) to 1000000"}
	}
	return nil
}

// ValidCredentialID reports whether id is "lk_" and 12 characters of [a-z0-9].
func ValidCredentialID(id string) bool {
	if len(id) != len(credentialIDPrefix)+credentialIDLen || !strings.HasPrefix(id, credentialIDPrefix) {
		return false
	}
	for _, c := range []byte(id[len(credentialIDPrefix):]) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

const (
	credentialIDPrefix = "lk_"
	credentialIDLen    = 12
	idAlphabet         = "abcdefghijklmnopqrstuvwxyz0123456789"
	secretBytes        = 32
)

// NewCredential returns a credential with a fresh id and secret, and its
// token, which is shown once and never stored. The id and the secret come
// from crypto/rand. Validate the result before storing it.
func NewCredential(name string, role Role, scopes []string, rate *float64) (Credential, string) {
	id := make([]byte, credentialIDLen)
	for i := range id {
		id[i] = idAlphabet[randIndex(len(idAlphabet))]
	}
	secret := make([]byte, secretBytes)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails (Go 1.24+)
	c := Credential{
		ID:            credentialIDPrefix + string(id),
		Name:          name,
		Role:          role,
		Scopes:        NormalizeScopes(scopes),
		RatePerSecond: rate,
	}
	secretText := base64.RawURLEncoding.EncodeToString(secret)
	c.SecretHash = HashSecret(secretText)
	return c, c.ID + "." + secretText
}

// randIndex is a uniform random index below n (n <= 256), by rejection.
func randIndex(n int) int {
	limit := 256 - 256%n
	var b [1]byte
	for {
		_, _ = rand.Read(b[:])
		if int(b[0]) < limit {
			return int(b[0]) % n
		}
	}
}

// HashSecret is the stored form of a token's secret.
func HashSecret(secret string) [sha256.Size]byte {
	return sha256.Sum256([]byte(secret))
}

// ParseToken splits a credential token "<id>.<secret>"; ok is false when
// token does not have that shape.
func ParseToken(token string) (id, secret string, ok bool) {
	id, secret, ok = strings.Cut(token, ".")
	if !ok || !ValidCredentialID(id) || secret == "" {
		return "", "", false
	}
	return id, secret, true
}

// ErrCredentialExists: a credential of that id, or of that name and the
// same scopes, exists already (credential_exists).
var ErrCredentialExists = errors.New("credential exists")

// ErrCredentialNotFound: no credential has that id. It wraps ErrNotFound.
var ErrCredentialNotFound = fmt.Errorf("credential %w", ErrNotFound)

// CredentialSet is every credential, and whether the API has ever had one.
type CredentialSet struct {
	Credentials []Credential
	// Closed is true once any credential was ever created: revoking every
	// credential then leaves the API closed, not open.
	Closed bool
}

// CredentialStore keeps the API's credentials in the database, so every
// instance on it sees the same set. Both stores implement it.
type CredentialStore interface {
	// CreateCredential stores c (validated first), sets its CreatedAt and
	// marks the API closed for good; ErrCredentialExists when its id is
	// taken, or its name by a credential of the same scopes.
	CreateCredential(ctx context.Context, c *Credential) error
	// DeleteCredential revokes the credential id; ErrCredentialNotFound
	// when there is none.
	DeleteCredential(ctx context.Context, id string) error
	// Credentials returns every credential, ordered by name, with the
	// closed mark.
	Credentials(ctx context.Context) (CredentialSet, error)
}
