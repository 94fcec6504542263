package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/migrations"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// Store is the embedded lease store: one SQLite file, for a single
// leaseapi instance. It keeps the behaviour of the Postgres store with
// different means:
//
//   - Writers are serialized. Every write is a BEGIN IMMEDIATE transaction on
//     the one write connection, so it holds SQLite's write lock from its first
//     statement. The decision and the run-history rows it causes are written
//     in that one transaction.
//   - The process clock is the one clock. A write reads time.Now() once,
//     after BEGIN IMMEDIATE returned (the write lock is held), and uses that
//     instant for the decision and for every timestamp it stores. Writes are
//     serialized, so their instants never go backwards (unless the wall clock
//     does) and a grant never starts before the release it waited for.
//   - Reads use a separate read-only pool. WAL lets them run beside the
//     writer; each read is a transaction whose clock is read after its
//     snapshot began, so no timestamp it returns lies after its "now".
//   - Times are stored as INTEGER Unix milliseconds (UTC): the wire's
//     precision, compared exactly. Times given to the store (ticks) are
//     truncated to milliseconds, and durations to whole milliseconds.
//   - Durability: WAL with synchronous=FULL, so an acknowledged write has
//     been fsynced and survives a crash or restart.
//   - One instance per file: Open takes an exclusive flock on
//     "<path>.lock" for the store's lifetime and refuses to open a file that
//     another store, in this or another process, still has open after a
//     second (lockWait: long enough for an exiting instance).
type Store struct {
	path string
	// write has exactly one connection; its DSN makes every transaction
	// BEGIN IMMEDIATE.
	write *sqlx.DB
	// read is a query_only pool.
	read       *sqlx.DB
	lockFile   *os.File
	migrations *goose.Provider
	logger     *slog.Logger
	observer   leaseapi.Observer
	// maxAhead is the lead a tick may have on the store's clock.
	maxAhead time.Duration
	// schemaCurrent caches a Ready or Migrate that found no pending
	// migration: nobody else can migrate the file while the lock is held.
	schemaCurrent atomic.Bool

	// mu guards closed and the Add side of inflight; Close waits for
	// inflight, the calls that bounded gave up on at their deadline, so
	// that the file lock is released only once no connection can write.
	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
}

var _ leaseapi.Store = (*Store)(nil)

// Config configures Open.
type Config struct {
	// Path is the database file, created if missing. Its directory must
	// exist; "<Path>.lock", "<Path>-wal" and "<Path>-shm" live beside it.
	Path   string
	Logger *slog.Logger
	// Observer is told of the events the metrics count; nil tells nobody.
	Observer leaseapi.Observer
	// MaxTickAhead is how far past the store's clock a tick may lie: an
	// acquire or trigger of a later tick is refused with a
	// *leaseapi.TickAheadError. 0 means leaseapi.DefaultMaxTickAhead.
	MaxTickAhead time.Duration
}

// errInUse is returned by lockExclusive when another store holds the
// lock.
var errInUse = errors.New("in use")

const (
	// migrationsTable is goose's version table, named as in Postgres.
	migrationsTable = "leaseapi_migrations"
	// busyTimeout bounds SQLite's own wait for a lock. Within one
	// instance writers queue for the single write connection instead, so
	// this applies only to the rare reader wait (WAL recovery, checkpoint)
	// and to foreign connections; the caller's context ends it sooner.
	busyTimeout = 5 * time.Second
	// readConns is the size of the read pool.
	readConns = 4
)

// Open opens (creating if needed) the database file at cfg.Path and
// takes the single-instance lock. It does not migrate: call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("open sqlite: empty path")
	}
	if cfg.Path == ":memory:" || strings.HasPrefix(cfg.Path, "file:") {
		return nil, fmt.Errorf("open sqlite: path %q must be a file path", cfg.Path)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	path, err := realPath(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", cfg.Path, err)
	}

	lockFile, err := lockExclusive(path + ".lock")
	if errors.Is(err, errInUse) {
		return nil, fmt.Errorf("open sqlite: embedded store %s is in use by another process; "+
			"the embedded store serves one leaseapi instance — use Postgres (LEASEAPI_DATABASE_URL) for several", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: lock: %w", path, err)
	}
	s := &Store{path: path, lockFile: lockFile, logger: logger, observer: stores.OrNoObserver(cfg.Observer),
		maxAhead: stores.MaxTickAhead(cfg.MaxTickAhead)}
	if err := s.open(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open sqlite %s: %w", path, err), s.closeAll())
	}
	logger.InfoContext(ctx, "sqlite store opened", slog.String("path", path))
	return s, nil
}

// realPath makes path absolute and resolves symbolic links (of the
// file, or of its directory while the file does not exist yet), so that
// every path to one database file takes the same lock file.
func realPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(abs)), nil
}

// journalModeQuery reads the journal mode the write connection set.
const journalModeQuery = `PRAGMA journal_mode`

