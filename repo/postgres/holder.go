package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// A heartbeat and a release are made as an acquire is (acquire.go): the
// job's row is read with the database clock (readQuery, in the batches of
// concurrent reads), the call is decided in Go (decide.PlanHeartbeat,
// decide.Release), and the plan is written by one statement that writes
// only the row version the decision read (xmin) and, for a heartbeat, only
// while the clock is before the grant's expiry as read; concurrent writes
// of different jobs go as one statement (batch.go). A refusal is the read
// alone. When the write finds the row changed, the call reads and decides
// again.

// heartbeatQuery extends the grant read as version $2 by the plan: a TTL
// of $3 ms from the write's clock, which must be before $4, the grant's
// expiry as read.
const heartbeatQuery = `
WITH c AS (SELECT clock_timestamp() AS now)
UPDATE leases AS l SET (renewed_at, expires_at, ttl_ms) = (c.now, c.now + $3::bigint * interval '1 millisecond', $3::bigint)
FROM c
WHERE l.job_id = $1::text AND l.xmin = $2::text::xid AND c.now < $4::timestamptz
RETURNING ` + leaseColumns

// policyDue is what a statement that ends a run writes to the lease's
// policy_due_at: the statement's clock when the job has a policy, so that
// its policy is decided (at once by the release, else by the sweep), and
// otherwise what it was (NULL).
const policyDue = `CASE WHEN l.alert_status IS NOT NULL THEN c.now ELSE l.policy_due_at END`

// releaseQuery ends the grant read as version $2 with outcome $3, $4
// being the last completed tick after it, and closes its run
// (releasedRun).
const releaseQuery = `
WITH c AS (SELECT clock_timestamp() AS now), released AS (
UPDATE leases AS l SET (released_at, expires_at, last_outcome, last_completed_tick, policy_due_at) = (
	c.now, c.now, $3::text, $4::timestamptz, ` + policyDue + `)
FROM c
WHERE l.job_id = $1::text AND l.xmin = $2::text::xid
RETURNING ` + leaseColumns + `
)` + releasedRun + `SELECT * FROM released`

// releasedRun closes the run of a release in the release statement. The
// UPDATE wrote only a row version its snapshot sees (or a newer one that
// still passed its WHERE), so the grant it releases, and that grant's run,
// are in the snapshot. The run is reached through ON CONFLICT on its unique
// key (job_id, token), which always probes that index, rather than through
// a join whose generic plan, made on a fresh database, could scan runs.
// A run that ended already is left as it is.
const releasedRun = `, run AS (
	INSERT INTO runs AS r (job_id, token, owner, tick, started_at, timeline, trigger, triggered_by, outcome, ended_at)
	SELECT job_id, token, owner, tick, acquired_at, timeline, grant_trigger, grant_triggered_by, last_outcome, released_at
	FROM released
	ON CONFLICT (job_id, token) DO UPDATE SET (outcome, ended_at) = (EXCLUDED.outcome, EXCLUDED.ended_at)
	WHERE r.ended_at IS NULL
)
`

// heartbeatCall is a heartbeat's write as the statements take it.
type heartbeatCall struct {
	jobID, version string
	ttlMs          int64
	validUntil     time.Time
}

func (h *heartbeatCall) args() []any { return []any{h.jobID, h.version, h.ttlMs, h.validUntil} }

func heartbeatKey(h *heartbeatCall) string { return h.jobID }

// releaseCall is a release's write as the statements take it.
type releaseCall struct {
	jobID, version, outcome string
	completed               sql.NullTime
}

func (r *releaseCall) args() []any { return []any{r.jobID, r.version, r.outcome, r.completed} }

func releaseKey(r *releaseCall) string { return r.jobID }

// holderAnswer is one read, decision and write of a heartbeat or a
// release: answered (a lease, a refusal or a failure), or not when the
// write found the row changed since the read.
type holderAnswer struct {
	lease    leaseapi.Lease
	err      error
	answered bool
}

// answer is a holderAnswer that answers.
func answer(l leaseapi.Lease, err error) holderAnswer {
	return holderAnswer{lease: l, err: err, answered: true}
}

