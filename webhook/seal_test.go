package webhook_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi/webhook"
)

func newKey(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

func TestSealerRoundTripAndRefusals(t *testing.T) {
	t.Parallel()
	s, err := webhook.NewSealer(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	const plain = "https://hooks.slack.com/services/T000/B000/XXXX"
	a, err := s.Seal(plain, "wh_abc:url")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Seal(plain, "wh_abc:url")
	if strings.Contains(a, "slack") || a == b {
		t.Fatalf("sealed values leak or repeat: %q, %q", a, b)
	}
	if got, err := s.Open(a, "wh_abc:url"); err != nil || got != plain {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := s.Open(a, "wh_xyz:url"); !errors.Is(err, webhook.ErrSealed) {
		t.Errorf("Open with another row's aad = %v, want ErrSealed", err)
	}
	other, _ := webhook.NewSealer(newKey(t))
	if _, err := other.Open(a, "wh_abc:url"); !errors.Is(err, webhook.ErrSealed) {
		t.Errorf("Open with another key = %v, want ErrSealed", err)
	}
	var none *webhook.Sealer
	if _, err := none.Open(a, "wh_abc:url"); !errors.Is(err, webhook.ErrSealed) {
		t.Errorf("Open without a key = %v, want ErrSealed", err)
	}
	// Values stored before a key was set stay readable.
	if got, err := s.Open(plain, "wh_abc:url"); err != nil || got != plain {
		t.Errorf("Open(plain) = %q, %v", got, err)
	}
	if got, err := none.Seal(plain, "x"); err != nil || got != plain {
		t.Errorf("nil Seal = %q, %v", got, err)
	}
}

func TestNewSealerKeys(t *testing.T) {
	t.Parallel()
	if s, err := webhook.NewSealer(""); s != nil || err != nil {
		t.Errorf("NewSealer(\"\") = %v, %v; want nil, nil", s, err)
	}
	for _, k := range []string{"short", base64.StdEncoding.EncodeToString(make([]byte, 16)), "!!!!"} {
		if _, err := webhook.NewSealer(k); !errors.Is(err, webhook.ErrBadKey) {
			t.Errorf("NewSealer(%q) = %v, want ErrBadKey", k, err)
		}
	}
}