func (s *Store) open(ctx context.Context) error {
	busy := fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds())
	writeDSN := dsn(s.path, url.Values{
		"_txlock": {"immediate"},
		"_pragma": {busy, "foreign_keys(1)", "journal_mode(WAL)", "synchronous(FULL)"},
	})
	write, err := sql.Open("sqlite", writeDSN)
	if err != nil {
		return err
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	s.write = sqlx.NewDb(write, "sqlite")
	// The first connection applies the pragmas; journal_mode=WAL persists in
	// the file, so the readers opened next find it set.
	var mode string
	if err := s.write.GetContext(ctx, &mode, journalModeQuery); err != nil {
		return interpretError("journal mode", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal (is the file on a local file system?)", mode)
	}

	read, err := sql.Open("sqlite", dsn(s.path, url.Values{
		"_pragma": {busy, "foreign_keys(1)", "query_only(1)"},
	}))
	if err != nil {
		return err
	}
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	s.read = sqlx.NewDb(read, "sqlite")
	if err := s.read.PingContext(ctx); err != nil {
		return interpretError("ping", err)
	}

	provider, err := goose.NewProvider(database.DialectSQLite3, s.write.DB, migrations.SQLite(),
		goose.WithTableName(migrationsTable),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	s.migrations = provider
	return nil
}

// dsn is a file: URI for path with the driver's parameters; SQLite
// ignores the parameters it does not know.
func dsn(path string, params url.Values) string {
	u := url.URL{Path: filepath.ToSlash(path)}
	return "file:" + u.EscapedPath() + "?" + params.Encode()
}

// Migrate applies pending migrations. The file lock already guarantees a
// single migrator; goose runs each migration in a BEGIN IMMEDIATE
// transaction on the write connection.
func (s *Store) Migrate(ctx context.Context) error {
	_, err := bounded(ctx, s, "migrate", func(ctx context.Context) (struct{}, error) {
		results, err := s.migrations.Up(ctx)
		if err != nil {
			return struct{}{}, interpretError("migrate", err)
		}
		for _, r := range results {
			s.logger.InfoContext(ctx, "migration applied",
				slog.Int64("version", r.Source.Version), slog.String("file", r.Source.Path),
				slog.Duration("duration", r.Duration))
		}
		if err := s.finalizeSelf(ctx); err != nil {
			return struct{}{}, interpretError("migrate: feature level", err)
		}
		s.schemaCurrent.Store(true)
		return struct{}{}, nil
	})
	return err
}

// pingQuery reads the database file, not just the connection.
const pingQuery = `SELECT count(*) FROM sqlite_schema`

// Ready returns nil when both connections answer and no migration is
// pending. It waits for the write connection, so a writer that is stuck
// makes the instance unready.
func (s *Store) Ready(ctx context.Context) error {
	_, err := bounded(ctx, s, "ready", func(ctx context.Context) (struct{}, error) {
		var n int64
		if err := s.read.GetContext(ctx, &n, pingQuery); err != nil {
			return struct{}{}, interpretError("ready", err)
		}
		if err := s.write.GetContext(ctx, &n, pingQuery); err != nil {
			return struct{}{}, interpretError("ready", err)
		}
		if s.schemaCurrent.Load() {
			return struct{}{}, nil
		}
		pending, err := s.migrations.HasPending(ctx)
		if err != nil {
			return struct{}{}, interpretError("ready", err)
		}
		if pending {
			return struct{}{}, &leaseapi.RefusedError{Reason: "database migrations are pending (run leaseapi migrate)"}
		}
		s.schemaCurrent.Store(true)
		return struct{}{}, nil
	})
	return err
}

// Close waits for calls still running in the background, closes the
// connections (the last one checkpoints the WAL) and releases the file lock.
// Calling it again does nothing.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.inflight.Wait()
	return s.closeAll()
}

func (s *Store) closeAll() error {
	var errs []error
	if s.read != nil {
		errs = append(errs, s.read.Close())
	}
	if s.write != nil {
		errs = append(errs, s.write.Close()) // also the goose provider's *sql.DB
	}
	if s.lockFile != nil {
		errs = append(errs, s.lockFile.Close()) // releases the flock
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sqlite %s: %w", s.path, err)
	}
	return nil
}

// bounded runs fn and returns by ctx's deadline even when fn does not
// (an fsync on a stalled disk cannot be interrupted). fn then finishes in
// the background, its result dropped: the outcome of a write is unknown,
// which ErrUnavailable says. Close waits for it.
func bounded[T any](ctx context.Context, s *Store, op string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return zero, fmt.Errorf("%s: sqlite store %s is closed", op, s.path)
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	if ctx.Done() == nil {
		defer s.inflight.Done()
		return fn(ctx)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer s.inflight.Done()
		v, err := fn(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // finished as the deadline passed: report what happened
			return r.v, r.err
		default:
			return zero, fmt.Errorf("%s: %w: %w", op, leaseapi.ErrUnavailable, ctx.Err())
		}
	}
}

// transact is one store call named op (bounded) whose work, fn, runs
// in a transaction begun by inTx (s.writeTx or s.readTx); a failure is
// translated by interpretError.
func transact[T any](ctx context.Context, s *Store, op string,
	inTx func(context.Context, func(*sqlx.Tx, int64) error) error,
	fn func(ctx context.Context, tx *sqlx.Tx, now int64) (T, error),
) (T, error) {
	return observedTx(ctx, s, op, inTx, nil, fn)
}

// observedTx is transact for a call that records events: they are
// told to the store's observer once the transaction has committed, also
// when the caller stopped waiting before that.
func observedTx[T any](ctx context.Context, s *Store, op string,
	inTx func(context.Context, func(*sqlx.Tx, int64) error) error, ev *stores.Events,
	fn func(ctx context.Context, tx *sqlx.Tx, now int64) (T, error),
) (T, error) {
	return bounded(ctx, s, op, func(ctx context.Context) (T, error) {
		var out T
		err := inTx(ctx, func(tx *sqlx.Tx, now int64) error {
			var err error
			out, err = fn(ctx, tx, now)
			return err
		})
		if err != nil {
			var zero T
			return zero, interpretError(op, err)
		}
		ev.Emit(s.observer)
		return out, nil
	})
}

// interpretError translates a driver error into the domain's terms. Conflicts
// pass unchanged; waits that ended (context, SQLITE_BUSY) and I/O failures
// wrap ErrUnavailable: the database could not do the work now and the
// outcome of a write is unknown.
func interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	var conflict *leaseapi.ConflictError
	if errors.As(err, &conflict) || errors.Is(err, leaseapi.ErrTickAhead) {
		return err
	}
	if errors.Is(err, leaseapi.ErrUnavailable) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("%s: %w: %w", op, leaseapi.ErrUnavailable, err)
	}
	var driverErr *sqlitedrv.Error
	if errors.As(err, &driverErr) {
		switch driverErr.Code() & 0xff { // the primary result code
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_INTERRUPT,
			sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOMEM:
			return fmt.Errorf("%s: %w: %w", op, leaseapi.ErrUnavailable, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// writeTx runs fn in a BEGIN IMMEDIATE transaction on the write connection
// and commits unless fn fails. now, in Unix milliseconds, is read once after
// the write lock is held: it is the instant of every decision and timestamp
// of the transaction.
func (s *Store) writeTx(ctx context.Context, fn func(tx *sqlx.Tx, now int64) error) error {
	tx, err := s.write.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	now := time.Now().UnixMilli()
	if err := fn(tx, now); err != nil {
		return err
	}
	return tx.Commit()
}

// snapshotQuery starts a read transaction's snapshot: a deferred
// transaction takes it at its first read.
const snapshotQuery = `SELECT count(*) FROM sqlite_schema`

// readTx runs fn in a read transaction on the read pool. now is read after
// the snapshot began, so every write the snapshot sees was decided at or
// before now.
func (s *Store) readTx(ctx context.Context, fn func(tx *sqlx.Tx, now int64) error) error {
	tx, err := s.read.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var n int64
	if err := tx.GetContext(ctx, &n, snapshotQuery); err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	if err := fn(tx, now); err != nil {
		return err
	}
	return tx.Commit()
}

// leaseRow is a leases row; times are Unix milliseconds.
type leaseRow struct {
	JobID             string         `db:"job_id"`
	Owner             string         `db:"owner"`
	Token             int64          `db:"token"`
	Tick              sql.NullInt64  `db:"tick"`
	TTLMs             int64          `db:"ttl_ms"`
	AcquiredAt        int64          `db:"acquired_at"`
	RenewedAt         int64          `db:"renewed_at"`
	ExpiresAt         int64          `db:"expires_at"`
	ReleasedAt        sql.NullInt64  `db:"released_at"`
	RevokedAt         sql.NullInt64  `db:"revoked_at"`
	LastCompletedTick sql.NullInt64  `db:"last_completed_tick"`
	LastOutcome       sql.NullString `db:"last_outcome"`
	Schedule          sql.NullString `db:"schedule"`
	GraceMs           sql.NullInt64  `db:"grace_ms"`
	PausedAt          sql.NullInt64  `db:"paused_at"`
	PausedBy          sql.NullString `db:"paused_by"`
	PausedReason      sql.NullString `db:"paused_reason"`
	MissedTicks       int64          `db:"missed_ticks"`
	SkippedTicks      int64          `db:"skipped_ticks"`
	RevokedBy         sql.NullString `db:"revoked_by"`
	Timeline          int64          `db:"timeline"`
	CatchUp           string         `db:"catch_up"`
	CatchUpWindowMs   int64          `db:"catch_up_window_ms"`
	OwedTick          sql.NullInt64  `db:"owed_tick"`
	OwedReason        sql.NullString `db:"owed_reason"`
	// OwedBy is who triggered the manual tick the job owes, which the run
	// that claims it records.
	OwedBy    sql.NullString `db:"owed_by"`
	OwedUntil sql.NullInt64  `db:"owed_until"`
	// What started the current grant, and the schedule's registration
	// (decide.Facts).
	GrantTrigger     string         `db:"grant_trigger"`
	GrantTriggeredBy sql.NullString `db:"grant_triggered_by"`
	ScheduleSince    sql.NullInt64  `db:"schedule_since"`
	NextTick         sql.NullInt64  `db:"next_tick"`
	DecideAt         sql.NullInt64  `db:"decide_at"`
	// The job's group and the slot its current grant took.
	GroupName sql.NullString `db:"group_name"`
	Slot      sql.NullInt64  `db:"slot"`
	SlotToken sql.NullInt64  `db:"slot_token"`
	// Where the job's policy stands (NULL without one).
	AlertStatus  sql.NullString `db:"alert_status"`
	AlertReasons string         `db:"alert_reasons"`
}

// leaseColumns are the columns every lease query and RETURNING yields.
const leaseColumns = `job_id, owner, token, tick, ttl_ms, acquired_at, renewed_at, expires_at,
	released_at, revoked_at, last_completed_tick, last_outcome,
	schedule, grace_ms, paused_at, paused_by, paused_reason, missed_ticks, skipped_ticks, revoked_by, timeline,
	catch_up, catch_up_window_ms, owed_tick, owed_reason, owed_by, owed_until,
	grant_trigger, grant_triggered_by, schedule_since, next_tick, decide_at, group_name, slot, slot_token,
	alert_status, alert_reasons`

// held reports whether the grant is held at now.
func (r *leaseRow) held(now int64) bool {
	return !r.ReleasedAt.Valid && !r.RevokedAt.Valid && r.ExpiresAt > now
}

// lease is the row as the domain sees it at now.
func (r *leaseRow) lease(now int64) leaseapi.Lease {
	l := leaseapi.Lease{
		JobID:             r.JobID,
		Owner:             r.Owner,
		Token:             r.Token,
		Timeline:          r.Timeline,
		AcquiredAt:        fromMs(r.AcquiredAt),
		RenewedAt:         fromMs(r.RenewedAt),
		ExpiresAt:         fromMs(r.ExpiresAt),
		ReleasedAt:        fromNullMs(r.ReleasedAt),
		TTL:               time.Duration(r.TTLMs) * time.Millisecond,
		Tick:              fromNullMs(r.Tick),
		LastCompletedTick: fromNullMs(r.LastCompletedTick),
		LastOutcome:       leaseapi.Outcome(r.LastOutcome.String),
		Schedule:          r.Schedule.String,
		Grace:             time.Duration(r.GraceMs.Int64) * time.Millisecond,
		PausedAt:          fromNullMs(r.PausedAt),
		PausedBy:          r.PausedBy.String,
		PausedReason:      r.PausedReason.String,
		MissedTicks:       r.MissedTicks,
		SkippedTicks:      r.SkippedTicks,
		CatchUp:           leaseapi.CatchUp(r.CatchUp),
		CatchUpWindow:     time.Duration(r.CatchUpWindowMs) * time.Millisecond,
		Group:             r.GroupName.String,
		Slot:              int(r.Slot.Int64),
		SlotToken:         r.SlotToken.Int64,
		AlertStatus:       leaseapi.AlertStatus(r.AlertStatus.String),
		AlertReasons:      leaseapi.ParseAlertReasons(r.AlertReasons),
	}
	stores.SetOwed(&l, fromNullMs(r.OwedTick), r.OwedReason.String, fromNullMs(r.OwedUntil), fromMs(now))
	if r.RevokedAt.Valid {
		l.RevokedBy = r.RevokedBy.String
	}
	l.SetState(r.RevokedAt.Valid, fromMs(now))
	stores.SetNextTick(&l, fromMs(now))
	return l
}

// facts are the facts an acquire is decided on: the row at now.
func (r *leaseRow) facts(now int64) decide.Facts {
	l := r.lease(now)
	return decide.Facts{Lease: &l, Now: fromMs(now), Timeline: 1, Revoked: r.RevokedAt.Valid,
		OwedUntil: fromNullMs(r.OwedUntil), OwedBy: r.OwedBy.String,
		GrantTrigger: leaseapi.Trigger(r.GrantTrigger), GrantTriggeredBy: r.GrantTriggeredBy.String,
		ScheduleSince: fromNullMs(r.ScheduleSince), NextTick: fromNullMs(r.NextTick), DecideAt: fromNullMs(r.DecideAt)}
}

func fromMs(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func fromNullMs(ms sql.NullInt64) *time.Time {
	if !ms.Valid {
		return nil
	}
	t := fromMs(ms.Int64)
	return &t
}

func toNullMs(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

const selectLeaseQuery = `SELECT ` + leaseColumns + ` FROM leases WHERE job_id = $1`

// selectLease reads the lease of jobID inside tx, or ErrNotFound.
func selectLease(ctx context.Context, tx *sqlx.Tx, jobID string) (leaseRow, error) {
	var row leaseRow
	err := tx.GetContext(ctx, &row, selectLeaseQuery, jobID)
	if errors.Is(err, sql.ErrNoRows) {
		return row, leaseapi.ErrNotFound
	}
	return row, err
}

// writeLease runs an INSERT or a guarded UPDATE … RETURNING the row.
// The guard (job, token, owner) only restates what the caller decided under
// the write lock, so a miss is a bug, not a conflict.
func writeLease(ctx context.Context, tx *sqlx.Tx, query string, args ...any) (leaseRow, error) {
	var row leaseRow
	err := tx.GetContext(ctx, &row, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return row, errors.New("lease changed under the write lock")
	}
	return row, err
}

// The writes of an acquire's plan (decide.PlanAcquire), made under the
// write lock the row was read under. The registration's columns are
// written whole, as decided.
const (
	insertLeaseQuery = `
INSERT INTO leases (job_id, owner, token, tick, ttl_ms, acquired_at, renewed_at, expires_at,
	schedule, grace_ms, schedule_since, next_tick, decide_at, catch_up, catch_up_window_ms, group_name, slot, slot_token)
VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
RETURNING ` + leaseColumns

	// grantQuery starts a new grant ($12: its token) on the row whose
	// token the decision read ($2): release and revocation cleared; $9 and
	// $10 are what started the grant, and $11 whether it settles what the
	// job owes.
	grantQuery = `
UPDATE leases SET owner = $3, token = $12, tick = $4, ttl_ms = $5,
	acquired_at = $6, renewed_at = $6, expires_at = $7,
	released_at = NULL, revoked_at = NULL, last_outcome = $8,
	grant_trigger = $9, grant_triggered_by = $10,
	owed_tick = CASE WHEN $11 THEN NULL ELSE owed_tick END,
	owed_reason = CASE WHEN $11 THEN NULL ELSE owed_reason END,
	owed_by = CASE WHEN $11 THEN NULL ELSE owed_by END,
	owed_trigger_reason = CASE WHEN $11 THEN NULL ELSE owed_trigger_reason END,
	owed_until = CASE WHEN $11 THEN NULL ELSE owed_until END,
	schedule = $13, grace_ms = $14, schedule_since = $15, next_tick = $16, decide_at = $17, catch_up = $18, catch_up_window_ms = $19,
	group_name = $20, slot = $21, slot_token = $22
WHERE job_id = $1 AND token = $2
RETURNING ` + leaseColumns

	// renewQuery renews the holder's grant (an acquire's renewal).
	renewQuery = `
UPDATE leases SET ttl_ms = $4, renewed_at = $5, expires_at = $6,
	schedule = $7, grace_ms = $8, schedule_since = $9, next_tick = $10, decide_at = $11, catch_up = $12, catch_up_window_ms = $13
WHERE job_id = $1 AND owner = $2 AND token = $3
RETURNING ` + leaseColumns

	// extendQuery renews a held grant: a heartbeat.
	extendQuery = `
UPDATE leases SET ttl_ms = $4, renewed_at = $5, expires_at = $6
WHERE job_id = $1 AND owner = $2 AND token = $3
RETURNING ` + leaseColumns

	insertRunQuery = `
INSERT INTO runs (job_id, token, owner, tick, started_at, timeline, trigger, triggered_by, group_name, slot, slot_token)
VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $9, $10)`

	// endRunQuery closes the run of one grant.
	endRunQuery = `
UPDATE runs SET outcome = $3, ended_at = $4
WHERE job_id = $1 AND token = $2 AND outcome = 'running'`
)

// Acquire grants, renews or refuses the lease. See leaseapi.Store.
func (s *Store) Acquire(ctx context.Context, p *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	if err := stores.ValidateAcquire(p); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("acquire %q", p.JobID)
	var ev stores.Events
	return observedTx(ctx, s, op, s.writeTx, &ev, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		row, err := s.acquire(ctx, tx, p, now, &ev)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		return row.lease(now), nil
	})
}

// acquire decides an acquire under the write lock, on the row and the
// clock read under it (decide.PlanAcquire), and writes the plan: the
// grant or the renewal, its run, and the close of the run it takes over.
func (s *Store) acquire(ctx context.Context, tx *sqlx.Tx, p *leaseapi.AcquireParams, now int64, ev *stores.Events) (leaseRow, error) {
	cur, err := selectLease(ctx, tx, p.JobID)
	found := err == nil
	if err != nil && !errors.Is(err, leaseapi.ErrNotFound) {
		return cur, err
	}
	f := decide.Facts{Now: fromMs(now), Timeline: 1}
	if found {
		f = cur.facts(now)
	}
	plan, err := decide.PlanAcquire(p, &f, s.maxAhead)
	if err == nil && plan.NeedsGroup() {
		var g decide.GroupFacts
		if g, err = readGroup(ctx, tx, plan.Group, now); err != nil {
			return cur, err
		}
		f.Group = &g
		plan, err = decide.PlanAcquire(p, &f, s.maxAhead)
	}
	if err != nil {
		return cur, err
	}
	g := &plan.Registration
	spec, grace := sql.NullString{String: g.Schedule, Valid: g.Schedule != ""}, sql.NullInt64{}
	if spec.Valid {
		grace = sql.NullInt64{Int64: g.Grace.Milliseconds(), Valid: true}
	}
	reg := []any{spec, grace, toNullMs(g.ScheduleSince), toNullMs(g.NextTick), toNullMs(g.DecideAt),
		string(g.CatchUp), g.CatchUpWindow.Milliseconds()}
	ttl, tick := plan.TTL.Milliseconds(), toNullMs(plan.Tick)
	if plan.Renew {
		return writeLease(ctx, tx, renewQuery, append([]any{p.JobID, p.Owner, cur.Token, ttl, now, now + ttl}, reg...)...)
	}
	triggeredBy := sql.NullString{String: plan.TriggeredBy, Valid: plan.TriggeredBy != ""}
	group := []any{sql.NullString{String: plan.Group, Valid: plan.Group != ""},
		sql.NullInt64{Int64: int64(plan.Slot), Valid: plan.Slot != 0}, sql.NullInt64{Int64: plan.SlotToken, Valid: plan.Slot != 0}}
	var row leaseRow
	if plan.Insert {
		row, err = writeLease(ctx, tx, insertLeaseQuery, slices.Concat([]any{p.JobID, p.Owner, plan.Token, tick, ttl, now, now + ttl}, reg, group)...)
	} else {
		if plan.CloseExpired {
			if err := s.closeExpiredRun(ctx, tx, &cur, ev); err != nil {
				return cur, err
			}
		}
		lastOutcome := sql.NullString{String: string(plan.LastOutcome), Valid: plan.LastOutcome != ""}
		row, err = writeLease(ctx, tx, grantQuery, slices.Concat([]any{p.JobID, cur.Token, p.Owner, tick, ttl, now, now + ttl, lastOutcome,
			string(plan.Trigger), triggeredBy, plan.SettlesOwed, plan.Token}, reg, group)...)
	}
	if err != nil {
		return row, err
	}
	if plan.Slot != 0 {
		if err := takeSlot(ctx, tx, &plan); err != nil {
			return row, err
		}
	}
	_, err = tx.ExecContext(ctx, insertRunQuery, slices.Concat([]any{p.JobID, row.Token, p.Owner, tick, now, plan.Trigger, triggeredBy}, group)...)
	ev.RunStarted(plan.Trigger)
	return row, err
}

const (
	// runningRunQuery reads the run of a grant that is still open.
	runningRunQuery = `
SELECT started_at, expiry_counted FROM runs WHERE job_id = $1 AND token = $2 AND outcome = 'running'`

	// closeExpiredRunQuery closes the run of a grant that expired
	// and was taken over; its expiry is counted now if the sweep has not.
	closeExpiredRunQuery = `
UPDATE runs SET outcome = 'expired', ended_at = $3, expiry_counted = 1
WHERE job_id = $1 AND token = $2 AND outcome = 'running'`
)

// closeExpiredRun ends cur's run as expired at its expiresAt.
func (s *Store) closeExpiredRun(ctx context.Context, tx *sqlx.Tx, cur *leaseRow, ev *stores.Events) error {
	var closed struct {
		StartedAt int64 `db:"started_at"`
		Counted   bool  `db:"expiry_counted"`
	}
	err := tx.GetContext(ctx, &closed, runningRunQuery, cur.JobID, cur.Token)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // pruned, or never recorded: nothing to close
	}
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, closeExpiredRunQuery, cur.JobID, cur.Token, cur.ExpiresAt); err != nil {
		return err
	}
	ev.RunFinished(leaseapi.OutcomeExpired, time.Duration(cur.ExpiresAt-closed.StartedAt)*time.Millisecond)
	if !closed.Counted {
		ev.Expired++
	}
	return nil
}

// AcquireBatch decides the acquires one after the other: the embedded
// store has no round trips to save. See leaseapi.Batching.
func (s *Store) AcquireBatch(ctx context.Context, ps []*leaseapi.AcquireParams) []leaseapi.Answer {
	return stores.Each(ctx, ps, s.Acquire)
}

// HeartbeatBatch makes the heartbeats one after the other, as
// AcquireBatch. See leaseapi.Batching.
func (s *Store) HeartbeatBatch(ctx context.Context, ps []*leaseapi.HeartbeatParams) []leaseapi.Answer {
	return stores.Each(ctx, ps, s.Heartbeat)
}

// Heartbeat extends a held lease. See leaseapi.Store.
func (s *Store) Heartbeat(ctx context.Context, p *leaseapi.HeartbeatParams) (leaseapi.Lease, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("heartbeat %q", p.JobID)
	return transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		cur, err := selectLease(ctx, tx, p.JobID)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		plan, err := decide.PlanHeartbeat(p, cur.lease(now))
		if err != nil {
			return leaseapi.Lease{}, err
		}
		ttl := plan.TTL.Milliseconds()
		row, err := writeLease(ctx, tx, extendQuery, p.JobID, p.Owner, p.Token, ttl, now, now+ttl)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		return row.lease(now), nil
	})
}

