package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/groupcommit"
	"github.com/leaseapi/leaseapi/migrations"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// Store is the lease store on PostgreSQL; the database clock is the only
// clock. An acquire, a heartbeat, a release and a revocation read the row,
// decide in Go and write conditionally (acquire.go, holder.go). Concurrent
// reads, grants, heartbeats and releases of different jobs share one
// statement per kind (batch.go).
type Store struct {
	db         *sqlx.DB
	guard      *guard     // of every connection (guard.go)
	durability Durability // when writes may be acknowledged (replication.go)
	migrations *goose.Provider
	logger     *slog.Logger
	observer   leaseapi.Observer
	// q are the hot statements, chosen once when the store opens.
	q statementSet
	// echo reads the state a call found already there, the answer it
	// acknowledges: getQuery with local durability, q.durableEcho with
	// replicated durability.
	echo string

	stmtsMu sync.Mutex
	stmts   map[string]*sqlx.Stmt // the hot statements by text; see prepared

	// reads, grants, releases and heartbeats group concurrent calls of
	// different jobs into one statement (batch.go); nil when batching is
	// off.
	reads      *batcher[string, *readRow]
	grants     *batcher[grantCall, writtenRow]
	releases   *batcher[releaseCall, leaseRow]
	heartbeats *batcher[heartbeatCall, leaseRow]

	// naive makes every acquire lock the row and commit (variant.naive).
	naive bool
	// facts, when not nil, changes the row an acquire is decided on
	// before the decision: a chaos mutant's wrong fact (mutants_chaos.go).
	facts func(*leaseapi.AcquireParams, *leaseRow)
	// heartbeatFacts, when not nil, changes the row a heartbeat is
	// decided on: a chaos mutant's wrong fact.
	heartbeatFacts func(*leaseapi.HeartbeatParams, *leaseRow)
	// groupFacts, when not nil, changes the group a grant in it is
	// decided on: a chaos mutant's wrong fact.
	groupFacts func(*decide.GroupFacts)
	// maxAhead is the lead a tick may have on the database clock.
	maxAhead time.Duration
	// beforeAcquireWrite, when not nil, is called between an acquire's
	// read and its write, so that a test can change the row in between;
	// it is set only by tests.
	beforeAcquireWrite func()
	// beforeHolderWrite, when not nil, is called between a heartbeat's or
	// a release's read and its write; it is set only by tests.
	beforeHolderWrite func()
	// beforeSweepWrite, when not nil, is called between a sweep's read
	// and its write (decideJobs), so that a test can change the rows in
	// between; it is set only by tests.
	beforeSweepWrite func()
}

var _ leaseapi.Store = (*Store)(nil)

// Config configures Open.
type Config struct {
	// DSN is a lib/pq connection string or URL. Unless it sets them,
	// statement_timeout, lock_timeout, idle_in_transaction_session_timeout
	// and connect_timeout get bounded defaults.
	DSN    string
	Logger *slog.Logger
	// MaxOpenConns bounds the pool; 0 means 20.
	MaxOpenConns int
	// Observer is told of the events the metrics count; nil tells nobody.
	Observer leaseapi.Observer
	// Durability is when a write may be acknowledged; "" means
	// DurabilityLocal. With DurabilityReplicated every statement answers
	// ErrUnavailable until CheckReplication found the primary durable.
	Durability Durability
	// MaxTickAhead is how far past the database clock a tick may lie: an
	// acquire or trigger of a later tick is refused with a
	// *leaseapi.TickAheadError. 0 means leaseapi.DefaultMaxTickAhead.
	MaxTickAhead time.Duration
}

// migrationsTable is goose's version table.
const migrationsTable = "leaseapi_migrations"

// Open opens a connection pool. It neither connects nor migrates: call
// Migrate, and Ready to check the database.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return open(ctx, cfg, variant{})
}

// variant is how a store for a benchmark's baseline or a test's control
// differs from the served one; the zero variant is the served store. Only
// a -tags leasebench build (bench_leasebench.go) and the tests
// (export_test.go) open another.
type variant struct {
	// naive makes every acquire take the row lock and commit, even a
	// losing one (naiveAcquire), to measure the fast path; it implies
	// unbatched.
	naive bool
	// unbatched makes every acquire, heartbeat and release a statement of
	// its own, never grouped with concurrent ones (batch.go).
	unbatched bool
}

