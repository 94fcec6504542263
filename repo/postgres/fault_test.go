package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// freezeProxy forwards TCP connections to a Postgres server and can stop
// forwarding without closing anything: to the client the server looks
// frozen (as under SIGSTOP), the case in which lib/pq blocks past its
// context while it waits for the answer to its cancel request.
type freezeProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen bool
	thawed chan struct{} // closed when the proxy is thawed
	conns  []net.Conn
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &freezeProxy{ln: ln, target: target, thawed: make(chan struct{})}
	close(p.thawed)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies src to dst, holding every chunk while the proxy is frozen.
func (p *freezeProxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			thawed := p.thawed
			p.mu.Unlock()
			<-thawed
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *freezeProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		p.frozen = true
		p.thawed = make(chan struct{})
	}
}

func (p *freezeProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		p.frozen = false
		close(p.thawed)
	}
}

func (p *freezeProxy) close() {
	p.thaw()
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// proxiedURL returns dsn with its host replaced by addr.
func proxiedURL(t *testing.T, dsn, addr string) (string, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("test database URL %q is not a postgres:// URL with a host", dsn)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	u.Host = addr
	return u.String(), target
}

func TestPostgresFrozenDatabase(t *testing.T) {
	t.Parallel()
	dsn := repotest.PostgresURL(t)
	ctx := context.Background()

	// One proxy per test; its address is only known once it listens.
	_, target := proxiedURL(t, dsn, "127.0.0.1:1")
	proxy := newFreezeProxy(t, target)
	proxied, _ := proxiedURL(t, dsn, proxy.ln.Addr().String())

	store, err := postgres.Open(ctx, postgres.Config{DSN: proxied})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })

	params := &leaseapi.AcquireParams{JobID: "frozen-" + t.Name(), Owner: "replica-a", TTL: time.Minute}
	first, err := store.Acquire(ctx, params)
	if err != nil {
		t.Fatalf("Acquire before the freeze: %v", err)
	}

	proxy.freeze()
	for _, tc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Acquire", func(ctx context.Context) error { _, err := store.Acquire(ctx, params); return err }},
		{"Heartbeat", func(ctx context.Context) error {
			_, err := store.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: params.JobID, Owner: params.Owner, Token: first.Token})
			return err
		}},
		{"Get", func(ctx context.Context) error { _, err := store.Get(ctx, params.JobID); return err }},
		{"Ready", func(ctx context.Context) error { return store.Ready(ctx) }},
	} {
		// The call must come back (the test's own timeout is the bound) and
		// say the database is unavailable, not hang until the server wakes.
		callCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := tc.call(callCtx)
		cancel()
		if !errors.Is(err, leaseapi.ErrUnavailable) {
			t.Errorf("%s on a frozen database: got %v, want an error wrapping ErrUnavailable", tc.name, err)
		}
	}
	proxy.thaw()

	// After the database answers again, the retried acquire is idempotent:
	// the same owner gets the same token back. Connections spoiled by the
	// freeze are discarded, so allow a bounded number of attempts.
	var got leaseapi.Lease
	for attempt := 0; attempt < 50; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		got, err = store.Acquire(callCtx, params)
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("Acquire after the thaw: %v", err)
	}
	if got.Token != first.Token || got.Owner != first.Owner {
		t.Errorf("retried acquire: got owner %q token %d, want owner %q token %d",
			got.Owner, got.Token, first.Owner, first.Token)
	}
}

func TestPostgresUnreachableDatabase(t *testing.T) {
	t.Parallel()
	// A listener that accepts and never answers: the startup handshake hangs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var mu sync.Mutex
	var accepted []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range accepted {
			_ = c.Close()
		}
	})

	store, err := postgres.Open(context.Background(), postgres.Config{
		DSN: "postgres://postgres@" + ln.Addr().String() + "/postgres?sslmode=disable",
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = store.Acquire(ctx, &leaseapi.AcquireParams{JobID: "j", Owner: "o", TTL: time.Second})
	if !errors.Is(err, leaseapi.ErrUnavailable) {
		t.Errorf("Acquire on a server that never answers: got %v, want an error wrapping ErrUnavailable", err)
	}
}

func TestPostgresSynchronousCommit(t *testing.T) {
	t.Parallel()
	store, err := postgres.Open(context.Background(), postgres.Config{DSN: repotest.PostgresURL(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	got, err := store.SynchronousCommit(context.Background())
	if err != nil {
		t.Fatalf("SynchronousCommit: %v", err)
	}
	if got == "" {
		t.Errorf("SynchronousCommit: got an empty setting")
	}
}