// releaseQuery ends the grant read (decide.Release decided it, under
// the write lock): releasedAt = expiresAt = now.
const releaseQuery = `
UPDATE leases SET released_at = $4, expires_at = $4, last_outcome = $5, last_completed_tick = $6
WHERE job_id = $1 AND owner = $2 AND token = $3
RETURNING ` + leaseColumns

// Release ends the holder's grant. See leaseapi.Store.
func (s *Store) Release(ctx context.Context, p *leaseapi.ReleaseParams) (leaseapi.Lease, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("release %q", p.JobID)
	outcome := p.Outcome
	var ev stores.Events
	return observedTx(ctx, s, op, s.writeTx, &ev, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		cur, err := selectLease(ctx, tx, p.JobID)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		l := cur.lease(now)
		echo, completed, err := decide.Release(p, l)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		if echo {
			return l, nil // a retried release: nothing changes
		}
		row, err := writeLease(ctx, tx, releaseQuery,
			p.JobID, p.Owner, p.Token, now, string(outcome), toNullMs(completed))
		if err != nil {
			return leaseapi.Lease{}, err
		}
		if _, err := tx.ExecContext(ctx, endRunQuery, p.JobID, p.Token, string(outcome), now); err != nil {
			return leaseapi.Lease{}, err
		}
		ev.RunFinished(outcome, time.Duration(now-cur.AcquiredAt)*time.Millisecond)
		if row.AlertStatus.Valid {
			if _, row, err = decidePolicy(ctx, tx, p.JobID, now); err != nil {
				return leaseapi.Lease{}, err
			}
		}
		return row.lease(now), nil
	})
}