func open(ctx context.Context, cfg Config, v variant) (*Store, error) {
	if cfg.DSN == "" {
		return nil, errors.New("open postgres: empty DSN")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	durability := cfg.Durability
	if durability == "" {
		durability = DurabilityLocal
	}
	if _, err := ParseDurability(string(durability)); err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	connector, err := newPostgresConnector(cfg.DSN, durability)
	if err != nil {
		return nil, err
	}
	maxOpen := cfg.MaxOpenConns
	if maxOpen <= 0 {
		maxOpen = 20
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "postgres")
	db.SetMaxOpenConns(maxOpen)
	db.SetMaxIdleConns(maxOpen)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(30 * time.Minute)

	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open postgres: migration lock: %w", err)
	}
	provider, err := goose.NewProvider(database.DialectPostgres, db.DB, migrations.Postgres(),
		goose.WithSessionLocker(locker),
		goose.WithTableName(migrationsTable),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open postgres: migrations: %w", err)
	}
	q := statements()
	echo := getQuery
	if durability == DurabilityReplicated {
		echo = q.durableEcho
	}
	p := &Store{db: db, guard: connector.g, durability: durability, migrations: provider, logger: logger, q: q, echo: echo,
		observer: stores.OrNoObserver(cfg.Observer), stmts: make(map[string]*sqlx.Stmt), maxAhead: stores.MaxTickAhead(cfg.MaxTickAhead),
		naive: v.naive, facts: q.facts, heartbeatFacts: q.heartbeatFacts, groupFacts: q.groupFacts}
	if durability == DurabilityReplicated {
		p.refuse(&leaseapi.RefusedError{Reason: "replicated durability: the primary's replication has not been checked yet"})
	}
	if !v.naive && !v.unbatched {
		p.reads = &batcher[string, *readRow]{Key: readKey, Max: maxReadBatch, Run: p.readBatch, Single: p.readShared}
		p.grants = &batcher[grantCall, writtenRow]{Key: grantKey, Max: maxBatch, Run: p.grantBatch, Single: p.grantOne}
		p.releases = &batcher[releaseCall, leaseRow]{Key: releaseKey, Max: maxBatch, Run: p.releaseBatch, Single: p.releaseOne}
		p.heartbeats = &batcher[heartbeatCall, leaseRow]{Key: heartbeatKey, Max: maxBatch, Run: p.heartbeatBatch, Single: p.heartbeatOne}
	}
	return p, nil
}

// Migrate applies pending migrations under a Postgres advisory lock, so that
// several instances starting at once apply each migration exactly once.
func (p *Store) Migrate(ctx context.Context) error {
	// Not refused with replicated durability: a migration lost in a
	// failover is applied again, and the store must be able to start.
	results, err := p.migrations.Up(bypassGuard(ctx))
	if err != nil {
		return interpretError("migrate", err)
	}
	created := false
	for _, r := range results {
		p.logger.InfoContext(ctx, "migration applied",
			slog.Int64("version", r.Source.Version), slog.String("file", r.Source.Path),
			slog.Duration("duration", r.Duration))
		created = created || r.Source.Version == 1
	}
	if created {
		// This call made the database from nothing: no older build ever
		// served it, so it starts finalized at this build's level. Only
		// the call that applied the first migration gets here (goose's
		// session lock).
		if _, err := p.db.ExecContext(bypassGuard(ctx), raiseFeatureLevelQuery, leaseapi.FeatureLevel); err != nil {
			return interpretError("migrate: feature level", err)
		}
	}
	return nil
}

// Ready returns nil when the database answers and no migration is pending.
func (p *Store) Ready(ctx context.Context) error {
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		pending, err := p.migrations.HasPending(ctx)
		if err != nil {
			return struct{}{}, interpretError("ready", err)
		}
		if pending {
			return struct{}{}, &leaseapi.RefusedError{Reason: "database migrations are pending (run leaseapi migrate)"}
		}
		return struct{}{}, nil
	})
	return err
}

