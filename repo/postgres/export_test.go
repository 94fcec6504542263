package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// OpenVariant opens a store that differs from the served one as a test's
// control: naive, every acquire takes the row lock and commits (and nothing
// is batched); unbatched, every call is a statement of its own.
func OpenVariant(ctx context.Context, cfg Config, naive, unbatched bool) (*Store, error) {
	return open(ctx, cfg, variant{naive: naive, unbatched: unbatched})
}

// SetBeforeAcquireWrite makes the store call f between an acquire's read
// and its write, so that a test can change the row in between.
func (p *Store) SetBeforeAcquireWrite(f func()) { p.beforeAcquireWrite = f }

// SetBeforeSweepWrite makes the store call f between a sweep's read of the
// due jobs and its write of their decisions (SweepTicks and Resume), so
// that a test can change the rows, or sweep from another store, in between.
func (p *Store) SetBeforeSweepWrite(f func()) { p.beforeSweepWrite = f }

// AcquireAsOneBatch reads the rows of acquires as one batch statement, as
// group commit does when they meet, so that a test knows they went as a
// batch, decides each, calls the beforeAcquireWrite hook once, and writes
// the grants that take over no expired run as one batch statement too (the
// other plans one by one). A call whose write found its row changed is made
// again alone (Acquire: read, decide, write), as the store does. A refused
// call gets a nil lease.
func (p *Store) AcquireAsOneBatch(ctx context.Context, as []*leaseapi.AcquireParams) ([]*leaseapi.Lease, error) {
	if p.reads == nil || p.grants == nil {
		return nil, errors.New("AcquireAsOneBatch: batching is off")
	}
	jobs := make([]*string, len(as))
	for i, a := range as {
		jobs[i] = &a.JobID
	}
	rows, errs, err := p.readBatch(ctx, jobs)
	if err != nil {
		return nil, err
	}
	plans := make([]*decide.AcquirePlan, len(as))
	var grants []*grantCall
	var grantIdx []int
	for i, a := range as {
		found := errs[i] == nil
		if !found {
			rows[i] = new(readRow)
			if err := p.db.QueryRowContext(ctx, clockQuery).Scan(&rows[i].Now, &rows[i].WALTimeline); err != nil {
				return nil, err
			}
		}
		d, err := p.decide(a, rows[i], found, nil)
		if err != nil {
			return nil, err
		}
		if d.refused != nil {
			continue
		}
		plans[i] = &d.plan
		if planQuery(&d.plan) == grantQuery {
			grants = append(grants, &grantCall{plan: &d.plan, version: rows[i].Version})
			grantIdx = append(grantIdx, i)
		}
	}
	if p.beforeAcquireWrite != nil {
		p.beforeAcquireWrite()
	}
	written := make([]bool, len(as))
	out := make([]*leaseapi.Lease, len(as))
	if len(grants) > 0 {
		ws, werrs, err := p.grantBatch(ctx, grants)
		if err != nil {
			return nil, err
		}
		for k, i := range grantIdx {
			written[i] = werrs[k] == nil
			if written[i] {
				l := ws[k].toLease()
				out[i] = &l
			}
		}
	}
	for i, plan := range plans {
		if plan == nil || written[i] || planQuery(plan) == grantQuery {
			continue
		}
		o, err := p.write(ctx, nil, plan, rows[i].Version)
		if err != nil {
			return nil, err
		}
		if o.written {
			out[i], written[i] = &o.lease, true
		}
	}
	for i, plan := range plans {
		if plan == nil || written[i] {
			continue
		}
		l, err := p.Acquire(ctx, as[i])
		if isRefusal(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = &l
	}
	return out, nil
}

// AcquireInTx reads, decides and writes an acquire in tx, so that a test
// can hold the grant's row lock; it fails unless the acquire is granted.
func (p *Store) AcquireInTx(ctx context.Context, tx *sql.Tx, a *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	var row readRow
	if err := tx.QueryRowContext(ctx, readQuery, a.JobID).Scan(row.fields()...); err != nil {
		return leaseapi.Lease{}, err
	}
	d, err := p.decide(a, &row, true, nil)
	if err != nil {
		return leaseapi.Lease{}, err
	}
	if d.refused != nil {
		return leaseapi.Lease{}, d.refused
	}
	o, err := p.write(ctx, tx, &d.plan, row.Version)
	if err != nil {
		return leaseapi.Lease{}, err
	}
	if !o.written {
		return leaseapi.Lease{}, errors.New("AcquireInTx: the row changed")
	}
	return o.lease, nil
}

// ReleaseBatch reads the rows of releases in one statement, decides each
// and sends the writes of the releases decided as one batch statement,
// after the hook SetBeforeHolderWrite set; a release refused or echoed,
// or whose row changed since its read, gets a nil lease.
func (p *Store) ReleaseBatch(ctx context.Context, rs []*leaseapi.ReleaseParams) ([]*leaseapi.Lease, error) {
	jobs := make([]*string, len(rs))
	for i, r := range rs {
		jobs[i] = &r.JobID
	}
	rows, errs, err := p.readBatch(ctx, jobs)
	if err != nil {
		return nil, err
	}
	var calls []*releaseCall
	var idx []int
	for i, r := range rs {
		if errs[i] != nil {
			continue
		}
		echo, completed, err := decide.Release(r, rows[i].toLease())
		if err != nil || echo {
			continue
		}
		calls = append(calls, &releaseCall{jobID: r.JobID, version: rows[i].Version, outcome: string(r.Outcome), completed: nullableTime(completed)})
		idx = append(idx, i)
	}
	if p.beforeHolderWrite != nil {
		p.beforeHolderWrite()
	}
	return p.asOneBatch(len(rs), idx, func() ([]leaseRow, []error, error) { return p.releaseBatch(ctx, calls) })
}

// HeartbeatAsOneBatch reads the rows of hs in one statement, decides each
// and sends the writes of the heartbeats decided as one batch statement,
// after the hook SetBeforeHolderWrite set; a heartbeat refused, or whose
// row changed (or grant expired) since its read, gets a nil lease.
func (p *Store) HeartbeatAsOneBatch(ctx context.Context, hs []*leaseapi.HeartbeatParams) ([]*leaseapi.Lease, error) {
	jobs := make([]*string, len(hs))
	for i, h := range hs {
		jobs[i] = &h.JobID
	}
	rows, errs, err := p.readBatch(ctx, jobs)
	if err != nil {
		return nil, err
	}
	var calls []*heartbeatCall
	var idx []int
	for i, h := range hs {
		if errs[i] != nil {
			continue
		}
		if call, refused := p.planHeartbeat(h, rows[i]); refused == nil {
			calls, idx = append(calls, call), append(idx, i)
		}
	}
	if p.beforeHolderWrite != nil {
		p.beforeHolderWrite()
	}
	return p.asOneBatch(len(hs), idx, func() ([]leaseRow, []error, error) { return p.heartbeatBatch(ctx, calls) })
}

// asOneBatch makes a batch statement of the calls of n at indexes idx
// (none: no statement) and returns each call's lease, nil for a call
// without a row.
func (p *Store) asOneBatch(n int, idx []int, batch func() ([]leaseRow, []error, error)) ([]*leaseapi.Lease, error) {
	out := make([]*leaseapi.Lease, n)
	if len(idx) == 0 {
		return out, nil
	}
	ls, err := batchLeases(batch())
	if err != nil {
		return nil, err
	}
	for k, i := range idx {
		out[i] = ls[k]
	}
	return out, nil
}

// SetBeforeHolderWrite makes the store call f between a heartbeat's or a
// release's read and its write, so that a test can change the row, or let
// the clock pass the grant's expiry, in between.
func (p *Store) SetBeforeHolderWrite(f func()) { p.beforeHolderWrite = f }

// batchLeases is the lease of each row a batch statement answered, nil for
// a call it refused.
func batchLeases(rows []leaseRow, errs []error, err error) ([]*leaseapi.Lease, error) {
	if err != nil {
		return nil, err
	}
	out := make([]*leaseapi.Lease, len(rows))
	for i := range rows {
		if errs[i] != nil {
			continue
		}
		l := rows[i].toLease()
		out[i] = &l
	}
	return out, nil
}

// Setting reads a setting of one of the store's sessions.
func (p *Store) Setting(ctx context.Context, name string) (string, error) {
	var v sql.NullString
	err := p.db.QueryRowContext(ctx, `SELECT current_setting($1, true)`, name).Scan(&v)
	return v.String, err
}

// OpenConnections is the number of connections the store's pool holds.
func (p *Store) OpenConnections() int { return p.db.Stats().OpenConnections }

// BypassGuard lets a test's statement run while replicated durability
// refuses statements.
var BypassGuard = bypassGuard

// NewConnector is the store's connector for dsn with local durability, for
// tests of how a connection attempt fails.
func NewConnector(dsn string) (driver.Connector, error) {
	return newPostgresConnector(dsn, DurabilityLocal)
}

// EchoQuery is the statement the store reads an echo with (Store.echo),
// and GetQuery the plain read, so that a test can tell which was chosen.
func (p *Store) EchoQuery() string { return p.echo }

// GetQuery is the plain read of one lease.
const GetQuery = getQuery

// rewindLeaseQuery, rewindRunsQuery and rewindPolicyQuery move everything
// that happened to job $1 $2 ms earlier: the lease's times, its runs'
// starts and ends (not the ticks they name) and its policy's.
const (
	rewindLeaseQuery = `
UPDATE leases SET (acquired_at, renewed_at, expires_at, released_at, revoked_at, schedule_since, decide_at,
		paused_at, missed_at, owed_until) =
	(acquired_at - d.by, renewed_at - d.by, expires_at - d.by, released_at - d.by, revoked_at - d.by,
		schedule_since - d.by, decide_at - d.by, paused_at - d.by, missed_at - d.by, owed_until - d.by)
FROM (SELECT $2::bigint * interval '1 millisecond' AS by) AS d
WHERE job_id = $1`
	rewindRunsQuery = `
UPDATE runs SET (started_at, ended_at) = (started_at - d.by, ended_at - d.by)
FROM (SELECT $2::bigint * interval '1 millisecond' AS by) AS d
WHERE job_id = $1`
	rewindPolicyQuery = `
WITH d AS (SELECT $2::bigint * interval '1 millisecond' AS by),
l AS (UPDATE leases SET policy_due_at = policy_due_at - d.by FROM d WHERE job_id = $1)
UPDATE job_policies SET (since, alerted_at, updated_at) = (since - d.by, alerted_at - d.by, updated_at - d.by)
FROM d WHERE job_id = $1`
)

// Rewind moves everything that happened to job d earlier, as
// repotest.SweepHarness.Rewind says.
func (p *Store) Rewind(ctx context.Context, jobID string, d time.Duration) error {
	return p.inTx(ctx, func(tx *sqlx.Tx) error {
		for _, q := range []string{rewindLeaseQuery, rewindRunsQuery, rewindPolicyQuery} {
			if _, err := tx.ExecContext(ctx, q, jobID, d.Milliseconds()); err != nil {
				return fmt.Errorf("rewind %q: %w", jobID, err)
			}
		}
		return nil
	})
}

// setGrantTickQuery moves job $1's grant to tick $2 (the lease's and its run's);
// setOwedTickQuery makes it owe the manual tick $2: the marks a replica
// with a fast clock left before ticks ahead were refused.
const (
	setGrantTickQuery = `
WITH l AS (UPDATE leases SET tick = $2 WHERE job_id = $1 RETURNING job_id, token)
UPDATE runs AS r SET tick = $2 FROM l WHERE r.job_id = l.job_id AND r.token = l.token`
	setOwedTickQuery = `
UPDATE leases SET (owed_tick, owed_reason, owed_until) = ($2, 'manual', $2::timestamptz + interval '1 hour')
WHERE job_id = $1`
)

// SetTicks writes ticks ahead of the clock into job's rows, as
// repotest.RepairHarness.SetTicks says.
func (p *Store) SetTicks(ctx context.Context, jobID string, grant, owed *time.Time) error {
	return p.inTx(ctx, func(tx *sqlx.Tx) error {
		if grant != nil {
			if _, err := tx.ExecContext(ctx, setGrantTickQuery, jobID, *grant); err != nil {
				return fmt.Errorf("set tick %q: %w", jobID, err)
			}
		}
		if owed != nil {
			if _, err := tx.ExecContext(ctx, setOwedTickQuery, jobID, *owed); err != nil {
				return fmt.Errorf("set owed tick %q: %w", jobID, err)
			}
		}
		return nil
	})
}

// ReleaseOnly reads, decides and writes a release without deciding the
// job's policy after it, as a release whose instance stopped before that
// decision leaves it.
func (p *Store) ReleaseOnly(ctx context.Context, r *leaseapi.ReleaseParams) (leaseapi.Lease, error) {
	row, err := p.readOne(ctx, &r.JobID)
	if err != nil {
		return leaseapi.Lease{}, err
	}
	_, completed, err := decide.Release(r, row.toLease())
	if err != nil {
		return leaseapi.Lease{}, err
	}
	w, err := p.releaseOne(ctx, &releaseCall{jobID: r.JobID, version: row.Version, outcome: string(r.Outcome), completed: nullableTime(completed)})
	return w.toLease(), err
}