// revokeQuery force-releases a held grant and bumps the token, so the
// old holder's token is stale.
const revokeQuery = `
UPDATE leases AS l SET token = token + 1, revoked_at = $3, expires_at = $3, last_outcome = 'revoked', revoked_by = $4
WHERE job_id = $1 AND token = $2 AND ` + stores.GrantOpen + `
RETURNING ` + leaseColumns

// revokeRunQuery closes the run of a revoked grant and records who
// revoked it.
const revokeRunQuery = `
UPDATE runs SET outcome = 'revoked', ended_at = $3, revoked_by = $4
WHERE job_id = $1 AND token = $2 AND outcome = 'running'`

// Revoke force-releases a held lease. See leaseapi.Store.
func (s *Store) Revoke(ctx context.Context, p *leaseapi.RevokeParams) (leaseapi.Lease, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	jobID, by := p.JobID, sql.NullString{String: p.By, Valid: p.By != ""}
	op := fmt.Sprintf("revoke %q", jobID)
	var ev stores.Events
	return observedTx(ctx, s, op, s.writeTx, &ev, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		cur, err := selectLease(ctx, tx, jobID)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		if !cur.held(now) {
			return cur.lease(now), nil // not held: unchanged
		}
		row, err := writeLease(ctx, tx, revokeQuery, jobID, cur.Token, now, by)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		if _, err := tx.ExecContext(ctx, revokeRunQuery, jobID, cur.Token, now, by); err != nil {
			return leaseapi.Lease{}, err
		}
		if _, err := tx.ExecContext(ctx, revokedSlotQuery, jobID, cur.Token, cur.ExpiresAt); err != nil {
			return leaseapi.Lease{}, err
		}
		ev.RunFinished(leaseapi.OutcomeRevoked, time.Duration(now-cur.AcquiredAt)*time.Millisecond)
		return row.lease(now), nil
	})
}

