package main

import (
	"testing"

	"github.com/leaseapi/leaseapi"
)

// stubStore is a leaseapi.Store that is only compared, never called.
type stubStore struct{ leaseapi.Store }

// TestAcquireStore checks the wiring of LEASEAPI_ACQUIRE_MODE: the default
// fast mode serves the store behind the acquire coalescer, the naive mode
// serves the store itself and selects the naive Postgres acquire.
func TestAcquireStore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode      string
		wantNaive bool
	}{
		{mode: "fast", wantNaive: false},
		{mode: "Fast", wantNaive: false},
		{mode: "naive", wantNaive: true},
		{mode: "NAIVE", wantNaive: true},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			cfg := validConfig()
			cfg.AcquireMode = tt.mode
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if got := naiveAcquire(cfg); got != tt.wantNaive {
				t.Errorf("naiveAcquire(%q) = %v, want %v", tt.mode, got, tt.wantNaive)
			}
			s := &stubStore{}
			got := acquireStore(cfg, s)
			if served := got == leaseapi.Store(s); served != tt.wantNaive {
				t.Errorf("acquireStore(%q) serves the store itself = %v, want %v (fast mode wraps it in the coalescer)", tt.mode, served, tt.wantNaive)
			}
		})
	}
}
