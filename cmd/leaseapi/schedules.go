package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/schedule"
)

// How much of the store warnFastSchedules reads at start, and how many job
// ids its line names.
const (
	fastSchedulesPage    = 1000
	fastSchedulesTimeout = 10 * time.Second
	fastSchedulesNamed   = 20
)

// warnFastSchedules logs once, at start, the jobs whose stored schedule
// ticks more often than minTTL: stored before the rule that a job cannot
// run more often than its smallest lease, or before LEASEAPI_MIN_TTL was
// raised. They keep running: an acquire that sends the stored spec is
// granted, another fast spec is refused. The
// scan is bounded by fastSchedulesTimeout; a store it could not finish
// reading is said so, not an error.
func warnFastSchedules(ctx context.Context, s leaseapi.Store, minTTL time.Duration, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, fastSchedulesTimeout)
	defer cancel()
	gaps := make(map[string]time.Duration) // per spec, parsed once
	var (
		named    []string
		count    int
		complete = true
		after    string
	)
	for {
		page, err := s.List(ctx, &leaseapi.ListParams{After: after, Limit: fastSchedulesPage})
		if err != nil {
			complete = false
			logger.Warn("could not read every job's schedule at start", slog.Any("error", err))
			break
		}
		for _, l := range page.Leases {
			if l.Schedule == "" {
				continue
			}
			gap, ok := gaps[l.Schedule]
			if !ok {
				if sched, err := schedule.ParseStored(l.Schedule); err == nil {
					gap = sched.MinGap()
				}
				gaps[l.Schedule] = gap
			}
			if gap > 0 && gap < minTTL {
				count++
				if len(named) < fastSchedulesNamed {
					named = append(named, l.JobID)
				}
			}
		}
		if !page.More || len(page.Leases) == 0 {
			break
		}
		after = page.Leases[len(page.Leases)-1].JobID
	}
	if count == 0 {
		return
	}
	logger.Warn("jobs whose stored schedule ticks more often than the smallest lease keep running on it; a new or changed "+
		"schedule must tick at least "+key("MIN_TTL")+" apart",
		slog.String("min_ttl", minTTL.String()), slog.Int("count", count), slog.Any("job_ids", named),
		slog.Bool("all_jobs_read", complete))
}