const synchronousCommitQuery = `SHOW synchronous_commit`

// SynchronousCommit returns the server's synchronous_commit setting. With
// it off, a crash can lose acknowledged grants and with them tokens.
func (p *Store) SynchronousCommit(ctx context.Context) (string, error) {
	return bounded(ctx, func(ctx context.Context) (string, error) {
		var v string
		if err := p.db.GetContext(ctx, &v, synchronousCommitQuery); err != nil {
			return "", interpretError("show synchronous_commit", err)
		}
		return v, nil
	})
}

// Close closes the pool. It does not wait for calls that bounded gave up on.
func (p *Store) Close() error {
	p.stmtsMu.Lock()
	errs := []error{p.migrations.Close()}
	for q, s := range p.stmts {
		errs = append(errs, s.Close())
		delete(p.stmts, q)
	}
	p.stmtsMu.Unlock()
	return errors.Join(append(errs, p.db.Close())...)
}

// scanPrepared runs a hot statement that returns one row and scans it into
// dest, prepared once per connection (planning it costs more than running
// it) and scanned into explicit targets (no reflection per row).
func (p *Store) scanPrepared(ctx context.Context, query string, args []any, dest ...any) error {
	stmt, err := p.prepared(ctx, query)
	if err != nil {
		return err
	}
	return stmt.QueryRowContext(ctx, args...).Scan(dest...)
}

// prepared returns query prepared on the pool: database/sql prepares it on
// each connection the first time that connection runs it, and again on a
// new connection after a reconnect. It is prepared on first use, not when
// the store opens, because the tables exist only after Migrate. A failed
// prepare is not remembered, so the next call tries again.
func (p *Store) prepared(ctx context.Context, query string) (*sqlx.Stmt, error) {
	p.stmtsMu.Lock()
	stmt, ok := p.stmts[query]
	p.stmtsMu.Unlock()
	if ok {
		return stmt, nil
	}
	// Prepared without the lock, so that a slow database holds up only the
	// callers that wait for it; a concurrent first use may prepare twice.
	stmt, err := p.db.PreparexContext(ctx, query)
	if err != nil {
		return nil, err
	}
	p.stmtsMu.Lock()
	defer p.stmtsMu.Unlock()
	if existing, ok := p.stmts[query]; ok {
		_ = stmt.Close()
		return existing, nil
	}
	p.stmts[query] = stmt
	return stmt, nil
}

// leaseRow is a leases row plus the database clock read with it; the state
// and the visible last outcome are computed from both by toLease.
type leaseRow struct {
	JobID             string         `db:"job_id"`
	Owner             string         `db:"owner"`
	Token             int64          `db:"token"`
	Tick              sql.NullTime   `db:"tick"`
	TTLMs             int64          `db:"ttl_ms"`
	AcquiredAt        time.Time      `db:"acquired_at"`
	RenewedAt         time.Time      `db:"renewed_at"`
	ExpiresAt         time.Time      `db:"expires_at"`
	ReleasedAt        sql.NullTime   `db:"released_at"`
	RevokedAt         sql.NullTime   `db:"revoked_at"`
	LastCompletedTick sql.NullTime   `db:"last_completed_tick"`
	LastOutcome       sql.NullString `db:"last_outcome"`
	Schedule          sql.NullString `db:"schedule"`
	GraceMs           sql.NullInt64  `db:"grace_ms"`
	PausedAt          sql.NullTime   `db:"paused_at"`
	PausedBy          sql.NullString `db:"paused_by"`
	PausedReason      sql.NullString `db:"paused_reason"`
	MissedTicks       int64          `db:"missed_ticks"`
	SkippedTicks      int64          `db:"skipped_ticks"`
	RevokedBy         sql.NullString `db:"revoked_by"`
	Timeline          sql.NullInt64  `db:"timeline"`
	CatchUp           string         `db:"catch_up"`
	CatchUpWindowMs   int64          `db:"catch_up_window_ms"`
	OwedTick          sql.NullTime   `db:"owed_tick"`
	OwedReason        sql.NullString `db:"owed_reason"`
	OwedUntil         sql.NullTime   `db:"owed_until"`
	// GrantTrigger and GrantTriggeredBy are what started the current
	// grant, which its run records (grantedRun).
	GrantTrigger     string         `db:"grant_trigger"`
	GrantTriggeredBy sql.NullString `db:"grant_triggered_by"`
	// OwedBy is who triggered the manual tick the job owes; ScheduleSince,
	// NextTick and DecideAt the schedule's registration (decide.Facts).
	OwedBy        sql.NullString `db:"owed_by"`
	ScheduleSince sql.NullTime   `db:"schedule_since"`
	NextTick      sql.NullTime   `db:"next_tick"`
	DecideAt      sql.NullTime   `db:"decide_at"`
	// GroupName is the job's group; Slot and SlotToken the slot its
	// current grant took.
	GroupName sql.NullString `db:"group_name"`
	Slot      sql.NullInt64  `db:"slot"`
	SlotToken sql.NullInt64  `db:"slot_token"`
	// AlertStatus and AlertReasons are where the job's policy stands
	// (NULL without one).
	AlertStatus  sql.NullString `db:"alert_status"`
	AlertReasons string         `db:"alert_reasons"`
	Now          time.Time      `db:"db_now"`
}

