package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/internal/testca"
)

// TestCustomCA: leasectl reaches a leaseapi that serves https with a
// certificate of a private CA when --cacert or LEASEAPI_CA_FILE names the
// CA, and refuses it when nothing does.
func TestCustomCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testca.New(t, "leasectl test CA")
	certPEM, keyPEM := ca.Issue(t, "leaseapi")
	caFile := testca.WriteFile(t, dir, "ca.crt", ca.PEM)
	tlsClient := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}},
		Timeout:   5 * time.Second,
	}
	api, url, err := startLeaseapi(dir, tlsClient,
		"LEASEAPI_TLS_CERT_FILE="+testca.WriteFile(t, dir, "tls.crt", certPEM),
		"LEASEAPI_TLS_KEY_FILE="+testca.WriteFile(t, dir, "tls.key", keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = api.Process.Kill()
		_ = api.Wait()
	})

	job := fmt.Sprintf("tls-%d", time.Now().UnixNano())
	env := []string{"LEASEAPI_URL=" + url, "LEASEAPI_TOKEN=" + userToken}
	run := func(t *testing.T, env []string, args ...string) (int, string) {
		t.Helper()
		p := startEnv(t, env, args...)
		code := p.wait(t)
		return code, p.stdout.String() + p.stderr.String()
	}

	t.Run("Flag", func(t *testing.T) {
		if code, out := run(t, env, "run", "--cacert", caFile, job, "--", "true"); code != 0 {
			t.Fatalf("leasectl run --cacert = %d, want 0:\n%s", code, out)
		}
	})
	t.Run("Environment", func(t *testing.T) {
		code, out := run(t, append(env, "LEASEAPI_CA_FILE="+caFile), "get", job)
		if code != 0 || !strings.Contains(out, "released") {
			t.Fatalf("LEASEAPI_CA_FILE leasectl get = %d, want 0 and the released lease:\n%s", code, out)
		}
	})
	t.Run("UnknownAuthority", func(t *testing.T) {
		code, out := run(t, append(env, "LEASEAPI_CA_FILE="), "get", job)
		if code == 0 || !strings.Contains(out, "certificate signed by unknown authority") {
			t.Fatalf("leasectl get without the CA = %d, want a failure naming the unknown authority:\n%s", code, out)
		}
	})
	t.Run("MissingCAFile", func(t *testing.T) {
		missing := filepath.Join(dir, "missing.crt")
		code, out := run(t, env, "get", "--cacert", missing, job)
		if code != exitUsage || !strings.Contains(out, "--cacert: read CA file: open "+missing) {
			t.Fatalf("leasectl get --cacert %s = %d, want %d naming the file:\n%s", missing, code, exitUsage, out)
		}
	})
	t.Run("NotPEM", func(t *testing.T) {
		notPEM := testca.WriteFile(t, dir, "not.pem", []byte("not a certificate\n"))
		code, out := run(t, env, "get", "--cacert", notPEM, job)
		if code != exitUsage || !strings.Contains(out, "no PEM certificate") {
			t.Fatalf("leasectl get --cacert %s = %d, want %d:\n%s", notPEM, code, exitUsage, out)
		}
	})
}
