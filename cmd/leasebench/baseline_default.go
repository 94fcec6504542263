//go:build !leasebench

package main

import (
	"context"
	"errors"

	"github.com/leaseapi/leaseapi/repo/postgres"
)

// baselineBuild reports that this build lacks the naive baseline: the
// phases that measure it refuse to start (run).
const baselineBuild = false

// openFloor opens the served store; the naive baseline needs a -tags
// leasebench build (baseline_leasebench.go).
func openFloor(ctx context.Context, cfg postgres.Config, naive bool) (*postgres.Store, error) {
	if naive {
		return nil, errors.New("the naive baseline needs a -tags leasebench build")
	}
	return postgres.Open(ctx, cfg)
}
