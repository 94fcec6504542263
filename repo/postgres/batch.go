package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/groupcommit"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// Group commit. Each lease statement is a transaction of its own, and with
// synchronous_commit on each one costs a commit, a parse-free but not
// free executor start (locks on the table and its indexes, the CHECK
// constraints and index predicates set up again), a round trip and the
// wake-ups around it; the row work itself is a small part of it
// (docs/performance.md, The lock cycle). So the reads and the grants of
// concurrent acquires of different jobs, concurrent heartbeats and
// concurrent releases, go to the database as one statement of their kind:
// while a batch is at the database, further calls queue; when it returns,
// the queued ones go as the next batch. There is no timer: under
// light load every call goes alone, at once, with the single statement.
//
// Each operation keeps its own answer (a result row per job), its grant and
// run row in the same transaction, and its guarantees: the rows of a batch
// are locked in job id order, so two batches (of this instance or another)
// cannot deadlock; a call whose context ends while it queues is not sent;
// one whose context ends while its batch is at the database returns
// ErrUnavailable (the outcome is unknown, as for a single statement); and
// when a batch statement fails, each of its calls is made again alone, so a
// batch fails no call that would not have failed by itself.

// maxBatch caps the calls of one batch statement that writes.
const maxBatch = 64

// maxReadBatch caps the calls of one batch of reads: a read locks nothing
// and writes nothing, so a batch of 1,000 costs the database little more
// than one of 64, and a batch of acquires (leaseapi.MaxBatchItems) reads
// in one round trip instead of sixteen.
const maxReadBatch = leaseapi.MaxBatchItems

// batcher groups concurrent calls of one kind into batches
// (groupcommit.Batcher). Key names the row a call writes (the statements
// write each row once); Run makes the database call of a batch of two or
// more, Single that of a batch of one. Both return a result for every
// call: a row, or sql.ErrNoRows when the statement returned none for it.
type batcher[P, R any] = groupcommit.Batcher[P, R]

// sortedByKey orders the indexes of params by key, bytewise as job_id
// sorts (COLLATE "C"): the order in which a batch locks its rows.
func sortedByKey[P any](params []*P, key func(*P) string) []int {
	idx := make([]int, len(params))
	for i := range idx {
		idx[i] = i
	}
	// Batches are small; insertion sort keeps this allocation-free.
	for i := 1; i < len(idx); i++ {
		for j := i; j > 0 && key(params[idx[j]]) < key(params[idx[j-1]]); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	return idx
}

// The batch statements take each field of their calls as one array
// parameter (pq.Array), in the order the rows are locked (sortedByKey).
// Ticks (and the clock bounds of a tick's resolution) are sent as RFC 3339
// text, which the statements cast to timestamptz[]: an exact instant,
// whatever the server's DateStyle.

func tickText(t sql.NullTime) sql.NullString {
	return sql.NullString{String: timeText(t.Time), Valid: t.Valid}
}

func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func readKey(jobID *string) string { return *jobID }

// readBatch reads the rows of the jobs of an acquire batch in one
// statement.
func (p *Store) readBatch(ctx context.Context, jobIDs []*string) ([]*readRow, []error, error) {
	jobs := make([]string, len(jobIDs))
	for i, j := range jobIDs {
		jobs[i] = *j
	}
	stmt, err := p.prepared(ctx, batchReadQuery)
	if err != nil {
		return nil, nil, err
	}
	rows, err := stmt.QueryContext(ctx, pq.Array(jobs))
	if err != nil {
		return nil, nil, err
	}
	return batchAnswers[readRow](rows, jobIDs, readKey, "read")
}

// batchReleaseQuery is releaseQuery for many jobs, its parameters those
// of releaseQuery as arrays, in the same order. An UPDATE takes its row
// locks in the order its join yields the rows, which the planner chooses,
// so the rows are locked first, in job id order, by the locked CTE; the
// UPDATE then changes only rows it already holds, and only the row
// versions the decisions read. The runs of the batch are closed by one
// statement, as in releaseQuery.
const batchReleaseQuery = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS i(in_job_id, in_version, in_outcome, in_completed)
), locked AS (
	SELECT l.job_id FROM leases AS l JOIN input AS i ON l.job_id = i.in_job_id
	ORDER BY l.job_id
	FOR NO KEY UPDATE OF l
), c AS (SELECT clock_timestamp() AS now), released AS (
UPDATE leases AS l SET (released_at, expires_at, last_outcome, last_completed_tick, policy_due_at) = (
	c.now, c.now, i.in_outcome, i.in_completed, ` + policyDue + `)
FROM input AS i, c
WHERE l.job_id = i.in_job_id AND l.job_id IN (SELECT job_id FROM locked) AND l.xmin = i.in_version::xid
RETURNING ` + leaseColumns + `
)` + releasedRun + `SELECT * FROM released`

// batchHeartbeatQuery is heartbeatQuery for many jobs, its parameters
// those of heartbeatQuery as arrays, in the same order. The rows are
// locked first, in job id order, as in batchReleaseQuery; a row that
// changed since its read, or whose grant's expiry as read the clock (read
// once for the batch) has reached, is not written.
const batchHeartbeatQuery = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[]) AS i(in_job_id, in_version, in_ttl_ms, in_valid_until)
), locked AS (
	SELECT l.job_id FROM leases AS l JOIN input AS i ON l.job_id = i.in_job_id
	ORDER BY l.job_id
	FOR NO KEY UPDATE OF l
), c AS (SELECT clock_timestamp() AS now)
UPDATE leases AS l SET (renewed_at, expires_at, ttl_ms) = (c.now, c.now + i.in_ttl_ms * interval '1 millisecond', i.in_ttl_ms)
FROM input AS i, c
WHERE l.job_id = i.in_job_id AND l.job_id IN (SELECT job_id FROM locked) AND l.xmin = i.in_version::xid
	AND c.now < i.in_valid_until
RETURNING ` + leaseColumns

