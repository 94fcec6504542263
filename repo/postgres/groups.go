package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// Concurrency groups. A grant in a group is written in a transaction that
// first takes the group row's lock, then reads the group's slots and their
// holders with a new snapshot (so that every grant committed before the
// lock is seen), decides (decide.PlanAcquire with the group's facts), and
// writes the lease, its run, the slot and the group's last slot token. A
// group_full refusal is decided on an unlocked read first and writes
// nothing; only a grant that looks possible takes the lock.

const (
	// groupColumns are the columns of a group's row readGroups scans.
	groupColumns = `name, "limit", slot_token, created_by, created_at`
	// groupRowQuery reads group $1's row.
	groupRowQuery = `SELECT ` + groupColumns + ` FROM groups WHERE name = $1`
	// groupLockQuery is groupRowQuery under the row's lock.
	groupLockQuery = groupRowQuery + ` FOR NO KEY UPDATE`
	// groupsPageQuery reads a page of groups after $2 whose names start
	// with $1, $3 of them.
	groupsPageQuery = `SELECT ` + groupColumns + ` FROM groups WHERE name > $2 AND starts_with(name, $1) ORDER BY name LIMIT $3`
	// groupSlotsQuery reads the slots of the groups $1 with what decides
	// whether each is in use (decide.SlotInUse): the current grant of its
	// job, and the clock.
	groupSlotsQuery = `
SELECT s.group_name, s.slot, s.job_id, s.job_token, s.slot_token, s.revoked_until,
	l.token, l.owner, l.expires_at, l.released_at, l.revoked_at IS NOT NULL, clock_timestamp()
FROM group_slots AS s LEFT JOIN leases AS l ON l.job_id = s.job_id
WHERE s.group_name = ANY($1::text[])
ORDER BY s.group_name, s.slot`
	// groupClockQuery reads the clock for a group with no slot row.
	groupClockQuery = `SELECT clock_timestamp()`
	// takeSlotQuery records that the grant of job $4 with token $5 took
	// slot $2 of group $1 with slot token $3.
	takeSlotQuery = `
WITH g AS (UPDATE groups SET slot_token = $3 WHERE name = $1)
INSERT INTO group_slots (group_name, slot, job_id, job_token, slot_token) VALUES ($1, $2, $4, $5, $3)
ON CONFLICT (group_name, slot) DO UPDATE SET (job_id, job_token, slot_token, revoked_until) =
	(EXCLUDED.job_id, EXCLUDED.job_token, EXCLUDED.slot_token, NULL)`
)

// querier runs statements on the pool or in a transaction.
type querier interface {
	QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row
	QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error)
	SelectContext(ctx context.Context, dest any, query string, args ...any) error
}

// readGroup reads group name's facts on q, under the group row's lock
// when lock is set. An unknown group is the acquire's invalid group.
func readGroup(ctx context.Context, q querier, name string, lock bool) (decide.GroupFacts, error) {
	query := groupRowQuery
	if lock {
		query = groupLockQuery
	}
	gs, err := readGroups(ctx, q, query, name)
	if err != nil {
		return decide.GroupFacts{}, err
	}
	if len(gs) == 0 {
		return decide.GroupFacts{}, leaseapi.UnknownGroup(name)
	}
	return gs[0], nil
}