// untilAnswered makes once (attempt from 1) until it answers,
// acquireAttempts times at most; op names the call (kind, a heartbeat or a
// release, of jobID).
func (p *Store) untilAnswered(ctx context.Context, kind, jobID string, once func(op string, attempt int) holderAnswer) (leaseapi.Lease, error) {
	op := fmt.Sprintf("%s %q", kind, jobID)
	for attempt := 1; attempt <= acquireAttempts; attempt++ {
		if a := once(op, attempt); a.answered {
			return a.lease, a.err
		}
		p.logger.DebugContext(ctx, kind+": the lease changed after the read; deciding again",
			slog.String("job_id", jobID), slog.Int("attempt", attempt))
	}
	return leaseapi.Lease{}, fmt.Errorf("%s: the lease changed between the read and the write at each of %d attempts, nothing was done: %w",
		op, acquireAttempts, leaseapi.ErrUnavailable)
}

// readHeld reads jobID's row for a heartbeat's or a release's decision,
// with concurrent reads when batched.
func (p *Store) readHeld(ctx context.Context, jobID string, batched bool) (readRow, error) {
	if batched {
		row, err := send(ctx, p.reads, p.readShared, &jobID)
		if err != nil {
			return readRow{}, err
		}
		return *row, nil
	}
	return bounded(ctx, func(ctx context.Context) (readRow, error) { return p.readOne(ctx, &jobID) })
}

// readFailed answers a read that returned err.
func readFailed(op string, err error) holderAnswer {
	if errors.Is(err, sql.ErrNoRows) {
		return answer(leaseapi.Lease{}, fmt.Errorf("%s: %w", op, leaseapi.ErrNotFound))
	}
	return answer(leaseapi.Lease{}, interpretError(op, err))
}

// Heartbeat extends a held lease. See leaseapi.Store.
func (p *Store) Heartbeat(ctx context.Context, h *leaseapi.HeartbeatParams) (leaseapi.Lease, error) {
	if err := h.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	return p.untilAnswered(ctx, "heartbeat", h.JobID, func(op string, attempt int) holderAnswer {
		row, err := p.readHeld(ctx, h.JobID, attempt == 1)
		if err != nil {
			return readFailed(op, err)
		}
		call, refused := p.planHeartbeat(h, &row)
		if refused != nil {
			return answer(leaseapi.Lease{}, refused)
		}
		if p.beforeHolderWrite != nil {
			p.beforeHolderWrite()
		}
		written, err := send(ctx, p.heartbeats, p.heartbeatOne, call)
		return heartbeatWritten(op, written, err)
	})
}

// HeartbeatBatch extends each held lease of hs, each decided as Heartbeat
// decides it. See leaseapi.Batching. The reads go in the batches of
// concurrent reads and the writes in those of concurrent heartbeats; a
// heartbeat whose row changed since its read is then made as a single
// Heartbeat.
func (p *Store) HeartbeatBatch(ctx context.Context, hs []*leaseapi.HeartbeatParams) []leaseapi.Answer {
	out := make([]leaseapi.Answer, len(hs))
	var read []int // indexes of hs
	var ids []*string
	for i, h := range hs {
		if out[i].Err = h.Validate(); out[i].Err == nil {
			read, ids = append(read, i), append(ids, &hs[i].JobID)
		}
	}
	rows, errs := sendAll(ctx, p.reads, p.readShared, ids)
	var calls []*heartbeatCall
	var planned []int
	for k, i := range read {
		op := fmt.Sprintf("heartbeat %q", hs[i].JobID)
		if errs[k] != nil {
			out[i].Err = readFailed(op, errs[k]).err
			continue
		}
		call, refused := p.planHeartbeat(hs[i], rows[k])
		if refused != nil {
			out[i].Err = refused
			continue
		}
		calls, planned = append(calls, call), append(planned, i)
	}
	if p.beforeHolderWrite != nil && len(calls) > 0 {
		p.beforeHolderWrite()
	}
	written, errs := sendAll(ctx, p.heartbeats, p.heartbeatOne, calls)
	var wg sync.WaitGroup
	for k, i := range planned {
		a := heartbeatWritten(fmt.Sprintf("heartbeat %q", hs[i].JobID), written[k], errs[k])
		if !a.answered {
			wg.Go(func() { out[i].Lease, out[i].Err = p.Heartbeat(ctx, hs[i]) })
			continue
		}
		out[i].Lease, out[i].Err = a.lease, a.err
	}
	wg.Wait()
	return out
}