// Get returns one lease. See leaseapi.Store.
func (s *Store) Get(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("get %q", jobID)
	return transact(ctx, s, op, s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		row, err := selectLease(ctx, tx, jobID)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		return row.lease(now), nil
	})
}

// The list queries read one keyset page in job_id order (bytewise, BINARY
// collation) as one index range scan: job_id >= $1 is the page's start,
// max(after, prefix), with after itself excluded by job_id <> $2, and
// job_id < $3, in the prefix query, ends the prefix's range. States are
// computed at $6, the clock of the read.
const (
	listFilter = `
	AND ($4 = '' OR owner = $4)
	AND ($5 = '' OR $5 = CASE
		WHEN revoked_at IS NOT NULL THEN 'revoked'
		WHEN released_at IS NOT NULL THEN 'released'
		WHEN expires_at > $6 THEN 'held'
		ELSE 'expired' END)`

	// listOrder ends a list query, after the paused and overdue
	// filters (stores.ListFilters).
	listOrder = `
ORDER BY job_id
LIMIT $7`

	listQuery = `SELECT ` + leaseColumns + ` FROM leases
WHERE job_id >= $1 AND job_id <> $2 AND $3 = ''` + listFilter

	listPrefixQuery = `SELECT ` + leaseColumns + ` FROM leases
WHERE job_id >= $1 AND job_id <> $2 AND job_id < $3` + listFilter
)

