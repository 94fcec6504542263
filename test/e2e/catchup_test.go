package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api/client"
)

// TestCatchUpEndToEnd: replicas run a job every 2 s with catch-up latest;
// every replica is killed across several ticks, which are recorded missed,
// and the job owes the newest of them. Three replicas come back: exactly
// one of them runs that tick once (trigger catch-up), then the schedule
// runs as usual; an operator's trigger runs once on one of them; no tick
// is granted twice. A catch-up run after the first one is only for a tick
// missed after that run started (the replicas were still starting).
func TestCatchUpEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("skipping the end-to-end test in -short mode")
	}
	const (
		grace = 300 * time.Millisecond
		sweep = 300 * time.Millisecond
		ttl   = 2 * time.Second
		job   = "catch-up-report"
	)
	bin, procs, baseURL, c := startSweepingService(t, "leaseapi-catch-up", grace, sweep)
	args := []string{"-api", baseURL, "-ttl", ttl.String(), "-heartbeat", "300ms", "-request-timeout", "1s",
		"-work", "100ms", "-log-level", "warn", "-catch-up", "1m", "-owed-poll", "200ms",
		"-job", job + "=*/2 * * * * *"}
	startReplicas := func(round int) []*process {
		var ps []*process
		for i := range 3 {
			owner := fmt.Sprintf("catch-up-replica-%d-%d", round, i)
			ps = append(ps, procs.start(owner, filepath.Join(bin, "cronreplica"), append(slices.Clone(args), "-owner", owner)))
		}
		return ps
	}
	reps := startReplicas(1)
	waitAllJobsRan(t, c, []string{job})
	if l := getLease(t, c, job); l.CatchUp != client.LeaseCatchUpLatest || l.CatchUpWindowMs != time.Minute.Milliseconds() {
		t.Fatalf("the replicas' catch-up policy is not registered: %q %d", l.CatchUp, l.CatchUpWindowMs)
	}

	for _, p := range reps {
		p.signal(syscall.SIGKILL)
	}
	t.Logf("killed every replica at %s", time.Now().Format("15:04:05.000"))
	var owed time.Time
	poll(t, "three missed ticks, the newest owed", 45*time.Second, func() bool {
		l := getLease(t, c, job)
		if l.OwedTick != nil {
			owed = *l.OwedTick
		}
		return l.MissedTicks >= 3 && l.OwedTick != nil && l.OwedReason != nil && *l.OwedReason == client.LeaseOwedReasonCatchUp &&
			owed.Equal(newestMissed(t, c, job))
	})

	backAt := time.Now()
	reps = startReplicas(2)
	poll(t, "the catch-up tick ran and a scheduled tick after it", 45*time.Second, func() bool {
		l := getLease(t, c, job)
		return l.OwedTick == nil && l.LastCompletedTick != nil && l.LastCompletedTick.After(backAt) && len(catchUpRuns(t, c, job)) > 0
	})

	// An operator's run now: one of the three replicas runs it, once.
	trig, err := c.TriggerJobWithResponse(context.Background(), job, nil, client.TriggerRequest{})
	if err != nil || trig.JSON200 == nil || trig.JSON200.OwedTick == nil {
		t.Fatalf("trigger: %v %v", err, trig)
	}
	manual := *trig.JSON200.OwedTick
	poll(t, "the manual tick ran", 45*time.Second, func() bool {
		for _, r := range allRuns(t, c, job) {
			if r.Trigger == client.RunTriggerManual && r.Tick != nil && r.Tick.Equal(manual) && r.Outcome == client.RunOutcomeSucceeded {
				return true
			}
		}
		return false
	})
	for _, p := range reps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range reps {
		if err := p.wait(15 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", p.name, err)
		}
	}
	if resp, err := c.ForgetScheduleWithResponse(context.Background(), job); err != nil || resp.JSON200 == nil {
		t.Fatalf("forget the schedule: %v %v", err, resp)
	}

	runs := allRuns(t, c, job)
	granted := map[time.Time]int{}
	for _, r := range runs {
		if r.Token != nil && r.Tick != nil {
			if granted[*r.Tick]++; granted[*r.Tick] > 1 {
				t.Errorf("tick %s was granted twice", r.Tick)
			}
		}
	}
	manuals := 0
	for _, r := range runs {
		if r.Trigger == client.RunTriggerManual {
			manuals++
			if r.Token == nil || r.Tick == nil || !r.Tick.Equal(manual) {
				t.Errorf("manual run %+v: want a grant of the triggered tick %s", r, manual)
			}
		}
	}
	if manuals != 1 {
		t.Errorf("the triggered tick ran %d times, want once", manuals)
	}
	ups := catchUpRuns(t, c, job)
	first := ups[0]
	if first.Outcome != client.RunOutcomeSucceeded || first.StartedAt == nil || first.StartedAt.Before(backAt) {
		t.Fatalf("the catch-up run %+v: want succeeded, started after the replicas came back at %s", first, backAt)
	}
	// The sweep went on while the replicas started, so the owed tick may
	// have moved to a tick missed since.
	if missed := missedTicks(t, c, job); !missed[*first.Tick] || first.Tick.Before(owed) {
		t.Errorf("the catch-up run is of tick %s, want a missed tick no older than the one owed during the outage, %s", first.Tick, owed)
	}
	for i, r := range ups[1:] {
		if prev := ups[i]; !r.Tick.After(*prev.StartedAt) {
			t.Errorf("a second catch-up run %+v for a tick missed before the catch-up run %+v started", r, prev)
		}
	}
	t.Logf("catch-up: %d run(s), the first of tick %s started %s after the replicas came back",
		len(ups), first.Tick.Format("15:04:05.000"), first.StartedAt.Sub(backAt).Round(time.Millisecond))
}

// missedTicks are the ticks of job recorded missed.
func missedTicks(t *testing.T, c *client.ClientWithResponses, job string) map[time.Time]bool {
	t.Helper()
	missed := map[time.Time]bool{}
	for _, r := range allRuns(t, c, job) {
		if r.Outcome == client.RunOutcomeMissed && r.Tick != nil {
			missed[*r.Tick] = true
		}
	}
	return missed
}

// newestMissed is the newest tick of job recorded missed.
func newestMissed(t *testing.T, c *client.ClientWithResponses, job string) time.Time {
	t.Helper()
	var newest time.Time
	for tick := range missedTicks(t, c, job) {
		if tick.After(newest) {
			newest = tick
		}
	}
	return newest
}

// catchUpRuns are job's runs with trigger catch-up, oldest first.
func catchUpRuns(t *testing.T, c *client.ClientWithResponses, job string) []client.Run {
	t.Helper()
	var ups []client.Run
	for _, r := range allRuns(t, c, job) {
		if r.Trigger == client.RunTriggerCatchUp && r.StartedAt != nil {
			ups = append(ups, r)
		}
	}
	slices.Reverse(ups) // newest first from the service
	return ups
}
