package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
)

// errCommitWaitCancelled is the answer to a statement whose commit came back
// with Postgres's "canceling wait for synchronous replication" warning: the
// commit is visible on this primary but may exist on no standby, so a
// failover can lose it. lib/pq reports such a commit as a success.
var errCommitWaitCancelled = fmt.Errorf("%w: the commit's wait for the synchronous standby was cancelled; it is visible on this primary but may be on no standby", leaseapi.ErrUnavailable)

// closingCodes are the SQLSTATEs after which a connection is not used
// again: it is on a node that is no longer (or not yet) a writable primary,
// or it lost its server. The next connection may reach the new primary
// (a multi-host DSN, a proxy that follows the primary).
var closingCodes = map[string]bool{
	"25006": true, // read-only transaction: a demoted primary, or one still being promoted
	"55000": true, // object not in prerequisite state: e.g. pg_walfile_name during recovery
	"57P01": true, // admin shutdown (pg_terminate_backend, a fast shutdown)
	"57P02": true, // crash shutdown
	"57P03": true, // cannot connect now (starting up, shutting down, in recovery)
}

// closesConn reports whether err means the connection that returned it
// must not be used again.
func closesConn(err error) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return false
	}
	code := string(pqErr.Code)
	return closingCodes[code] || strings.HasPrefix(code, "08")
}

// isCommitWaitCancelled reports whether a notice is Postgres's warning that
// a commit stopped waiting for its synchronous standby (a cancel, a
// statement's deadline, a terminated backend). Postgres gives the warning
// no SQLSTATE of its own, so its text is matched.
func isCommitWaitCancelled(n *pq.Error) bool {
	return strings.Contains(n.Message, "wait for synchronous replication")
}

// guard is the state a connector shares with its connections.
type guard struct {
	// waitsCancelled counts commits that came back with the warning.
	waitsCancelled atomic.Uint64
	// refusal, when set, is why no statement may run: with replicated
	// durability, the primary cannot acknowledge durably now (see
	// replication.go). nil: statements run.
	refusal atomic.Pointer[error]
	// checkFailures counts the replication checks that failed in a row.
	checkFailures atomic.Int32
}

// bypassGuardKey marks a context whose statements run even while the guard
// refuses: the replication check itself, which decides when to stop.
type bypassGuardKey struct{}

func bypassGuard(ctx context.Context) context.Context {
	return context.WithValue(ctx, bypassGuardKey{}, true)
}

// before is called before a statement is sent; a non-nil error is the
// statement's answer and nothing is sent.
func (g *guard) before(ctx context.Context) error {
	if refusal := g.refusal.Load(); refusal != nil && ctx.Value(bypassGuardKey{}) == nil {
		return *refusal
	}
	return nil
}

// guardConnector gives every connection a notice handler and a guard: a
// connection that saw a closing error is discarded by the pool, and a
// commit whose synchronous-replication wait was cancelled is an error.
type guardConnector struct {
	pq *pq.Connector
	g  *guard
}

func (c *guardConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.pq.Connect(ctx)
	if err != nil {
		return nil, connectError(err)
	}
	pc, ok := dc.(pqConn)
	if !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("postgres connector: lib/pq connection %T lacks an expected method", dc)
	}
	gc := &guardedConn{pc: pc, g: c.g}
	pq.SetNoticeHandler(dc, gc.notice)
	return gc, nil
}

func (c *guardConnector) Driver() driver.Driver { return c.pq.Driver() }

// connectError says whether a failed connection attempt means that no
// writable primary is reachable now, which is unavailability (503, retried by
// clients): lib/pq reports a host that is not what target_session_attrs asks
// for ("server is in hot standby mode", "session is read-only"), and a
// multi-host DSN none of whose hosts is, with plain errors, not a *pq.Error.
// A refusal by the server itself (a wrong password, a missing database) is a
// *pq.Error and is left to interpretError's codes.
func connectError(err error) error {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return err
	}
	return fmt.Errorf("%w: no writable primary reachable: %w", leaseapi.ErrUnavailable, err)
}

// pqConn is what database/sql uses of a lib/pq connection.
type pqConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.QueryerContext
	driver.ExecerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

// pqStmt is what database/sql uses of a lib/pq prepared statement.
type pqStmt interface {
	driver.Stmt
	driver.StmtQueryContext
	driver.StmtExecContext
}

// guardedConn is a lib/pq connection under a guard. database/sql uses a
// connection from one goroutine at a time, and lib/pq calls the notice
// handler on that goroutine, so its fields need no lock.
type guardedConn struct {
	pc pqConn
	g  *guard
	// bad: a closing error was seen; the pool discards the connection.
	bad bool
	// waitCancelled: the warning arrived during the current call.
	waitCancelled bool
}

func (c *guardedConn) notice(n *pq.Error) {
	if isCommitWaitCancelled(n) {
		c.waitCancelled = true
	}
}

