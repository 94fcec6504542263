package webhook_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/leaseapi/leaseapi/webhook"
)

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	refused := []string{
		"127.0.0.1", "127.9.9.9", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"169.254.169.254", "224.0.0.1", "239.255.255.250", "0.0.0.0", "0.1.2.3", "100.64.0.1",
		"100.127.255.255", "198.18.0.1", "198.19.255.255", "240.0.0.1", "255.255.255.255",
		"::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "ff02::1", "fec0::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::808:808",
		"2002:7f00:1::", "2002:a00:1::1", "2002:a9fe:a9fe::", "::a00:1",
		// 6to4 and Teredo are N/A whatever they embed.
		"2002:808:808::", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
		"192.0.2.1", "198.51.100.7", "203.0.113.9", "2001:db8::1", "3fff::1", "5f00::1", "100::1",
		"192.0.0.1", "192.0.0.8", "192.0.0.170", "192.88.99.1", "2001:2::1", "2001:10::1",
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "198.17.255.255", "198.20.0.0",
		"172.32.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808",
		"192.0.0.9", "192.0.0.10", "192.31.196.1", "192.52.193.1", "192.175.48.1",
		"2001:1::1", "2001:3::1", "2001:4:112::1", "2001:20::1", "2001:30::1", "2620:4f:8000::1",
	}
	for _, s := range refused {
		if err := webhook.CheckAddr(netip.MustParseAddr(s)); !errors.Is(err, webhook.ErrForbiddenTarget) {
			t.Errorf("CheckAddr(%s) = %v, want ErrForbiddenTarget", s, err)
		}
	}
	for _, s := range allowed {
		if err := webhook.CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want nil", s, err)
		}
	}
}

// The hook sees the address being dialled, after resolution.
func TestControlHook(t *testing.T) {
	t.Parallel()
	for addr, wantErr := range map[string]bool{
		"127.0.0.1:80": true, "[::1]:443": true, "[fe80::1%lo]:80": true, "10.0.0.1:8080": true,
		"not-an-address": true, "8.8.8.8:443": false, "[2606:4700:4700::1111]:443": false,
	} {
		err := webhook.Control("tcp", addr, nil)
		if got := errors.Is(err, webhook.ErrForbiddenTarget); got != wantErr {
			t.Errorf("Control(%s) = %v, want refused %v", addr, err, wantErr)
		}
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "ftp://example.com/", "file:///etc/passwd", "example.com/hook",
		"http://", "https://user:pw@example.com/", "javascript:alert(1)", "://x"} {
		if err := webhook.CheckURL(u, true); !errors.Is(err, webhook.ErrBadURL) {
			t.Errorf("CheckURL(%q) = %v, want ErrBadURL", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8080/", "https://[::1]/x", "http://169.254.169.254/latest", "http://[64:ff9b::a00:1]/",
		"http://192.0.2.10/", "http://[2001:db8::1]/", "http://[fe80::1%25eth0]/", "http://100.64.0.1/"} {
		if err := webhook.CheckURL(u, false); !errors.Is(err, webhook.ErrForbiddenTarget) {
			t.Errorf("CheckURL(%q) = %v, want ErrForbiddenTarget", u, err)
		}
		if err := webhook.CheckURL(u, true); err != nil {
			t.Errorf("CheckURL(%q, allowPrivate) = %v", u, err)
		}
	}
	for _, u := range []string{"https://hooks.example.com/a?b=c", "http://8.8.8.8/", "https://localhost/"} {
		// A name is checked when dialled, not here.
		if err := webhook.CheckURL(u, false); err != nil {
			t.Errorf("CheckURL(%q) = %v", u, err)
		}
	}
}

// Through a real client: a name that resolves to loopback is refused at
// dial time unless private targets are allowed, and redirects are not
// followed.
func TestClientRefusesLoopbackAndRedirects(t *testing.T) {
	t.Parallel()
	hits := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.URL.Path
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/target", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	url := "http://localhost:" + srv.URL[len("http://127.0.0.1:"):]

	resp, err := webhook.NewClient(false, 0).Post(url+"/hook", "application/json", nil)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("POST %s without allowPrivate: status %d, want a refused dial", url, resp.StatusCode)
	}
	if !errors.Is(err, webhook.ErrForbiddenTarget) {
		t.Fatalf("POST %s: %v, want ErrForbiddenTarget", url, err)
	}
	if len(hits) != 0 {
		t.Fatalf("the receiver was reached: %s", <-hits)
	}

	client := webhook.NewClient(true, 0)
	resp, err = client.Post(url+"/hook", "application/json", nil)
	if err != nil {
		t.Fatalf("POST with allowPrivate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d, want 204", resp.StatusCode)
	}
	resp, err = client.Post(url+"/redirect", "application/json", nil)
	if err != nil {
		t.Fatalf("POST /redirect: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d, want the 302 itself", resp.StatusCode)
	}
	if got := []string{<-hits, <-hits}; got[1] != "/redirect" || len(hits) != 0 {
		t.Fatalf("paths reached %v (+%d more), want /hook then /redirect only", got, len(hits))
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://hooks.slack.com/services/T000/B000/XXXX": "https://hooks.slack.com/…",
		"http://10.0.0.1:8080/hook?token=abc":             "http://10.0.0.1:8080/…",
		"https://example.com":                             "https://example.com/",
		"https://example.com/":                            "https://example.com/",
		"https://example.com/#frag":                       "https://example.com/…",
		"https://[2001:db8::1]:443/x":                     "https://[2001:db8::1]:443/…",
		"::not a url":                                     "…",
	} {
		if got := webhook.Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}
