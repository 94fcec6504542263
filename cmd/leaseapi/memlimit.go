package main

import (
	"errors"
	"log/slog"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// setMemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) to
// 90% of the container's memory limit (its cgroup), so that under load the
// garbage collector works harder before the kernel's OOM killer would end
// the process: GOGC alone lets the heap double. GOMEMLIMIT in the
// environment wins; AUTOMEMLIMIT=off turns this off and AUTOMEMLIMIT=0.8
// sets another ratio. Without a cgroup limit (or without cgroups) nothing
// changes. These are runtime settings, like GOMAXPROCS, so they are read
// from the environment here and are not part of Config.
func setMemoryLimit(logger *slog.Logger, limit memlimit.Provider) {
	noCgroupIsNoLimit := func() (uint64, error) {
		n, err := limit()
		if errors.Is(err, memlimit.ErrNoCgroup) || errors.Is(err, memlimit.ErrCgroupsNotSupported) {
			return 0, memlimit.ErrNoLimit
		}
		return n, err
	}
	_, _ = memlimit.Set(memlimit.WithProvider(noCgroupIsNoLimit), memlimit.WithLogger(logger)) // Set logs its errors
}