// releaseBatch writes the releases of calls in one statement.
func (p *Store) releaseBatch(ctx context.Context, calls []*releaseCall) ([]leaseRow, []error, error) {
	n := len(calls)
	jobs, versions, outcomes, completed := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]sql.NullString, 0, n)
	for _, i := range sortedByKey(calls, releaseKey) {
		r := calls[i]
		jobs, versions, outcomes = append(jobs, r.jobID), append(versions, r.version), append(outcomes, r.outcome)
		completed = append(completed, tickText(r.completed))
	}
	stmt, err := p.prepared(ctx, batchReleaseQuery)
	if err != nil {
		return nil, nil, err
	}
	rows, err := stmt.QueryContext(ctx, pq.Array(jobs), pq.Array(versions), pq.Array(outcomes), pq.Array(completed))
	if err != nil {
		return nil, nil, err
	}
	return values(batchAnswers[leaseRow](rows, calls, releaseKey, "release"))
}

// heartbeatBatch writes the heartbeats of calls in one statement.
func (p *Store) heartbeatBatch(ctx context.Context, calls []*heartbeatCall) ([]leaseRow, []error, error) {
	n := len(calls)
	jobs, versions, ttls, until := make([]string, 0, n), make([]string, 0, n), make([]int64, 0, n), make([]string, 0, n)
	for _, i := range sortedByKey(calls, heartbeatKey) {
		h := calls[i]
		jobs, versions, ttls, until = append(jobs, h.jobID), append(versions, h.version), append(ttls, h.ttlMs), append(until, timeText(h.validUntil))
	}
	stmt, err := p.prepared(ctx, batchHeartbeatQuery)
	if err != nil {
		return nil, nil, err
	}
	rows, err := stmt.QueryContext(ctx, pq.Array(jobs), pq.Array(versions), pq.Array(ttls), pq.Array(until))
	if err != nil {
		return nil, nil, err
	}
	return values(batchAnswers[leaseRow](rows, calls, heartbeatKey, "heartbeat"))
}

