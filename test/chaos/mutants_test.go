//go:build chaos && chaos_mutants

package chaos

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/internal/checker"
)

// mutant is one negative control of RELIABILITY.md §4: a deliberate bug
// switched on in leaseapi (repo/mutants_chaos.go), a short run with the
// faults that expose it, and the invariants that must catch it (any one).
type mutant struct {
	name  string
	bug   string
	want  []string
	setup func(cfg *runConfig)
}

// at schedules faults at fixed offsets.
func at(evs ...event) func(*runConfig, *rand.Rand) []event {
	return func(*runConfig, *rand.Rand) []event { return evs }
}

var mutants = []mutant{
	{
		name: "M1", bug: "acquire ignores expiry (takes over a held lease)",
		want:  []string{"I2", "I4"},
		setup: func(cfg *runConfig) { cfg.Plan = at() },
	},
	{
		name: "M2", bug: "heartbeat without the owner and token check",
		want: []string{"I3", "I4"},
		setup: func(cfg *runConfig) {
			cfg.Plan = at()
			cfg.ZombieEvery = 250 * time.Millisecond
		},
	},
	{
		name: "M3", bug: "token reuse: a grant after a release keeps the token",
		want:  []string{"I1"},
		setup: func(cfg *runConfig) { cfg.Plan = at() },
	},
	{
		name: "M4", bug: "synchronous_commit=off, then Postgres crashes",
		want: []string{"I1"},
		setup: func(cfg *runConfig) {
			// The WAL writer writes full pages only; an immediate stop loses
			// the unwritten tail of acknowledged commits. The witness commits
			// asynchronously too, or its commits would flush the tail.
			cfg.PGConf = []string{"wal_writer_delay = 10000ms"}
			cfg.WitnessAsync = true
			cfg.Plan = at(
				event{At: 12 * time.Second, Kind: checker.PGCrash, Dur: 300 * time.Millisecond},
				event{At: 19 * time.Second, Kind: checker.PGCrash, Dur: 300 * time.Millisecond},
				event{At: 26 * time.Second, Kind: checker.PGCrash, Dur: 300 * time.Millisecond},
			)
		},
	},
	{
		name: "M5", bug: "expiry decided with the service's clock (+5 s on instance 1)",
		want: []string{"I2"},
		setup: func(cfg *runConfig) {
			cfg.Plan = at()
			cfg.InstanceEnv = map[int][]string{1: {"LEASEAPI_TEST_CLOCK_OFFSET=5s"}}
		},
	},
	{
		// A store call that waits past the request deadline is masked by
		// handlers' own deadline (call), so this mutant removes the
		// deadline altogether, by configuration: the service then waits on
		// a frozen database like lib/pq does.
		name: "M6", bug: "store calls wait past the request deadline on a frozen database",
		want: []string{"I9"},
		setup: func(cfg *runConfig) {
			cfg.Mutant = ""
			cfg.RequestTimeout = time.Minute
			cfg.Plan = at(
				event{At: 10 * time.Second, Kind: checker.PGFreeze, Dur: 5 * time.Second},
				event{At: 20 * time.Second, Kind: checker.PGFreeze, Dur: 5 * time.Second},
			)
		},
	},
	{
		name: "M7", bug: "acquire not idempotent: the holder's retry gets a new token",
		want: []string{"I4", "I8"},
		setup: func(cfg *runConfig) {
			// Answers later than the request deadline: the acquire commits,
			// the caller gets a 503 and retries.
			cfg.Plan = at(
				event{At: 8 * time.Second, Kind: checker.DBLatency, Dur: 8 * time.Second, Target: 0, Latency: 700, Jitter: 500},
				event{At: 8 * time.Second, Kind: checker.DBLatency, Dur: 8 * time.Second, Target: 1, Latency: 700, Jitter: 500},
				event{At: 20 * time.Second, Kind: checker.InstancePause, Dur: 3 * time.Second, Target: 0},
			)
		},
	},
}

// TestMutants runs every mutant and wants it caught (make chaos-mutants).
// CHAOS_MUTANTS (comma-separated names) selects some.
func TestMutants(t *testing.T) {
	only := os.Getenv("CHAOS_MUTANTS")
	var table []string
	for _, m := range mutants {
		if only != "" && !strings.Contains(","+only+",", ","+m.name+",") {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			cfg := prConfig(uint64(time.Now().UnixNano() % (1 << 31)))
			cfg.Name = "mutant-" + m.name
			cfg.Mutant, cfg.Control = m.name, true
			cfg.Duration, cfg.WarmUp, cfg.Jobs = 32*time.Second, 5*time.Second, 10
			cfg.LinearizabilityTimeout = 10 * time.Second
			m.setup(cfg)
			r, art := runChaos(t, cfg)
			var caught []string
			for _, inv := range checker.Invariants {
				if r.Caught(inv) {
					caught = append(caught, inv)
				}
			}
			hit := false
			for _, inv := range m.want {
				hit = hit || r.Caught(inv)
			}
			table = append(table, m.name+" ("+m.bug+"): want "+strings.Join(m.want, "/")+", caught by "+strings.Join(caught, " "))
			if !hit {
				t.Errorf("mutant %s (%s) was not caught by %s; the checkers caught %v; artifacts in %s",
					m.name, m.bug, strings.Join(m.want, " or "), caught, art)
				return
			}
			for _, v := range r.Violations {
				if contains(m.want, v.Invariant) {
					t.Logf("caught: %s", v)
					break
				}
			}
			_ = os.RemoveAll(art)
		})
	}
	for _, line := range table {
		t.Log(line)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
