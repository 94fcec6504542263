package webhook

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// sealedPrefix marks a value encrypted by a Sealer, so that a value stored
// as given (before a key was configured) stays readable.
const sealedPrefix = "aesgcm1:"

// ErrBadKey reports a key that is not the base64 of 32 bytes.
var ErrBadKey = errors.New("webhook: key must be the base64 of 32 bytes")

// ErrSealed reports a sealed value that cannot be opened: no key, another
// key, or damaged data.
var ErrSealed = errors.New("webhook: cannot open an encrypted value (missing or wrong LEASEAPI_WEBHOOK_KEY?)")

// Sealer encrypts webhook secrets and URLs at rest with AES-256-GCM. A nil
// *Sealer stores values as given.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer parses a base64 key of 32 bytes. An empty key returns nil: values
// are stored as given.
func NewSealer(keyB64 string) (*Sealer, error) {
	if keyB64 == "" {
		return nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(keyB64)
	if err != nil || len(key) != 32 {
		return nil, ErrBadKey
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("webhook key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("webhook key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plain with a fresh random nonce; aad binds the value to its
// place (the webhook id and the column), so a sealed secret cannot be
// swapped into another row or field.
func (s *Sealer) Seal(plain, aad string) (string, error) {
	if s == nil {
		return plain, nil
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("webhook seal: %w", err)
	}
	out := s.aead.Seal(nonce, nonce, []byte(plain), []byte(aad))
	return sealedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// Open returns the plain value of a stored one: a sealed value is decrypted
// (ErrSealed without the right key), any other is returned as stored.
func (s *Sealer) Open(stored, aad string) (string, error) {
	enc, sealed := strings.CutPrefix(stored, sealedPrefix)
	if !sealed {
		return stored, nil
	}
	if s == nil {
		return "", ErrSealed
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return "", ErrSealed
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(aad))
	if err != nil {
		return "", ErrSealed
	}
	return string(plain), nil
}

// The fields of a webhook that are sealed.
const (
	FieldURL    = "url"
	FieldSecret = "secret"
)

// AAD is the additional data that binds a sealed field to its webhook, so
// that a sealed value copied to another row or field does not open.
func AAD(webhookID, field string) string { return webhookID + "/" + field }
