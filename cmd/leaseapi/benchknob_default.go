//go:build !leasebench

package main

// naiveAcquire reports whether this process serves the benchmark's
// baseline acquire. A production build never does: only a binary built with
// -tags leasebench has the knob (benchknob_leasebench.go).
func naiveAcquire() bool { return false }
