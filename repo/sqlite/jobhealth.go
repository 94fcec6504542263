package sqlite

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// jobHealthQuery is stores.JobHealthSQL at the store's clock ($1, Unix
// milliseconds, the unit every time is stored in).
var jobHealthQuery = stores.JobHealthSQL{
	Now:   `$1`,
	Never: `-9223372036854775808`,
	Limit: `$2`,
	Ms:    func(expr string) string { return expr },
}.Query()

// JobHealth reads the health of the first jobs. See leaseapi.Store.
func (s *Store) JobHealth(ctx context.Context, limit int) (leaseapi.JobHealthPage, error) {
	if err := leaseapi.ValidateJobHealthLimit(limit); err != nil {
		return leaseapi.JobHealthPage{}, err
	}
	return transact(ctx, s, "job health", s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.JobHealthPage, error) {
		var rows []stores.JobHealthRow
		if err := tx.SelectContext(ctx, &rows, jobHealthQuery, now, limit); err != nil {
			return leaseapi.JobHealthPage{}, err
		}
		return stores.JobHealthPage(rows, fromMs(now)), nil
	})
}
