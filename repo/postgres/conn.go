package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/groupcommit"
)

// Server-side limits added to the DSN unless it sets them. Each lease
// statement is one short autocommit transaction; these are backstops for
// when something holds a lock or a connection far longer than a request.
var serverDefaults = map[string]string{
	"statement_timeout":                   "5000",
	"lock_timeout":                        "2000",
	"idle_in_transaction_session_timeout": "10000",
	// The store's statements write every run row themselves; this tells
	// the trigger of migrations/postgres (0014) to do nothing. A session
	// of an older version (a rolling upgrade) says 'statement' or nothing,
	// and keeps what the trigger did for it.
	"leaseapi.run_rows": "decided",
}

const (
	defaultConnectTimeout = 3 * time.Second
	// ioTimeout bounds every read and write on a database socket. lib/pq
	// keeps reading after a context ends (it sends a cancel request and
	// waits for the server's answer), so on a frozen or blackholed server a
	// call would block for as long as the kernel keeps the socket open. The
	// request itself returns at its deadline (see bounded); this limit frees
	// the connection afterwards. It exceeds statement_timeout so that slow
	// statements end with the server's error rather than a cut socket.
	ioTimeout = 8 * time.Second
)

// newPostgresConnector parses dsn, adds the server-side defaults (and,
// with replicated durability, synchronous_commit = on unless the DSN sets
// on or remote_apply), and returns a guarded connector (guard.go) whose
// sockets cannot block forever.
func newPostgresConnector(dsn string, durability Durability) (*guardConnector, error) {
	cfg, err := pq.NewConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse LEASEAPI_DATABASE_URL: %w", err)
	}
	if cfg.Runtime == nil {
		cfg.Runtime = map[string]string{}
	}
	for k, v := range serverDefaults {
		if _, ok := cfg.Runtime[k]; !ok {
			cfg.Runtime[k] = v
		}
	}
	if durability == DurabilityReplicated {
		sc, set := cfg.Runtime["synchronous_commit"]
		if set && !waitsForStandby(sc) {
			return nil, fmt.Errorf("LEASEAPI_DATABASE_URL sets synchronous_commit=%s, which does not wait for the synchronous standby; with replicated durability use on or remote_apply, or leave it out", sc)
		}
		if !set {
			cfg.Runtime["synchronous_commit"] = "on"
		}
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	c, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres connector: %w", err)
	}
	c.Dialer(boundedDialer{d: net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 3,
		},
		Control: setUserTimeout(ioTimeout),
	}})
	return &guardConnector{pq: c, g: new(guard)}, nil
}

// boundedDialer dials TCP or Unix sockets whose reads and writes time out.
type boundedDialer struct{ d net.Dialer }

func (b boundedDialer) Dial(network, address string) (net.Conn, error) {
	return b.DialContext(context.Background(), network, address)
}

func (b boundedDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return b.DialContext(ctx, network, address)
}

func (b boundedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := b.d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return deadlineConn{Conn: c, limit: new(atomic.Int64)}, nil
}

// deadlineConn sets a fresh deadline before every read and write, so that
// no single socket operation outlives ioTimeout, but never a later one than
// its user set: lib/pq bounds the startup handshake with SetDeadline(now +
// connect_timeout), and a stalled handshake must give its pool slot back
// then, not ioTimeout later.
type deadlineConn struct {
	net.Conn
	limit *atomic.Int64 // the user's deadline in unix nanoseconds; 0: none
}

// SetDeadline records t as the limit of the per-operation deadlines.
func (c deadlineConn) SetDeadline(t time.Time) error {
	var limit int64
	if !t.IsZero() {
		limit = t.UnixNano()
	}
	c.limit.Store(limit)
	return c.Conn.SetDeadline(t)
}

func (c deadlineConn) next() time.Time {
	d := time.Now().Add(ioTimeout)
	if l := c.limit.Load(); l != 0 && l < d.UnixNano() {
		return time.Unix(0, l)
	}
	return d
}

func (c deadlineConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(c.next()); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c deadlineConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(c.next()); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// bounded runs fn and returns by ctx's deadline even when fn does not:
// lib/pq can block past a context's end on an unresponsive server. fn then
// finishes in the background (bounded by ioTimeout) and its result is
// dropped: the outcome of a write is unknown, which ErrUnavailable says.
func bounded[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	if ctx.Done() == nil {
		return fn(ctx)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return groupcommit.LateResult(ctx, r.v, r.err)
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%w: %w", leaseapi.ErrUnavailable, ctx.Err())
	}
}

// unavailableCodes are Postgres error classes and codes that say the
// database could not do the work now, not that the request was wrong.
var unavailableCodes = map[string]bool{
	"08":    true, // connection exception
	"53":    true, // insufficient resources (too many connections, out of memory, disk full)
	"57":    true, // operator intervention: admin/crash shutdown, cannot connect now, query canceled
	"58":    true, // system error (I/O)
	"40001": true, // serialization failure
	"40P01": true, // deadlock detected
	"55P03": true, // lock not available (lock_timeout)
	"25P03": true, // idle in transaction session timeout
	// Not a writable primary (yet, or any more); see closingCodes.
	"25006": true, // read-only transaction
	"55000": true, // object not in prerequisite state (e.g. recovery in progress)
}

// tokenLimitConstraint is the check that keeps every token at most
// 2^53 - 1 (migrations/postgres/0006, tokenAfter).
const tokenLimitConstraint = "leases_token_exact"

// interpretError translates a driver error into the domain's terms: errors
// that leave the outcome unknown or say the database is unreachable or
// overloaded wrap ErrUnavailable; sql.ErrNoRows is handled by the callers.
func interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, leaseapi.ErrUnavailable) {
		return fmt.Errorf("%s: %w", op, err)
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		code := string(pqErr.Code)
		if pqErr.Constraint == tokenLimitConstraint {
			return fmt.Errorf("%s: %w: the token would pass 2^53 - 1, the largest integer a JSON number keeps exactly (the database's WAL timeline is above 8,192, or a job has had 2^40 grants on one timeline): nothing was written: %w",
				op, leaseapi.ErrUnavailable, err)
		}
		if unavailableCodes[code] || unavailableCodes[code[:2]] {
			return fmt.Errorf("%s: %w: %w", op, leaseapi.ErrUnavailable, err)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, driver.ErrBadConn) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%s: %w: %w", op, leaseapi.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