// batchAnswers reads the rows of a batched statement into one answer per
// call, matched by job id (a batch holds at most one call per job); a call
// without a row gets sql.ErrNoRows, as its single statement would. It
// closes rows. Each row is scanned into one scratch row, whose Scan
// destinations are made once, and then copied to a row of its own: a read
// batch holds up to 1,000 rows of some 40 columns each.
func batchAnswers[R any, PR interface {
	*R
	fields() []any
	jobID() string
}, C any](rows *sql.Rows, calls []C, key func(C) string, what string) ([]*R, []error, error) {
	defer rows.Close()
	byJob := make(map[string]int, len(calls))
	for i, c := range calls {
		byJob[key(c)] = i
	}
	out := make([]*R, len(calls))
	errs := make([]error, len(calls))
	for i := range errs {
		errs[i] = sql.ErrNoRows
	}
	scratch := new(R)
	dest := PR(scratch).fields()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, err
		}
		job := PR(scratch).jobID()
		i, ok := byJob[job]
		if !ok || errs[i] == nil {
			return nil, nil, fmt.Errorf("batched %s: unexpected row for job %q", what, job)
		}
		r := new(R)
		*r = *scratch
		out[i], errs[i] = r, nil
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return out, errs, nil
}

// values are the rows rs point to (a zero row for nil), for the batches
// whose calls take their rows by value.
func values[R any](rs []*R, errs []error, err error) ([]R, []error, error) {
	if err != nil {
		return nil, nil, err
	}
	out := make([]R, len(rs))
	for i, r := range rs {
		if r != nil {
			out[i] = *r
		}
	}
	return out, errs, nil
}

// grantCall is a grant that takes over no expired run (grantQuery), with
// the row version it was decided on.
type grantCall struct {
	plan    *decide.AcquirePlan
	version string
}

func grantKey(g *grantCall) string { return g.plan.JobID }

// grantOne writes one grant with grantQuery.
func (p *Store) grantOne(ctx context.Context, g *grantCall) (writtenRow, error) {
	var w writtenRow
	err := p.scanPrepared(ctx, grantQuery, planArgs(g.plan, g.version), w.fields()...)
	return w, err
}

// batchGrantQuery is grantQuery for many jobs, its parameters those of
// grantQuery as arrays, in the same order. The rows are locked first, in
// job id order, as in batchReleaseQuery; a row that changed since its
// read (xmin), even while the statement waited for its lock, is not
// written, nor is any row whose plan's ValidUntil the clock has passed or
// whose token was computed for another WAL timeline. The clock and the
// timeline are read once for the batch (c).
const batchGrantQuery = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[], $6::bigint[],
		$7::text[], $8::text[], $9::text[],
		$10::text[], $11::bigint[], $12::timestamptz[], $13::timestamptz[], $14::timestamptz[], $15::text[], $16::bigint[],
		$17::boolean[], $18::text[], $19::timestamptz[], $20::text[], $21::integer[], $22::bigint[]) AS ` + grantInput + `
), locked AS (
	SELECT l.job_id FROM leases AS l JOIN input AS i ON l.job_id = i.in_job_id
	ORDER BY l.job_id
	FOR NO KEY UPDATE OF l
), c AS (SELECT clock_timestamp() AS now, ` + walTimeline + ` AS wal_timeline), lease AS (
UPDATE leases AS l ` + grantSet + `
FROM input AS i, c
WHERE l.job_id = i.in_job_id AND l.job_id IN (SELECT job_id FROM locked) AND ` + grantUnchanged + `
RETURNING ` + leaseColumns + `
)` + startedRun + `SELECT *, NULL::timestamptz, NULL::boolean FROM lease`

// grantBatch writes the grants of calls in one statement. Each call's
// parameters are grantQuery's (planArgs), sent as one array per
// parameter; times go as text (timeText).
func (p *Store) grantBatch(ctx context.Context, calls []*grantCall) ([]writtenRow, []error, error) {
	var cols [][]any
	for _, i := range sortedByKey(calls, grantKey) {
		args := planArgs(calls[i].plan, calls[i].version)
		if cols == nil {
			cols = make([][]any, len(args))
		}
		for k, a := range args {
			if t, ok := a.(sql.NullTime); ok {
				a = tickText(t)
			}
			cols[k] = append(cols[k], a)
		}
	}
	arrays := make([]any, len(cols))
	for k, c := range cols {
		arrays[k] = pq.Array(c)
	}
	stmt, err := p.prepared(ctx, batchGrantQuery)
	if err != nil {
		return nil, nil, err
	}
	rows, err := stmt.QueryContext(ctx, arrays...)
	if err != nil {
		return nil, nil, err
	}
	return values(batchAnswers[writtenRow](rows, calls, grantKey, "grant"))
}