// List returns one page of leases. See leaseapi.Store.
func (s *Store) List(ctx context.Context, p *leaseapi.ListParams) (leaseapi.LeasePage, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.LeasePage{}, err
	}
	start := max(p.After, p.Prefix)
	query, end := listQuery, ""
	if p.Prefix != "" {
		var ok bool
		if end, ok = prefixEnd(p.Prefix); !ok {
			// Only bytes 0xFF: no valid UTF-8, so no job id, starts so.
			return leaseapi.LeasePage{Leases: []leaseapi.Lease{}, Now: fromMs(time.Now().UnixMilli())}, nil
		}
		query = listPrefixQuery
	}
	query += stores.ListFilters(p) + listOrder
	return transact(ctx, s, "list leases", s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.LeasePage, error) {
		var page leaseapi.LeasePage
		var rows []leaseRow
		if err := tx.SelectContext(ctx, &rows, query,
			start, p.After, end, p.Owner, string(p.State), now, p.Limit+1); err != nil {
			return leaseapi.LeasePage{}, err
		}
		if len(rows) > p.Limit {
			page.More = true
			rows = rows[:p.Limit]
		}
		page.Leases = make([]leaseapi.Lease, len(rows))
		for i := range rows {
			page.Leases[i] = rows[i].lease(now)
		}
		page.Now = fromMs(now)
		return page, nil
	})
}

