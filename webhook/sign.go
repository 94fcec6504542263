package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every webhook secret, as the Standard Webhooks
// specification names it; the rest is the base64 of the key bytes.
const SecretPrefix = "whsec_"

// IDPrefix starts every webhook id.
const IDPrefix = "wh_"

// secretBytes is the length of a generated key.
const secretBytes = 24

// Header names of a delivery (Standard Webhooks).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// ErrBadSecret reports a secret that is not "whsec_" followed by base64.
var ErrBadSecret = errors.New("webhook: secret is not whsec_ followed by base64")

// ErrBadSignature reports a signature header none of whose v1 signatures
// matches the message.
var ErrBadSignature = errors.New("webhook: no matching v1 signature")

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewID returns "wh_" followed by 12 random characters of [a-z0-9].
func NewID() (string, error) {
	const n = 12
	b := make([]byte, n)
	out := make([]byte, 0, len(IDPrefix)+n)
	out = append(out, IDPrefix...)
	// Rejection sampling: 252 is the largest multiple of 36 below 256, so
	// every character is equally likely.
	for len(out) < cap(out) {
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("webhook id: %w", err)
		}
		for _, c := range b {
			if c < 252 && len(out) < cap(out) {
				out = append(out, idAlphabet[int(c)%len(idAlphabet)])
			}
		}
	}
	return string(out), nil
}

// NewSecret returns "whsec_" followed by the base64 of 24 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// The bounds of a secret a webhook's creator chooses, in key bytes (the
// Standard Webhooks specification's).
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// SecretRule is the rule of a chosen secret, as a problem says it.
const SecretRule = "must be whsec_ followed by the base64 of 24 to 64 bytes, such as a secret leaseapi generated"

// CheckSecret returns ErrBadSecret unless secret is "whsec_" followed by
// the standard base64 of MinSecretBytes to MaxSecretBytes bytes.
func CheckSecret(secret string) error {
	key, err := secretKey(secret)
	if err != nil || len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return ErrBadSecret
	}
	return nil
}

// Digest is the hex HMAC-SHA256 of url keyed by secret, both exactly as
// given at creation (the whole "whsec_…" string is the key): a client
// holding the two computes it and compares it with a webhook's digest to
// tell whether the stored webhook has them, while the digest shows
// neither.
func Digest(url, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(url))
	return hex.EncodeToString(m.Sum(nil))
}

// secretKey decodes the key bytes of a secret.
func secretKey(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, ErrBadSecret
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(key) == 0 {
		return nil, ErrBadSecret
	}
	return key, nil
}

// Sign returns the webhook-signature header value of a message: "v1," and
// the base64 of HMAC-SHA256 over "<id>.<timestamp>.<body>", keyed with the
// secret's decoded bytes.
func Sign(secret, id string, timestamp time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp.Unix(), body)), nil
}

func mac(key []byte, id string, unix int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(strconv.FormatInt(unix, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks the headers of a received message as a receiver does: the
// signature header is a space-separated list of "v1,<base64>" of which one
// must match. It does not judge the timestamp's age; a receiver should
// refuse one too far from its clock to stop replays.
func Verify(secret, id, timestamp, signature string, body []byte) error {
	key, err := secretKey(secret)
	if err != nil {
		return err
	}
	unix, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: timestamp %q: %w", timestamp, err)
	}
	want := mac(key, id, unix, body)
	for _, sig := range strings.Fields(signature) {
		enc, ok := strings.CutPrefix(sig, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrBadSignature
}