// after turns the outcome of a call into its answer: a call during which a
// commit's wait was cancelled fails, whatever the driver said, and a
// closing error marks the connection bad.
func (c *guardedConn) after(err error) error {
	if c.waitCancelled {
		c.waitCancelled = false
		c.g.waitsCancelled.Add(1)
		if err == nil || err == io.EOF {
			return errCommitWaitCancelled
		}
		// Not driver.ErrBadConn, which would make database/sql run the
		// statement again.
		return fmt.Errorf("%w (%w)", errCommitWaitCancelled, err)
	}
	if err != nil && closesConn(err) {
		c.bad = true
	}
	return err
}

func (c *guardedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *guardedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.g.before(ctx); err != nil {
		return nil, err
	}
	s, err := c.pc.PrepareContext(ctx, query)
	if err := c.after(err); err != nil {
		return nil, err
	}
	ps, ok := s.(pqStmt)
	if !ok {
		_ = s.Close()
		return nil, fmt.Errorf("postgres: lib/pq statement %T lacks an expected method", s)
	}
	return &guardedStmt{ps: ps, c: c}, nil
}

func (c *guardedConn) Close() error { return c.pc.Close() }

func (c *guardedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *guardedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.g.before(ctx); err != nil {
		return nil, err
	}
	tx, err := c.pc.BeginTx(ctx, opts)
	if err := c.after(err); err != nil {
		return nil, err
	}
	return guardedTx{tx: tx, c: c}, nil
}

func (c *guardedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.g.before(ctx); err != nil {
		return nil, err
	}
	rows, err := c.pc.QueryContext(ctx, query, args)
	if err := c.after(err); err != nil {
		return nil, err
	}
	return wrapRows(rows, c)
}

func (c *guardedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.g.before(ctx); err != nil {
		return nil, err
	}
	res, err := c.pc.ExecContext(ctx, query, args)
	if err := c.after(err); err != nil {
		return nil, err
	}
	return res, nil
}

func (c *guardedConn) Ping(ctx context.Context) error { return c.after(c.pc.Ping(ctx)) }

func (c *guardedConn) ResetSession(ctx context.Context) error {
	if c.bad {
		return driver.ErrBadConn
	}
	return c.pc.ResetSession(ctx)
}

func (c *guardedConn) IsValid() bool { return !c.bad && c.pc.IsValid() }

func (c *guardedConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.pc.CheckNamedValue(nv)
}

// guardedStmt is a prepared statement on a guardedConn.
type guardedStmt struct {
	ps pqStmt
	c  *guardedConn
}

func (s *guardedStmt) Close() error  { return s.ps.Close() }
func (s *guardedStmt) NumInput() int { return s.ps.NumInput() }

func (s *guardedStmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errors.New("postgres: Stmt.Exec without a context is not supported")
}

func (s *guardedStmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, errors.New("postgres: Stmt.Query without a context is not supported")
}

func (s *guardedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.c.g.before(ctx); err != nil {
		return nil, err
	}
	res, err := s.ps.ExecContext(ctx, args)
	if err := s.c.after(err); err != nil {
		return nil, err
	}
	return res, nil
}

func (s *guardedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := s.c.g.before(ctx); err != nil {
		return nil, err
	}
	rows, err := s.ps.QueryContext(ctx, args)
	if err := s.c.after(err); err != nil {
		return nil, err
	}
	return wrapRows(rows, s.c)
}

// guardedTx is a transaction on a guardedConn: its commit is where the
// warning arrives.
type guardedTx struct {
	tx driver.Tx
	c  *guardedConn
}

func (t guardedTx) Commit() error   { return t.c.after(t.tx.Commit()) }
func (t guardedTx) Rollback() error { return t.c.after(t.tx.Rollback()) }

// pqRows is what database/sql and sqlx use of lib/pq's rows.
type pqRows interface {
	driver.Rows
	driver.RowsNextResultSet
	driver.RowsColumnTypeScanType
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeLength
	driver.RowsColumnTypePrecisionScale
}

// guardedRows are the rows of an autocommit statement, whose commit (and
// so the warning) comes after the last row: the end of the rows (Next's
// io.EOF, or Close, which reads to the end) is where it is checked.
type guardedRows struct {
	pqRows
	c *guardedConn
}

func wrapRows(rows driver.Rows, c *guardedConn) (driver.Rows, error) {
	r, ok := rows.(pqRows)
	if !ok {
		_ = rows.Close()
		return nil, fmt.Errorf("postgres: lib/pq rows %T lack an expected method", rows)
	}
	return &guardedRows{pqRows: r, c: c}, nil
}

func (r *guardedRows) Next(dest []driver.Value) error {
	err := r.pqRows.Next(dest)
	if err == nil {
		return nil
	}
	return r.c.after(err)
}

func (r *guardedRows) Close() error { return r.c.after(r.pqRows.Close()) }