// prefixEnd is the least string above every string that starts with
// prefix, bytewise: prefix with its last byte below 0xFF incremented and
// the rest dropped.
func prefixEnd(prefix string) (string, bool) {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] < 0xFF {
			return prefix[:i] + string([]byte{prefix[i] + 1}), true
		}
	}
	return "", false
}

// runsQuery reads a job's history newest first: by start, or by tick
// for a missed run (runs_job_at_idx).
const runsQuery = `
SELECT id, token, owner, tick, started_at, ended_at, outcome, revoked_by, trigger, triggered_by,
	group_name, slot, slot_token, group_full FROM runs
WHERE job_id = $1
ORDER BY COALESCE(started_at, tick) DESC, id DESC
LIMIT $2`

type runRow struct {
	ID        int64          `db:"id"`
	Token     sql.NullInt64  `db:"token"`
	Owner     sql.NullString `db:"owner"`
	Tick      sql.NullInt64  `db:"tick"`
	StartedAt sql.NullInt64  `db:"started_at"`
	EndedAt   sql.NullInt64  `db:"ended_at"`
	Outcome   string         `db:"outcome"`
	RevokedBy sql.NullString `db:"revoked_by"`
	// Trigger and TriggeredBy: what started the run.
	Trigger     string         `db:"trigger"`
	TriggeredBy sql.NullString `db:"triggered_by"`
	// The group slot the grant took; a missed tick whose group was full.
	GroupName sql.NullString `db:"group_name"`
	Slot      sql.NullInt64  `db:"slot"`
	SlotToken sql.NullInt64  `db:"slot_token"`
	GroupFull bool           `db:"group_full"`
	// The job's lease, when the read joined it (the recent runs).
	runGrantRow
}

