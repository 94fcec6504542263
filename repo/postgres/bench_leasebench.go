//go:build leasebench

package postgres

import "context"

// OpenNaive opens the benchmark's baseline: every acquire takes the row
// lock and commits, even a losing one (naiveAcquire), and no call is
// batched. cmd/leasebench measures the served store against it; only a
// -tags leasebench build has it, so no production configuration can choose
// it.
func OpenNaive(ctx context.Context, cfg Config) (*Store, error) {
	return open(ctx, cfg, variant{naive: true})
}