// leaseFields are the columns of a lease the store reads, the one list of
// them (leaseRow.fields scans them in this order).
const leaseFields = `job_id, owner, token, tick, ttl_ms, acquired_at, renewed_at, expires_at,
	released_at, revoked_at, last_completed_tick, last_outcome,
	schedule, grace_ms, paused_at, paused_by, paused_reason, missed_ticks, skipped_ticks, revoked_by, timeline,
	catch_up, catch_up_window_ms, owed_tick, owed_reason, owed_until, grant_trigger, grant_triggered_by,
	owed_by, schedule_since, next_tick, decide_at, group_name, slot, slot_token, alert_status, alert_reasons`

// leaseColumns are leaseFields with the database clock, as every lease
// read and RETURNING yields them; db_now is read once per row so state is
// computed against one instant.
const leaseColumns = leaseFields + `, clock_timestamp() AS db_now`

// fields are the scan targets of leaseColumns, in their order.
func (r *leaseRow) jobID() string { return r.JobID }

func (r *leaseRow) fields() []any {
	return []any{&r.JobID, &r.Owner, &r.Token, &r.Tick, &r.TTLMs, &r.AcquiredAt, &r.RenewedAt, &r.ExpiresAt,
		&r.ReleasedAt, &r.RevokedAt, &r.LastCompletedTick, &r.LastOutcome,
		&r.Schedule, &r.GraceMs, &r.PausedAt, &r.PausedBy, &r.PausedReason, &r.MissedTicks, &r.SkippedTicks, &r.RevokedBy, &r.Timeline,
		&r.CatchUp, &r.CatchUpWindowMs, &r.OwedTick, &r.OwedReason, &r.OwedUntil, &r.GrantTrigger, &r.GrantTriggeredBy,
		&r.OwedBy, &r.ScheduleSince, &r.NextTick, &r.DecideAt, &r.GroupName, &r.Slot, &r.SlotToken, &r.AlertStatus, &r.AlertReasons, &r.Now}
}

