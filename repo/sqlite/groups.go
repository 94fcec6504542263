package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// Concurrency groups: a grant in a group is decided under the write lock
// with the group's slots and their holders read in the same transaction
// (decide.PlanAcquire with decide.GroupFacts).

const (
	groupRowQuery   = `SELECT name, "limit", slot_token, created_by, created_at FROM groups WHERE name = $1`
	groupSlotsQuery = `
SELECT s.slot, s.job_id, s.job_token, s.slot_token, s.revoked_until,
	l.token, l.owner, l.expires_at, l.released_at, l.revoked_at IS NOT NULL AS revoked
FROM group_slots AS s LEFT JOIN leases AS l ON l.job_id = s.job_id
WHERE s.group_name = $1
ORDER BY s.slot`
	// takeSlotQuery records that the grant of job $4 with token $5 took
	// slot $2 of group $1 with slot token $3.
	takeSlotQuery = `
INSERT INTO group_slots (group_name, slot, job_id, job_token, slot_token) VALUES ($1, $2, $4, $5, $3)
ON CONFLICT (group_name, slot) DO UPDATE SET job_id = excluded.job_id, job_token = excluded.job_token,
	slot_token = excluded.slot_token, revoked_until = NULL`
	groupTokenQuery = `UPDATE groups SET slot_token = $2 WHERE name = $1`
	// revokedSlotQuery keeps the slot of job $1's revoked grant (token
	// $2) in use until $3, the expiry it had.
	revokedSlotQuery = `UPDATE group_slots SET revoked_until = $3 WHERE job_id = $1 AND job_token = $2 AND revoked_until IS NULL`
)

// readGroup reads group name's facts in tx at now; an unknown group is
// the acquire's invalid group.
func readGroup(ctx context.Context, tx *sqlx.Tx, name string, now int64) (decide.GroupFacts, error) {
	g := decide.GroupFacts{Now: fromMs(now)}
	var created int64
	err := tx.QueryRowxContext(ctx, groupRowQuery, name).Scan(&g.Name, &g.Limit, &g.SlotToken, &g.CreatedBy, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return g, leaseapi.UnknownGroup(name)
	}
	if err != nil {
		return g, err
	}
	g.CreatedAt = fromMs(created)
	rows, err := tx.QueryxContext(ctx, groupSlotsQuery, name)
	if err != nil {
		return g, err
	}
	defer rows.Close()
	for rows.Next() {
		var s decide.SlotFacts
		var revokedUntil, token, expires, released sql.NullInt64
		var owner sql.NullString
		var revoked sql.NullBool
		if err := rows.Scan(&s.Slot, &s.JobID, &s.JobToken, &s.SlotToken, &revokedUntil,
			&token, &owner, &expires, &released, &revoked); err != nil {
			return g, err
		}
		s.RevokedUntil = fromNullMs(revokedUntil)
		if token.Valid {
			h := leaseapi.Lease{JobID: s.JobID, Token: token.Int64, Owner: owner.String, ExpiresAt: fromMs(expires.Int64),
				ReleasedAt: fromNullMs(released)}
			h.SetState(revoked.Bool, g.Now)
			s.Holder = &h
		}
		g.Slots = append(g.Slots, s)
	}
	return g, rows.Err()
}

// takeSlot records the slot plan's grant took.
func takeSlot(ctx context.Context, tx *sqlx.Tx, plan *decide.AcquirePlan) error {
	if _, err := tx.ExecContext(ctx, takeSlotQuery, plan.Group, plan.Slot, plan.SlotToken, plan.JobID, plan.Token); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, groupTokenQuery, plan.Group, plan.SlotToken)
	return err
}

// PutGroup creates a group or changes its limit. See leaseapi.Grouping.
func (s *Store) PutGroup(ctx context.Context, p *leaseapi.PutGroupParams) (leaseapi.Group, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.Group{}, err
	}
	op := fmt.Sprintf("put group %q", p.Name)
	return transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Group, error) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO groups (name, "limit", created_by, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE SET "limit" = excluded."limit"`, p.Name, p.Limit, p.By, now); err != nil {
			return leaseapi.Group{}, err
		}
		g, err := readGroup(ctx, tx, p.Name, now)
		return g.Group(), err
	})
}

// Group returns one group. See leaseapi.Grouping.
func (s *Store) Group(ctx context.Context, name string) (leaseapi.Group, error) {
	if err := leaseapi.ValidateGroupName("name", name); err != nil {
		return leaseapi.Group{}, err
	}
	op := fmt.Sprintf("get group %q", name)
	return transact(ctx, s, op, s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Group, error) {
		g, err := readGroup(ctx, tx, name, now)
		var invalid *leaseapi.InvalidError
		if errors.As(err, &invalid) {
			return leaseapi.Group{}, leaseapi.ErrNotFound
		}
		return g.Group(), err
	})
}

// Groups returns a page of groups. See leaseapi.Grouping.
func (s *Store) Groups(ctx context.Context, p *leaseapi.GroupListParams) (leaseapi.GroupPage, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.GroupPage{}, err
	}
	return transact(ctx, s, "list groups", s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.GroupPage, error) {
		var names []string
		if err := tx.SelectContext(ctx, &names, `SELECT name FROM groups WHERE name > $2 AND substr(name, 1, length($1)) = $1
ORDER BY name LIMIT $3`, p.Prefix, p.After, p.Limit+1); err != nil {
			return leaseapi.GroupPage{}, err
		}
		var page leaseapi.GroupPage
		if len(names) > p.Limit {
			names, page.More = names[:p.Limit], true
		}
		for _, name := range names {
			g, err := readGroup(ctx, tx, name, now)
			if err != nil {
				return leaseapi.GroupPage{}, err
			}
			page.Groups = append(page.Groups, g.Group())
		}
		return page, nil
	})
}

// DeleteGroup deletes a group no job is in. See leaseapi.Grouping.
func (s *Store) DeleteGroup(ctx context.Context, name string) error {
	if err := leaseapi.ValidateGroupName("name", name); err != nil {
		return err
	}
	op := fmt.Sprintf("delete group %q", name)
	_, err := transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (struct{}, error) {
		var member string
		err := tx.GetContext(ctx, &member, `SELECT job_id FROM leases WHERE group_name = $1 ORDER BY job_id LIMIT 1`, name)
		if err == nil {
			return struct{}{}, &leaseapi.GroupInUseError{Group: name, JobID: member}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return struct{}{}, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM group_slots WHERE group_name = $1`, name); err != nil {
			return struct{}{}, err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM groups WHERE name = $1`, name)
		if err != nil {
			return struct{}{}, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return struct{}{}, cmp.Or(err, leaseapi.ErrNotFound)
		}
		return struct{}{}, nil
	})
	return err
}

// LeaveGroup takes a job out of its group. See leaseapi.Grouping.
func (s *Store) LeaveGroup(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("leave group %q", jobID)
	return transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		var row leaseRow
		err := tx.GetContext(ctx, &row, `UPDATE leases SET group_name = NULL WHERE job_id = $1 RETURNING `+leaseColumns, jobID)
		if errors.Is(err, sql.ErrNoRows) {
			return leaseapi.Lease{}, leaseapi.ErrNotFound
		}
		return row.lease(now), err
	})
}