// runGrantColumns are runGrantRow's: the lease l of a run's job.
const runGrantColumns = `l.token AS lease_token, l.expires_at AS lease_expires_at, l.released_at AS lease_released_at,
	l.revoked_at IS NOT NULL AS lease_revoked`

// runGrantRow is, beside a run read for the run history, its job's lease
// as the read saw it: its grant's token, expiry and end. All NULL when the
// read did not join the lease.
type runGrantRow struct {
	LeaseToken      sql.NullInt64 `db:"lease_token"`
	LeaseExpiresAt  sql.NullInt64 `db:"lease_expires_at"`
	LeaseReleasedAt sql.NullInt64 `db:"lease_released_at"`
	LeaseRevoked    sql.NullBool  `db:"lease_revoked"`
}

// lease is g as leaseapi.Run.ShowExpiry needs it, its state at now; nil
// without a lease.
func (g *runGrantRow) lease(now int64) *leaseapi.Lease {
	if !g.LeaseToken.Valid {
		return nil
	}
	l := leaseapi.Lease{Token: g.LeaseToken.Int64, ExpiresAt: fromMs(g.LeaseExpiresAt.Int64), ReleasedAt: fromNullMs(g.LeaseReleasedAt)}
	l.SetState(g.LeaseRevoked.Bool, fromMs(now))
	return &l
}

// runsOf are rows, runs of jobID, as the domain sees them beside the
// job's lease cur at now (leaseapi.Run.ShowExpiry).
func runsOf(jobID string, rows []runRow, cur *leaseRow, now int64) []leaseapi.Run {
	lease := cur.lease(now)
	runs := make([]leaseapi.Run, len(rows))
	for i, r := range rows {
		runs[i] = leaseapi.Run{
			JobID:       jobID,
			Token:       r.Token.Int64,
			Owner:       r.Owner.String,
			Tick:        fromNullMs(r.Tick),
			StartedAt:   fromNullMs(r.StartedAt),
			RevokedBy:   r.RevokedBy.String,
			EndedAt:     fromNullMs(r.EndedAt),
			Outcome:     leaseapi.Outcome(r.Outcome),
			Trigger:     leaseapi.Trigger(r.Trigger),
			TriggeredBy: r.TriggeredBy.String,
			Group:       r.GroupName.String,
			Slot:        int(r.Slot.Int64),
			SlotToken:   r.SlotToken.Int64,
			GroupFull:   r.GroupFull,
		}
		runs[i].ShowExpiry(&lease)
	}
	return runs
}

// Runs returns a job's run history. See leaseapi.Store.
func (s *Store) Runs(ctx context.Context, jobID string, limit int) ([]leaseapi.Run, error) {
	if err := (&leaseapi.RunsParams{JobID: jobID, Limit: limit}).Validate(); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("runs %q", jobID)
	return transact(ctx, s, op, s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) ([]leaseapi.Run, error) {
		var runs []leaseapi.Run
		cur, err := selectLease(ctx, tx, jobID)
		if err != nil {
			return nil, err
		}
		var rows []runRow
		if err := tx.SelectContext(ctx, &rows, runsQuery, jobID, limit); err != nil {
			return nil, err
		}
		runs = runsOf(jobID, rows, &cur, now)
		return runs, nil
	})
}

// pruneRunsQuery deletes one batch of finished runs that ended
// before $1, oldest first, through the partial index on ended_at.
const pruneRunsQuery = `
DELETE FROM runs WHERE id IN (
	SELECT id FROM runs
	WHERE ended_at IS NOT NULL AND ended_at < $1
	ORDER BY ended_at
	LIMIT $2
)`

// PruneRuns deletes one batch of old finished runs. See leaseapi.Store.
func (s *Store) PruneRuns(ctx context.Context, retention time.Duration, batch int) (int64, error) {
	if err := leaseapi.ValidatePrune(retention, batch); err != nil {
		return 0, err
	}
	return transact(ctx, s, "prune runs", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (int64, error) {
		res, err := tx.ExecContext(ctx, pruneRunsQuery, now-retention.Milliseconds(), batch)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}