// readGroups reads the group rows query selects (groupColumns) on q, then
// the slots of them all with one statement, read after the rows (under
// their locks, if query takes any), at one instant of the clock.
func readGroups(ctx context.Context, q querier, query string, args ...any) ([]decide.GroupFacts, error) {
	rows, err := q.QueryxContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var gs []decide.GroupFacts
	for rows.Next() {
		var g decide.GroupFacts
		if err := rows.Scan(&g.Name, &g.Limit, &g.SlotToken, &g.CreatedBy, &g.CreatedAt); err != nil {
			rows.Close()
			return nil, err
		}
		g.CreatedAt = g.CreatedAt.UTC()
		gs = append(gs, g)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil || len(gs) == 0 {
		return nil, err
	}
	names := make([]string, len(gs))
	index := make(map[string]*decide.GroupFacts, len(gs))
	for i := range gs {
		names[i], index[gs[i].Name] = gs[i].Name, &gs[i]
	}
	if rows, err = q.QueryxContext(ctx, groupSlotsQuery, pq.Array(names)); err != nil {
		return nil, err
	}
	defer rows.Close()
	var now time.Time
	for rows.Next() {
		var group string
		var s decide.SlotFacts
		var revokedUntil, expires, released sql.NullTime
		var token sql.NullInt64
		var owner sql.NullString
		var revoked sql.NullBool
		if err := rows.Scan(&group, &s.Slot, &s.JobID, &s.JobToken, &s.SlotToken, &revokedUntil,
			&token, &owner, &expires, &released, &revoked, &now); err != nil {
			return nil, err
		}
		s.RevokedUntil = nullTime(revokedUntil)
		if token.Valid {
			h := leaseapi.Lease{JobID: s.JobID, Token: token.Int64, Owner: owner.String, ExpiresAt: expires.Time.UTC(),
				ReleasedAt: nullTime(released)}
			h.SetState(revoked.Bool, now)
			s.Holder = &h
		}
		g := index[group]
		g.Slots = append(g.Slots, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if now.IsZero() {
		if err := q.QueryRowxContext(ctx, groupClockQuery).Scan(&now); err != nil {
			return nil, err
		}
	}
	for i := range gs {
		gs[i].Now = now
	}
	return gs, nil
}

// writeInGroup decides and writes a grant of a in its group (the plan of
// the first decision NeedsGroup) on the lease row read.
func (p *Store) writeInGroup(ctx context.Context, a *leaseapi.AcquireParams, row *readRow, found bool, group string) (acquireOutcome, error) {
	g, err := bounded(ctx, func(ctx context.Context) (decide.GroupFacts, error) { return readGroup(ctx, p.db, group, false) })
	if err != nil {
		return failedRead(err)
	}
	if p.groupFacts != nil {
		p.groupFacts(&g)
	}
	if d, err := p.decide(a, row, found, &g); err != nil || d.refused != nil || d.stale {
		return d.acquireOutcome, err
	}
	return bounded(ctx, func(ctx context.Context) (acquireOutcome, error) {
		var o acquireOutcome
		err := p.inTx(ctx, func(tx *sqlx.Tx) error {
			var err error
			o, err = p.grantInGroup(ctx, tx, a, row, found, group)
			return err
		})
		return o, err
	})
}

// grantInGroup decides and writes, in tx, a grant of a in group on the
// lease row read: it takes the group's lock, reads its slots, decides
// again with them and, when the plan is still a grant, writes it and the
// slot it takes. An unknown group or a refusal is the outcome's refusal.
func (p *Store) grantInGroup(ctx context.Context, tx *sqlx.Tx, a *leaseapi.AcquireParams, row *readRow, found bool, group string) (acquireOutcome, error) {
	g, err := readGroup(ctx, tx, group, true)
	if err != nil {
		return failedRead(err)
	}
	if p.groupFacts != nil {
		p.groupFacts(&g)
	}
	d, err := p.decide(a, row, found, &g)
	if err != nil || d.refused != nil || d.stale {
		return d.acquireOutcome, err
	}
	o, err := p.write(ctx, tx, &d.plan, row.Version)
	if err != nil || !o.written {
		return o, err
	}
	_, err = tx.ExecContext(ctx, takeSlotQuery, d.plan.Group, d.plan.Slot, d.plan.SlotToken, d.plan.JobID, d.plan.Token)
	return o, err
}

// failedRead is the outcome of a group read that failed with err: the
// acquire's refusal when err is its answer (an unknown group), else the
// failure.
func failedRead(err error) (acquireOutcome, error) {
	if isRefusal(err) {
		return acquireOutcome{refused: err}, nil
	}
	return acquireOutcome{}, err
}

// PutGroup creates a group or changes its limit. See leaseapi.Grouping.
func (p *Store) PutGroup(ctx context.Context, gp *leaseapi.PutGroupParams) (leaseapi.Group, error) {
	if err := gp.Validate(); err != nil {
		return leaseapi.Group{}, err
	}
	op := fmt.Sprintf("put group %q", gp.Name)
	g, err := bounded(ctx, func(ctx context.Context) (leaseapi.Group, error) {
		if _, err := p.db.ExecContext(ctx, `INSERT INTO groups (name, "limit", created_by) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET "limit" = EXCLUDED."limit" WHERE groups."limit" <> EXCLUDED."limit"`,
			gp.Name, gp.Limit, gp.By); err != nil {
			return leaseapi.Group{}, err
		}
		f, err := readGroup(ctx, p.db, gp.Name, false)
		return f.Group(), err
	})
	if err != nil {
		return leaseapi.Group{}, interpretError(op, err)
	}
	return g, nil
}

// Group returns one group. See leaseapi.Grouping.
func (p *Store) Group(ctx context.Context, name string) (leaseapi.Group, error) {
	if err := leaseapi.ValidateGroupName("name", name); err != nil {
		return leaseapi.Group{}, err
	}
	op := fmt.Sprintf("get group %q", name)
	g, err := bounded(ctx, func(ctx context.Context) (leaseapi.Group, error) {
		f, err := readGroup(ctx, p.db, name, false)
		return f.Group(), err
	})
	var invalid *leaseapi.InvalidError
	if errors.As(err, &invalid) {
		return leaseapi.Group{}, fmt.Errorf("%s: %w", op, leaseapi.ErrNotFound)
	}
	if err != nil {
		return leaseapi.Group{}, interpretError(op, err)
	}
	return g, nil
}

// Groups returns a page of groups. See leaseapi.Grouping.
func (p *Store) Groups(ctx context.Context, lp *leaseapi.GroupListParams) (leaseapi.GroupPage, error) {
	if err := lp.Validate(); err != nil {
		return leaseapi.GroupPage{}, err
	}
	page, err := bounded(ctx, func(ctx context.Context) (leaseapi.GroupPage, error) {
		gs, err := readGroups(ctx, p.db, groupsPageQuery, lp.Prefix, lp.After, lp.Limit+1)
		if err != nil {
			return leaseapi.GroupPage{}, err
		}
		var page leaseapi.GroupPage
		if len(gs) > lp.Limit {
			gs, page.More = gs[:lp.Limit], true
		}
		for i := range gs {
			page.Groups = append(page.Groups, gs[i].Group())
		}
		return page, nil
	})
	if err != nil {
		return leaseapi.GroupPage{}, interpretError("list groups", err)
	}
	return page, nil
}

// deleteGroupQuery deletes group $1 unless a job is in it, and names one
// such job.
const deleteGroupQuery = `
WITH member AS (SELECT job_id FROM leases WHERE group_name = $1 ORDER BY job_id LIMIT 1),
deleted AS (DELETE FROM groups WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM member) RETURNING name)
SELECT (SELECT count(*) FROM deleted), (SELECT job_id FROM member)`

// DeleteGroup deletes a group no job is in. See leaseapi.Grouping.
func (p *Store) DeleteGroup(ctx context.Context, name string) error {
	if err := leaseapi.ValidateGroupName("name", name); err != nil {
		return err
	}
	op := fmt.Sprintf("delete group %q", name)
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		var deleted int
		var member sql.NullString
		if err := p.db.QueryRowxContext(ctx, deleteGroupQuery, name).Scan(&deleted, &member); err != nil {
			var pqErr *pq.Error
			if errors.As(err, &pqErr) && pqErr.Code == "23503" { // a job joined meanwhile
				return struct{}{}, &leaseapi.GroupInUseError{Group: name}
			}
			return struct{}{}, err
		}
		switch {
		case member.Valid:
			return struct{}{}, &leaseapi.GroupInUseError{Group: name, JobID: member.String}
		case deleted == 0:
			return struct{}{}, leaseapi.ErrNotFound
		}
		return struct{}{}, nil
	})
	var inUse *leaseapi.GroupInUseError
	switch {
	case errors.As(err, &inUse):
		return err
	case errors.Is(err, leaseapi.ErrNotFound):
		return fmt.Errorf("%s: %w", op, err)
	case err != nil:
		return interpretError(op, err)
	}
	return nil
}

// leaveGroupQuery takes job $1 out of its group.
const leaveGroupQuery = `UPDATE leases SET group_name = NULL WHERE job_id = $1 RETURNING ` + leaseColumns

// LeaveGroup takes a job out of its group. See leaseapi.Grouping.
func (p *Store) LeaveGroup(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("leave group %q", jobID)
	row, err := bounded(ctx, func(ctx context.Context) (leaseRow, error) {
		var row leaseRow
		err := p.db.QueryRowxContext(ctx, leaveGroupQuery, jobID).Scan(row.fields()...)
		return row, err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return leaseapi.Lease{}, fmt.Errorf("%s: %w", op, leaseapi.ErrNotFound)
	}
	if err != nil {
		return leaseapi.Lease{}, interpretError(op, err)
	}
	return row.toLease(), nil
}
