package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// stallFirstProxy forwards TCP connections to a Postgres server, except
// the first one, which it accepts and never answers: a connection whose
// startup packet was lost (a blackholed or resetting network path, as the
// chaos suite's toxiproxy faults produce).
type stallFirstProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	n     int
	conns []net.Conn
}

func newStallFirstProxy(t *testing.T, target string) *stallFirstProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &stallFirstProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	return p
}

func (p *stallFirstProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.n++
		first := p.n == 1
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		if first {
			continue // accepted, never answered
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c) }()
		go func() { _, _ = io.Copy(c, s) }()
	}
}

// TestPostgresStalledConnectEndsAtConnectTimeout: a connection stalled in
// its startup handshake must give its pool slot back at connect_timeout.
// lib/pq bounds the handshake with SetDeadline(now + connect_timeout); the
// per-read I/O timeout (8 s) used to replace that deadline on every read,
// so a stalled handshake held the slot for 8 s, and a pool full of them
// kept an instance answering 503 for seconds after the network healed
// (found by the chaos suite: recovery after db_reset and db_blackhole).
func TestPostgresStalledConnectEndsAtConnectTimeout(t *testing.T) {
	t.Parallel()
	dsn := repotest.PostgresURL(t)
	_, target := proxiedURL(t, dsn, "127.0.0.1:1")
	proxy := newStallFirstProxy(t, target)
	proxied, _ := proxiedURL(t, dsn, proxy.ln.Addr().String())

	store, err := postgres.Open(context.Background(), postgres.Config{
		DSN:          proxied + "&connect_timeout=1",
		MaxOpenConns: 1,
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })

	// The first call opens the pool's only connection, which stalls.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = store.Get(ctx, "stalled-"+t.Name())
	cancel()
	if !errors.Is(err, leaseapi.ErrUnavailable) {
		t.Fatalf("Get through a stalled connection: got %v, want ErrUnavailable", err)
	}

	// connect_timeout (1 s) frees the slot well within this call's 4 s; the
	// 8 s I/O timeout would not.
	ctx, cancel = context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	_, err = store.Get(ctx, "stalled-"+t.Name())
	if !errors.Is(err, leaseapi.ErrNotFound) {
		t.Errorf("Get after connect_timeout: got %v, want ErrNotFound (the database answered)", err)
	}
}