func (r *leaseRow) toLease() leaseapi.Lease {
	l := leaseapi.Lease{
		JobID:             r.JobID,
		Owner:             r.Owner,
		Token:             r.Token,
		Timeline:          r.Timeline.Int64,
		AcquiredAt:        r.AcquiredAt.UTC(),
		RenewedAt:         r.RenewedAt.UTC(),
		ExpiresAt:         r.ExpiresAt.UTC(),
		ReleasedAt:        nullTime(r.ReleasedAt),
		TTL:               time.Duration(r.TTLMs) * time.Millisecond,
		Tick:              nullTime(r.Tick),
		LastCompletedTick: nullTime(r.LastCompletedTick),
		LastOutcome:       leaseapi.Outcome(r.LastOutcome.String),
		Schedule:          r.Schedule.String,
		Grace:             time.Duration(r.GraceMs.Int64) * time.Millisecond,
		PausedAt:          nullTime(r.PausedAt),
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
	stores.SetOwed(&l, nullTime(r.OwedTick), r.OwedReason.String, nullTime(r.OwedUntil), r.Now)
	if r.RevokedAt.Valid {
		l.RevokedBy = r.RevokedBy.String
	}
	l.SetState(r.RevokedAt.Valid, r.Now)
	stores.SetNextTick(&l, r.Now.UTC())
	return l
}

func nullTime(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

func nullableTime(t *time.Time) sql.NullTime {
	if t == nil {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: *t, Valid: true}
}

// send makes call c through batcher b when the store batches (b keeps c's
// deadline by itself), else, or when c's batch statement failed, alone
// with one under bounded.
func send[P, R any](ctx context.Context, b *batcher[P, R], one func(context.Context, *P) (R, error), c *P) (R, error) {
	if b != nil {
		r, err := b.Do(ctx, c)
		if !errors.Is(err, groupcommit.ErrBatchFailed) {
			return r, err
		}
	}
	return bounded(ctx, func(ctx context.Context) (R, error) { return one(ctx, c) })
}

// sendAll makes the calls cs as send makes each, queued together.
func sendAll[P, R any](ctx context.Context, b *batcher[P, R], one func(context.Context, *P) (R, error), cs []*P) ([]R, []error) {
	rows, errs := make([]R, len(cs)), make([]error, len(cs))
	if b != nil {
		rows, errs = b.DoAll(ctx, cs)
	}
	for i, c := range cs {
		if b == nil || errors.Is(errs[i], groupcommit.ErrBatchFailed) {
			rows[i], errs[i] = bounded(ctx, func(ctx context.Context) (R, error) { return one(ctx, c) })
		}
	}
	return rows, errs
}

// revokeQuery force-releases the held grant read as version $5 (token $7)
// with the token $2 of WAL timeline $3 (decide.TokenAfter), so that the
// old holder's token is stale, and closes its run as revoked by $4; $6 is
// when that grant expires.
const revokeQuery = `
WITH c AS (SELECT clock_timestamp() AS now), lease AS (
UPDATE leases AS l SET (token, timeline, revoked_at, expires_at, last_outcome, revoked_by) = (
	$2::bigint, $3::bigint, c.now, c.now, 'revoked', $4::text)
FROM c
WHERE l.job_id = $1::text AND l.xmin = $5::text::xid AND c.now < $6::timestamptz AND ` + walTimeline + ` = $3::bigint
RETURNING ` + leaseColumns + `
), run AS (
	UPDATE runs AS r SET (outcome, ended_at, revoked_by) = ('revoked', lease.revoked_at, lease.revoked_by)
	FROM lease WHERE r.job_id = lease.job_id AND r.token = $7::bigint AND r.outcome = 'running'
)` + revokedSlot + `SELECT * FROM lease`

// revokedSlot keeps the slot of the grant the lease CTE revoked (job
// token $7) in use until $6, the expiry that grant had: its holder may
// run until its next heartbeat.
const revokedSlot = `, slot AS (
	UPDATE group_slots AS s SET revoked_until = $6::timestamptz
	FROM lease WHERE s.job_id = lease.job_id AND s.job_token = $7::bigint AND s.revoked_until IS NULL
)
`

// Revoke force-releases a held lease. See leaseapi.Store.
func (p *Store) Revoke(ctx context.Context, rp *leaseapi.RevokeParams) (leaseapi.Lease, error) {
	if err := rp.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	jobID, op := rp.JobID, fmt.Sprintf("revoke %q", rp.JobID)
	by := sql.NullString{String: rp.By, Valid: rp.By != ""}
	for attempt := 1; attempt <= acquireAttempts; attempt++ {
		l, written, err := bounded2(ctx, func(ctx context.Context) (leaseapi.Lease, bool, error) {
			cur, err := p.readOne(ctx, &jobID)
			if errors.Is(err, sql.ErrNoRows) {
				return leaseapi.Lease{}, false, leaseapi.ErrNotFound
			}
			if err != nil {
				return leaseapi.Lease{}, false, err
			}
			if cur.toLease().State != leaseapi.StateHeld {
				l, err := p.echoGet(ctx, jobID) // not held: unchanged
				return l, true, err
			}
			var row leaseRow
			err = p.scanPrepared(ctx, revokeQuery, []any{jobID, decide.TokenAfter(cur.Token, cur.WALTimeline), cur.WALTimeline, by,
				cur.Version, cur.ExpiresAt, cur.Token}, row.fields()...)
			if errors.Is(err, sql.ErrNoRows) {
				return leaseapi.Lease{}, false, nil // changed since the read
			}
			if err != nil {
				return leaseapi.Lease{}, false, err
			}
			l := row.toLease()
			p.observer.RunFinished(leaseapi.OutcomeRevoked, l.ExpiresAt.Sub(l.AcquiredAt))
			return l, true, nil
		})
		if errors.Is(err, leaseapi.ErrNotFound) {
			return leaseapi.Lease{}, fmt.Errorf("%s: %w", op, err)
		}
		if err != nil {
			return leaseapi.Lease{}, interpretError(op, err)
		}
		if written {
			return l, nil
		}
	}
	return leaseapi.Lease{}, fmt.Errorf("%s: the lease changed between the read and the write at each of %d attempts, nothing was done: %w",
		op, acquireAttempts, leaseapi.ErrUnavailable)
}

// bounded2 is bounded for a function of two results.
func bounded2[T, U any](ctx context.Context, fn func(context.Context) (T, U, error)) (T, U, error) {
	type pair struct {
		t T
		u U
	}
	r, err := bounded(ctx, func(ctx context.Context) (pair, error) {
		t, u, err := fn(ctx)
		return pair{t, u}, err
	})
	return r.t, r.u, err
}

const getQuery = `SELECT ` + leaseColumns + ` FROM leases WHERE job_id = $1`

// Get returns one lease. See leaseapi.Store.
func (p *Store) Get(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.Lease{}, err
	}
	l, err := p.boundedGet(ctx, jobID)
	if err != nil {
		return leaseapi.Lease{}, fmt.Errorf("get %q: %w", jobID, err)
	}
	return l, nil
}

// boundedGet reads one lease within ctx's deadline (bounded).
func (p *Store) boundedGet(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	return bounded(ctx, func(ctx context.Context) (leaseapi.Lease, error) { return p.get(ctx, jobID) })
}

func (p *Store) get(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	row, err := p.getRow(ctx, jobID)
	if err != nil {
		return leaseapi.Lease{}, err
	}
	return row.toLease(), nil
}

// echoGet reads jobID's lease as the answer to a call that found it as it
// asked (Store.echo): with replicated durability, once it is durable.
func (p *Store) echoGet(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	row, err := p.echoGetRow(ctx, jobID)
	if err != nil {
		return leaseapi.Lease{}, err
	}
	return row.toLease(), nil
}

// echoGetRow is echoGet's row, with the clock it was read at.
func (p *Store) echoGetRow(ctx context.Context, jobID string) (leaseRow, error) {
	var row leaseRow
	err := p.scanPrepared(ctx, p.echo, []any{jobID}, row.fields()...)
	if errors.Is(err, sql.ErrNoRows) {
		return leaseRow{}, leaseapi.ErrNotFound
	}
	if err != nil {
		return leaseRow{}, interpretError("read lease", err)
	}
	return row, nil
}

// getRow reads jobID's row with the clock it was read at, or ErrNotFound.
func (p *Store) getRow(ctx context.Context, jobID string) (leaseRow, error) {
	var row leaseRow
	err := p.scanPrepared(ctx, getQuery, []any{jobID}, row.fields()...)
	if errors.Is(err, sql.ErrNoRows) {
		return leaseRow{}, leaseapi.ErrNotFound
	}
	if err != nil {
		return leaseRow{}, interpretError("read lease", err)
	}
	return row, nil
}

// listQuery reads one keyset page. The clock is read once (the c
// sub-select, which Postgres does not flatten because it is volatile) so
// that every state of the page, and the state filter, use one instant.
// job_id sorts bytewise; every job id character sorts below '~', so
// [prefix, prefix || '~') is exactly the ids that start with prefix. The
// paused and overdue filters (stores.ListFilters) go between listQuery and
// listOrder.
const listQuery = `
SELECT ` + leaseFields + `, c.now AS db_now
FROM (SELECT clock_timestamp() AS now) AS c, leases AS l
WHERE l.job_id > $1::text
	AND ($2::text = '' OR (l.job_id >= $2::text AND l.job_id < $2::text || '~'))
	AND ($3::text = '' OR l.owner = $3::text)
	AND ($4::text = '' OR $4::text = CASE
		WHEN l.revoked_at IS NOT NULL THEN 'revoked'
		WHEN l.released_at IS NOT NULL THEN 'released'
		WHEN l.expires_at > c.now THEN 'held'
		ELSE 'expired' END)`

const listOrder = `
ORDER BY l.job_id
LIMIT $5`

const dbNowQuery = `SELECT clock_timestamp()`

// List returns one page of leases. See leaseapi.Store.
func (p *Store) List(ctx context.Context, lp *leaseapi.ListParams) (leaseapi.LeasePage, error) {
	if err := lp.Validate(); err != nil {
		return leaseapi.LeasePage{}, err
	}
	return bounded(ctx, func(ctx context.Context) (leaseapi.LeasePage, error) {
		var rows []leaseRow
		err := p.db.SelectContext(ctx, &rows, listQuery+stores.ListFilters(lp)+listOrder,
			lp.After, lp.Prefix, lp.Owner, string(lp.State), lp.Limit+1)
		if err != nil {
			return leaseapi.LeasePage{}, interpretError("list leases", err)
		}
		page := leaseapi.LeasePage{Leases: make([]leaseapi.Lease, 0, min(len(rows), lp.Limit))}
		if len(rows) > lp.Limit {
			page.More = true
			rows = rows[:lp.Limit]
		}
		for i := range rows {
			page.Leases = append(page.Leases, rows[i].toLease())
		}
		if len(rows) > 0 {
			page.Now = rows[0].Now.UTC()
		} else {
			if err := p.db.GetContext(ctx, &page.Now, dbNowQuery); err != nil {
				return leaseapi.LeasePage{}, interpretError("list leases", err)
			}
			page.Now = page.Now.UTC()
		}
		return page, nil
	})
}

// runsQuery reads a job's history newest first, each run with the job's
// lease as the read sees it (runGrantRow) and the read's clock, so that a
// run is shown as the domain sees it (leaseapi.Run.ShowExpiry).
const runsQuery = `
SELECT r.id, r.token, r.owner, r.tick, r.started_at, r.ended_at, r.outcome, r.revoked_by, r.trigger, r.triggered_by,
	r.group_name, r.slot, r.slot_token, r.group_full, ` + runGrantColumns + `, c.now AS db_now
FROM leases AS l
	CROSS JOIN (SELECT clock_timestamp() AS now) AS c
	JOIN runs AS r ON r.job_id = l.job_id
WHERE l.job_id = $1
ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
LIMIT $2`

// runGrantColumns are runGrantRow's: the lease l of a run's job.
const runGrantColumns = `l.token AS lease_token, l.expires_at AS lease_expires_at, l.released_at AS lease_released_at,
	l.revoked_at IS NOT NULL AS lease_revoked`

// runGrantRow is, beside a run read for the run history, its job's lease
// as the read saw it: its grant's token, expiry and end. All NULL when the
// read did not join the lease.
type runGrantRow struct {
	LeaseToken      sql.NullInt64 `db:"lease_token"`
	LeaseExpiresAt  sql.NullTime  `db:"lease_expires_at"`
	LeaseReleasedAt sql.NullTime  `db:"lease_released_at"`
	LeaseRevoked    sql.NullBool  `db:"lease_revoked"`
}

// lease is g as leaseapi.Run.ShowExpiry needs it, its state at now; nil
// without a lease.
func (g *runGrantRow) lease(now time.Time) *leaseapi.Lease {
	if !g.LeaseToken.Valid {
		return nil
	}
	l := leaseapi.Lease{Token: g.LeaseToken.Int64, ExpiresAt: g.LeaseExpiresAt.Time.UTC(), ReleasedAt: nullTime(g.LeaseReleasedAt)}
	l.SetState(g.LeaseRevoked.Bool, now)
	return &l
}

type runRow struct {
	ID        int64          `db:"id"`
	Token     sql.NullInt64  `db:"token"`
	Owner     sql.NullString `db:"owner"`
	Tick      sql.NullTime   `db:"tick"`
	StartedAt sql.NullTime   `db:"started_at"`
	EndedAt   sql.NullTime   `db:"ended_at"`
	Outcome   string         `db:"outcome"`
	RevokedBy sql.NullString `db:"revoked_by"`
	// Trigger and TriggeredBy: what started the run.
	Trigger     string         `db:"trigger"`
	TriggeredBy sql.NullString `db:"triggered_by"`
	// GroupName, Slot and SlotToken: the group slot the grant took;
	// GroupFull: a missed tick whose group was full.
	GroupName sql.NullString `db:"group_name"`
	Slot      sql.NullInt64  `db:"slot"`
	SlotToken sql.NullInt64  `db:"slot_token"`
	GroupFull bool           `db:"group_full"`
	// The job's lease and the clock of the read.
	runGrantRow
	Now time.Time `db:"db_now"`
}

// run is the row as the domain sees it, a run of jobID, shown beside the
// job's lease as read (leaseapi.Run.ShowExpiry).
func (r *runRow) run(jobID string) leaseapi.Run {
	run := leaseapi.Run{
		JobID:       jobID,
		Token:       r.Token.Int64,
		Owner:       r.Owner.String,
		Tick:        nullTime(r.Tick),
		StartedAt:   nullTime(r.StartedAt),
		RevokedBy:   r.RevokedBy.String,
		EndedAt:     nullTime(r.EndedAt),
		Outcome:     leaseapi.Outcome(r.Outcome),
		Trigger:     leaseapi.Trigger(r.Trigger),
		TriggeredBy: r.TriggeredBy.String,
		Group:       r.GroupName.String,
		Slot:        int(r.Slot.Int64),
		SlotToken:   r.SlotToken.Int64,
		GroupFull:   r.GroupFull,
	}
	run.ShowExpiry(r.lease(r.Now))
	return run
}

// Runs returns a job's run history. See leaseapi.Store.
func (p *Store) Runs(ctx context.Context, jobID string, limit int) ([]leaseapi.Run, error) {
	if err := (&leaseapi.RunsParams{JobID: jobID, Limit: limit}).Validate(); err != nil {
		return nil, err
	}
	return bounded(ctx, func(ctx context.Context) ([]leaseapi.Run, error) {
		var rows []runRow
		if err := p.db.SelectContext(ctx, &rows, runsQuery, jobID, limit); err != nil {
			return nil, interpretError(fmt.Sprintf("runs %q", jobID), err)
		}
		if len(rows) == 0 {
			// No runs left (pruned) or no such job: tell them apart.
			if _, err := p.get(ctx, jobID); err != nil {
				return nil, fmt.Errorf("runs %q: %w", jobID, err)
			}
		}
		runs := make([]leaseapi.Run, len(rows))
		for i := range rows {
			runs[i] = rows[i].run(jobID)
		}
		return runs, nil
	})
}

// pruneRunsQuery deletes one batch of finished runs past retention. SKIP
// LOCKED lets several instances prune at once without waiting on each other.
const pruneRunsQuery = `
DELETE FROM runs WHERE id IN (
	SELECT id FROM runs
	WHERE ended_at < clock_timestamp() - $1::bigint * interval '1 millisecond'
	ORDER BY ended_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)`

// PruneRuns deletes one batch of old finished runs. See leaseapi.Store.
func (p *Store) PruneRuns(ctx context.Context, retention time.Duration, batch int) (int64, error) {
	if err := leaseapi.ValidatePrune(retention, batch); err != nil {
		return 0, err
	}
	return bounded(ctx, func(ctx context.Context) (int64, error) {
		res, err := p.db.ExecContext(ctx, pruneRunsQuery, retention.Milliseconds(), batch)
		if err != nil {
			return 0, interpretError("prune runs", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, interpretError("prune runs", err)
		}
		return n, nil
	})
}
