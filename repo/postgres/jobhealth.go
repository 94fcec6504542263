package postgres

import (
	"context"
	"database/sql"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// jobHealthQuery is stores.JobHealthSQL at one instant (c, read once).
var jobHealthQuery = stores.JobHealthSQL{
	With:  `WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now)`,
	Now:   `c.now`,
	From:  `, c`,
	Never: `'-infinity'::timestamptz`,
	Limit: `$1`,
	Ms:    func(expr string) string { return `floor(extract(epoch FROM ` + expr + `) * 1000)::bigint` },
}.Query()

// JobHealth reads the health of the first jobs. See leaseapi.Store.
func (p *Store) JobHealth(ctx context.Context, limit int) (leaseapi.JobHealthPage, error) {
	if err := leaseapi.ValidateJobHealthLimit(limit); err != nil {
		return leaseapi.JobHealthPage{}, err
	}
	return bounded(ctx, func(ctx context.Context) (leaseapi.JobHealthPage, error) {
		var rows []stores.JobHealthRow
		var now time.Time
		err := p.readOnly(ctx, func(tx *sqlx.Tx) error {
			// The planner's cost of 10,000 jobs' subqueries passes
			// jit_above_cost, and compiling them took 2.6 of 3.7 s in
			// docs/performance.md's measurement: the query runs no
			// long scan that JIT would speed up.
			if _, err := tx.ExecContext(ctx, `SET LOCAL jit = off`); err != nil {
				return err
			}
			if err := tx.SelectContext(ctx, &rows, jobHealthQuery, limit); err != nil || len(rows) > 0 {
				return err
			}
			// No job, so no row to carry the clock: read it alone.
			return tx.GetContext(ctx, &now, `SELECT clock_timestamp()`)
		})
		if err != nil {
			return leaseapi.JobHealthPage{}, interpretError("job health", err)
		}
		if len(rows) > 0 {
			now = time.UnixMilli(rows[0].NowMs)
		}
		return stores.JobHealthPage(rows, now.UTC()), nil
	})
}

// readOnly runs fn in a read-only transaction and commits unless fn fails.
func (p *Store) readOnly(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := p.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}
