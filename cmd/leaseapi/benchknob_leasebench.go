//go:build leasebench

package main

import "os"

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
// `leaseapi -h` and not in the README's table.
func naiveAcquire() bool { return os.Getenv(naiveAcquireEnv) == "naive" }
