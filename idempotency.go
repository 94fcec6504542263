package leaseapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"time"
)

// Idempotency-Key (draft-ietf-httpapi-idempotency-key-header): a request
// that carries one is remembered per (credential, key) for IdempotencyTTL
// with a fingerprint of what it asked; the same request again is answered
// as the first was, another request with that key is refused.

// IdempotencyTTL is how long an Idempotency-Key is remembered.
const IdempotencyTTL = 24 * time.Hour

// ErrIdempotencyKeyReused: the key was used for another request
// (idempotency_key_reused, 422).
var ErrIdempotencyKeyReused = errors.New("idempotency key reused for another request")

// ErrIdempotencyKeyInFlight: the first request of the key has not been
// answered yet (idempotency_key_in_flight, 409).
var ErrIdempotencyKeyInFlight = errors.New("idempotency key in flight")

// idempotencyKeyRule is the rule of the header, for InvalidError.
const idempotencyKeyRule = `must be 1 to 256 printable ASCII characters, sent bare (abc) or as a structured-field string ("abc")`

// ParseIdempotencyKey returns the key of an Idempotency-Key header value:
// a structured-field string (RFC 8941 §3.3.3: printable ASCII in double
// quotes, with \" and \\ as the only escapes) or the key itself, bare.
// Either way the key is 1 to MaxIdempotencyKeyLength printable ASCII
// characters; a bare key cannot start with a double quote.
func ParseIdempotencyKey(v string) (string, error) {
	invalid := &InvalidError{Field: "Idempotency-Key", Rule: idempotencyKeyRule}
	key := v
	if strings.HasPrefix(v, `"`) {
		var b strings.Builder
		closed := false
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case closed:
				return "", invalid // anything after the closing quote
			case c == '\\':
				i++
				if i == len(v) || v[i] != '"' && v[i] != '\\' {
					return "", invalid
				}
				b.WriteByte(v[i])
			case c == '"':
				closed = true
			case c < 0x20 || c > 0x7E:
				return "", invalid
			default:
				b.WriteByte(c)
			}
		}
		if !closed {
			return "", invalid
		}
		key = b.String()
	}
	if !validIdempotencyKey(key) {
		return "", invalid
	}
	return key, nil
}

// validIdempotencyKey reports whether key is 1 to MaxIdempotencyKeyLength
// printable ASCII characters.
func validIdempotencyKey(key string) bool {
	if len(key) < 1 || len(key) > MaxIdempotencyKeyLength {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7E {
			return false
		}
	}
	return true
}

// IdempotencyFingerprint is the SHA-256 of a request's route, job id and
// decoded fields (a canonical encoding of them, so that two spellings of
// one request have one fingerprint). The parts are length-prefixed, so no
// two lists of parts share an encoding.
func IdempotencyFingerprint(parts ...string) [sha256.Size]byte {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		for i := range n {
			n[i] = byte(uint64(len(p)) >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// IdempotencyParams claim a key for one request.
type IdempotencyParams struct {
	// Credential is whose key it is: a credential's id, a configured
	// token's name, or "" in open mode.
	Credential string
	// Key is the parsed Idempotency-Key.
	Key         string
	Fingerprint [sha256.Size]byte
	// Hold is how long the request may stay in flight (its deadline): a
	// claim older than that was abandoned (its process died), and the
	// same request again takes it over.
	Hold time.Duration
}

// Validate checks p against the domain.
func (p *IdempotencyParams) Validate() error {
	if !validIdempotencyKey(p.Key) {
		return &InvalidError{Field: "Idempotency-Key", Rule: idempotencyKeyRule}
	}
	if p.Hold < time.Millisecond {
		return &InvalidError{Field: "hold", Rule: "must be at least a millisecond"}
	}
	return nil
}

// IdempotentAnswer is the answer a request of a key got: its status and
// body (JSON).
type IdempotentAnswer struct {
	Status int
	Body   []byte
}

// IdempotencyStore remembers Idempotency-Keys in the database, so that a
// retry reaching another instance is answered alike. Both stores
// implement it.
type IdempotencyStore interface {
	// ClaimIdempotencyKey claims p's key for p's request. nil, nil: the
	// caller holds it; it runs the request, then FinishIdempotencyKey or
	// ReleaseIdempotencyKey. An answer: the same request was answered so
	// already; answer it again. ErrIdempotencyKeyReused when the key
	// (within IdempotencyTTL) was used for another fingerprint,
	// ErrIdempotencyKeyInFlight when the same request holds it now.
	ClaimIdempotencyKey(ctx context.Context, p *IdempotencyParams) (*IdempotentAnswer, error)
	// FinishIdempotencyKey records the answer of the request that holds
	// the key.
	FinishIdempotencyKey(ctx context.Context, p *IdempotencyParams, a IdempotentAnswer) error
	// ReleaseIdempotencyKey forgets the claim of a request that failed,
	// so that a retry runs it again.
	ReleaseIdempotencyKey(ctx context.Context, p *IdempotencyParams) error
	// PruneIdempotencyKeys deletes up to batch keys older than
	// IdempotencyTTL and returns how many it deleted.
	PruneIdempotencyKeys(ctx context.Context, batch int) (int64, error)
}
