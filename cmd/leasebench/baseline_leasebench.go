//go:build leasebench

package main

import (
	"context"

	"github.com/leaseapi/leaseapi/repo/postgres"
)

// baselineBuild reports that this build has the naive baseline
// (postgres.OpenNaive), which only a -tags leasebench build has.
const baselineBuild = true

// openFloor opens the store a floor measurement calls directly: the served
// one, or with naive the baseline whose every acquire takes the row lock
// and commits.
func openFloor(ctx context.Context, cfg postgres.Config, naive bool) (*postgres.Store, error) {
	if naive {
		return postgres.OpenNaive(ctx, cfg)
	}
	return postgres.Open(ctx, cfg)
}
