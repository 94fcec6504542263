package webhook_test

import (
	"encoding/base64"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/webhook"
)

// The test vector of the Standard Webhooks reference libraries.
func TestSignStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		body   = `{"test": 2432232314}`
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	got, err := webhook.Sign(secret, id, time.Unix(1614265330, 0), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	if err := webhook.Verify(secret, id, "1614265330", "v1,bm90IGl0 "+want, []byte(body)); err != nil {
		t.Fatalf("Verify of the vector among two signatures: %v", err)
	}
	for name, tc := range map[string][4]string{
		"other body":      {secret, id, "1614265330", body + " "},
		"other id":        {secret, id + "x", "1614265330", body},
		"other timestamp": {secret, id, "1614265331", body},
		"other secret":    {"whsec_" + base64.StdEncoding.EncodeToString([]byte("another key")), id, "1614265330", body},
	} {
		if err := webhook.Verify(tc[0], tc[1], tc[2], want, []byte(tc[3])); !errors.Is(err, webhook.ErrBadSignature) {
			t.Errorf("%s: Verify = %v, want ErrBadSignature", name, err)
		}
	}
}

func TestSignRefusesBadSecrets(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_not base64!"} {
		if _, err := webhook.Sign(s, "id", time.Unix(1, 0), nil); !errors.Is(err, webhook.ErrBadSecret) {
			t.Errorf("Sign(secret %q) = %v, want ErrBadSecret", s, err)
		}
	}
}

// An independent implementation (Python's hmac) agrees on fresh secrets.
func TestSignAgreesWithPython(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		if testing.Short() {
			t.Skip("python3 not on PATH; skipped with -short")
		}
		t.Fatal("python3 not on PATH: install it (apt-get install python3); the signature is checked against Python's hmac")
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Now()
	body := `{"type":"run.failed","data":{"jobId":"team-a:nightly"}}`
	got, err := webhook.Sign(secret, "evt_1", ts, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	script := `import sys,hmac,hashlib,base64
k=base64.b64decode(sys.argv[1].split("_",1)[1])
m=(sys.argv[2]+"."+sys.argv[3]+".").encode()+sys.argv[4].encode()
print("v1,"+base64.b64encode(hmac.new(k,m,hashlib.sha256).digest()).decode())`
	out, err := exec.Command(py, "-c", script, secret, "evt_1", strconv.FormatInt(ts.Unix(), 10), body).Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	if want := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("Sign = %s, python3 = %s", got, want)
	}
}

func TestNewIDAndSecret(t *testing.T) {
	t.Parallel()
	idRe := regexp.MustCompile(`^wh_[a-z0-9]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		id, err := webhook.NewID()
		if err != nil {
			t.Fatal(err)
		}
		if !idRe.MatchString(id) || seen[id] {
			t.Fatalf("NewID = %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
		s, err := webhook.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if !strings.HasPrefix(s, "whsec_") || err != nil || len(key) != 24 {
			t.Fatalf("NewSecret = %q: %v, %d bytes", s, err, len(key))
		}
	}
}
