//go:build leasebench

package main

import (
	"context"
	"os"

	"github.com/leaseapi/leaseapi/repo/postgres"
)

// naiveAcquireEnv selects, in a benchmark build, the baseline that
// cmd/leasebench compares the served acquire with.
const naiveAcquireEnv = "LEASEAPI_BENCH_ACQUIRE"

// naiveAcquire reports whether LEASEAPI_BENCH_ACQUIRE=naive asks for the
// benchmark's baseline: every Postgres acquire takes the row lock and
// commits, and nothing is coalesced. cmd/leasebench builds leaseapi with
// -tags leasebench to measure the served path against it.
//
// Reading the environment here, outside config.go, is deliberate: the knob
// must not exist in any other build, so it is no setting of Config, not in
// `leaseapi -h` and not in docs/operating.md's table.
func naiveAcquire() bool { return os.Getenv(naiveAcquireEnv) == "naive" }

// openPostgres opens the Postgres store the service serves, or the
// benchmark's baseline when naiveAcquire asks for it (postgres.OpenNaive,
// which exists only in a -tags leasebench build).
func openPostgres(ctx context.Context, cfg postgres.Config) (*postgres.Store, error) {
	if naiveAcquire() {
		return postgres.OpenNaive(ctx, cfg)
	}
	return postgres.Open(ctx, cfg)
}
