package metrics

import "context"

// RefreshOnce is one pass of r, for the tests.
func RefreshOnce(ctx context.Context, r *StatsRefresher) error { return r.runOnce(ctx) }
