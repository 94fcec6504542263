package jobs_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/internal/testca"
	"github.com/leaseapi/leaseapi/jobs"
)

// TestRunOverTLSWithCustomCA: a runner whose client trusts a private CA
// (client.WithCAFile) runs a job against a leaseapi serving https with a
// certificate of that CA, over HTTP/2; a client without the CA is refused.
func TestRunOverTLSWithCustomCA(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ca := testca.New(t, "jobs test CA")
	certPEM, keyPEM := ca.Issue(t, "leaseapi")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var plain, overTLS atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && r.ProtoMajor == 2 {
			overTLS.Add(1)
		} else {
			plain.Add(1)
		}
		b.faults.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)

	caFile := testca.WriteFile(t, t.TempDir(), "ca.crt", ca.PEM)
	c, err := client.NewClientWithResponses(srv.URL,
		client.WithHTTPClient(&http.Client{Timeout: waitTimeout}), client.WithCAFile(caFile))
	if err != nil {
		t.Fatal(err)
	}
	r := b.runner(t, "replica-tls", clockwork.NewFakeClockAt(epoch), func(cfg *jobs.Config) { cfg.Client = c })
	rep, err := r.Run(context.Background(), "over-tls", epoch.Truncate(time.Minute), func(context.Context) error { return nil })
	if err != nil || rep.Result != jobs.ResultSucceeded {
		t.Fatalf("Run over TLS: report %+v, error %v; want succeeded", rep, err)
	}
	if overTLS.Load() < 2 || plain.Load() != 0 {
		t.Errorf("requests: %d over TLS with HTTP/2, %d otherwise; want the acquire and the release over TLS with HTTP/2, none otherwise", overTLS.Load(), plain.Load())
	}

	untrusting, err := client.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusting.GetLeaseWithResponse(context.Background(), "over-tls"); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("a client without the CA: error %v, want certificate signed by unknown authority", err)
	}
}