// planHeartbeat decides h on row (with the facts the store's rules give
// it, Store.heartbeatFacts): the write, or the refusal.
func (p *Store) planHeartbeat(h *leaseapi.HeartbeatParams, row *readRow) (*heartbeatCall, error) {
	if p.heartbeatFacts != nil {
		p.heartbeatFacts(h, &row.leaseRow)
	}
	plan, err := decide.PlanHeartbeat(h, row.toLease())
	if err != nil {
		return nil, err
	}
	return &heartbeatCall{jobID: h.JobID, version: row.Version, ttlMs: plan.TTL.Milliseconds(), validUntil: plan.ValidUntil}, nil
}

// heartbeatWritten answers a heartbeat's write that returned row, err;
// no row: the row changed since the read, or the grant expired.
func heartbeatWritten(op string, row leaseRow, err error) holderAnswer {
	switch {
	case err == nil:
		return answer(row.toLease(), nil)
	case errors.Is(err, sql.ErrNoRows):
		return holderAnswer{}
	}
	return answer(leaseapi.Lease{}, interpretError(op, err))
}

// heartbeatOne makes one heartbeat's write with the single statement.
func (p *Store) heartbeatOne(ctx context.Context, h *heartbeatCall) (leaseRow, error) {
	var row leaseRow
	err := p.scanPrepared(ctx, heartbeatQuery, h.args(), row.fields()...)
	return row, err
}

// Release ends the holder's grant. See leaseapi.Store.
func (p *Store) Release(ctx context.Context, r *leaseapi.ReleaseParams) (leaseapi.Lease, error) {
	if err := r.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	return p.untilAnswered(ctx, "release", r.JobID, func(op string, attempt int) holderAnswer {
		row, err := p.readHeld(ctx, r.JobID, attempt == 1)
		if err != nil {
			return readFailed(op, err)
		}
		cur := row.toLease()
		echo, completed, err := decide.Release(r, cur)
		switch {
		case err != nil:
			return answer(leaseapi.Lease{}, err)
		case echo:
			return answer(p.releaseEcho(ctx, op, r, cur))
		}
		if p.beforeHolderWrite != nil {
			p.beforeHolderWrite()
		}
		call := &releaseCall{jobID: r.JobID, version: row.Version, outcome: string(r.Outcome), completed: nullableTime(completed)}
		written, err := send(ctx, p.releases, p.releaseOne, call)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return holderAnswer{}
		case err != nil:
			return answer(leaseapi.Lease{}, interpretError(op, err))
		}
		return answer(p.released(ctx, r, written.toLease()), nil)
	})
}

// releaseEcho answers the holder's retry of a release already made, cur
// as read: with replicated durability, read again so that the answer
// waits until the release is durable (durableEcho).
func (p *Store) releaseEcho(ctx context.Context, op string, r *leaseapi.ReleaseParams, cur leaseapi.Lease) (leaseapi.Lease, error) {
	if p.echo == getQuery {
		return cur, nil
	}
	cur, err := bounded(ctx, func(ctx context.Context) (leaseapi.Lease, error) { return p.echoGet(ctx, r.JobID) })
	if err != nil {
		return leaseapi.Lease{}, fmt.Errorf("%s: %w", op, err)
	}
	if echo, _, _ := decide.Release(r, cur); !echo {
		return leaseapi.Lease{}, &leaseapi.ConflictError{Err: leaseapi.ErrLeaseLost, Lease: cur}
	}
	return cur, nil
}

// released tells the observer of the run the release l ended and decides
// the job's policy now, if it has one; should that fail, the release's
// mark leaves it due for the sweep. The answer stays the released grant,
// with what the decision shows of the job's policy: the decision runs in a
// transaction of its own, and the lease it reads may already be another's
// grant.
func (p *Store) released(ctx context.Context, r *leaseapi.ReleaseParams, l leaseapi.Lease) leaseapi.Lease {
	p.observer.RunFinished(r.Outcome, l.ReleasedAt.Sub(l.AcquiredAt))
	if l.AlertStatus != "" {
		shown, ok, err := bounded2(ctx, func(ctx context.Context) (leaseapi.Lease, bool, error) { return p.decidePolicyNow(ctx, r.JobID) })
		if err == nil && ok {
			l.AlertStatus, l.AlertReasons = shown.AlertStatus, shown.AlertReasons
		}
	}
	return l
}

// releaseOne makes one release's write with the single statement.
func (p *Store) releaseOne(ctx context.Context, r *releaseCall) (leaseRow, error) {
	var row leaseRow
	err := p.scanPrepared(ctx, releaseQuery, r.args(), row.fields()...)
	return row, err
}
