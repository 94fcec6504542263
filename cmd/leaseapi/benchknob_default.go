//go:build !leasebench

package main

import (
	"context"

	"github.com/leaseapi/leaseapi/repo/postgres"
)

// naiveAcquire reports whether this process serves the benchmark's
// baseline acquire. A production build never does: only a binary built with
// -tags leasebench has the knob (benchknob_leasebench.go).
func naiveAcquire() bool { return false }

// openPostgres opens the Postgres store the service serves.
func openPostgres(ctx context.Context, cfg postgres.Config) (*postgres.Store, error) {
	return postgres.Open(ctx, cfg)
}
