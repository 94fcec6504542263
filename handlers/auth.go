package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
)

type role int

const (
	roleNone role = iota
	roleAPI
	roleAdmin
)

// authenticator checks bearer tokens in constant time. Tokens are compared
// as SHA-256 digests, so neither a token's length nor how many of its bytes
// match leaks through timing, and every configured token is compared on
// every check.
type authenticator struct {
	api, admin [][sha256.Size]byte
}

func newAuthenticator(apiTokens, adminTokens []string) authenticator {
	var a authenticator
	for _, t := range apiTokens {
		if t != "" {
			a.api = append(a.api, sha256.Sum256([]byte(t)))
		}
	}
	for _, t := range adminTokens {
		if t != "" {
			a.admin = append(a.admin, sha256.Sum256([]byte(t)))
		}
	}
	return a
}

// enabled reports whether tokens are configured at all.
func (a authenticator) enabled() bool {
	return len(a.api) > 0 || len(a.admin) > 0
}

// check returns the role of token: roleAdmin for an admin token (which is
// also an API token), roleAPI for an API token, else roleNone.
func (a authenticator) check(token string) role {
	sum := sha256.Sum256([]byte(token))
	var isAPI, isAdmin int
	for _, t := range a.api {
		isAPI |= subtle.ConstantTimeCompare(sum[:], t[:])
	}
	for _, t := range a.admin {
		isAdmin |= subtle.ConstantTimeCompare(sum[:], t[:])
	}
	switch {
	case isAdmin == 1:
		return roleAdmin
	case isAPI == 1:
		return roleAPI
	}
	return roleNone
}
