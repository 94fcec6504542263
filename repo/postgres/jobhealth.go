package postgres

import (
	"context"
	"time"

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
		if err := p.db.SelectContext(ctx, &rows, jobHealthQuery, limit); err != nil {
			return leaseapi.JobHealthPage{}, interpretError("job health", err)
		}
		now := time.Now().UTC()
		if len(rows) > 0 {
			now = time.UnixMilli(rows[0].NowMs).UTC()
		}
		return stores.JobHealthPage(rows, now), nil
	})
}
