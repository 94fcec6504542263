//go:build chaos && chaos_mutants

package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/leaseapi/leaseapi/internal/checker"
)

// mutant is one negative control (docs/reliability.md, Mutants): a
// deliberate bug switched on in leaseapi (repo/mutants_chaos.go), a short
// run whose plan exercises the bug on every seed, and the invariants that
// must catch it (any one of them, on every seed).
type mutant struct {
	name string
	bug  string
	want []string
	// exercised, when set, counts what the run needs to have exercised
	// the bug; a run with none fails loudly instead of passing quietly.
	exercised func(r *checker.Report) (int, string)
	setup     func(cfg *runConfig)
}

// at schedules faults at fixed offsets.
func at(evs ...event) func(*runConfig, *rand.Rand) []event {
	return func(*runConfig, *rand.Rand) []event { return evs }
}

// mutantDuration is the length of a mutant run, warm-up included; the
// plans below fit in it.
const mutantDuration = 24 * time.Second

var mutants = []mutant{
	{
		// Every job has five contenders at every tick: each acquire after
		// the first is a takeover of a held lease.
		name: "M1", bug: "acquire ignores expiry (takes over a held lease)",
		want:  []string{"I2", "I4"},
		setup: func(cfg *runConfig) { cfg.Plan = at() },
	},
	{
		// The zombie sends, every 250 ms, a heartbeat with the previous
		// grant of a lease held right then.
		name: "M2", bug: "heartbeat without the owner and token check",
		want: []string{"I3", "I4"},
		setup: func(cfg *runConfig) {
			cfg.Plan = at()
			cfg.ZombieEvery, cfg.ZombieHeld = 250*time.Millisecond, true
		},
	},
	{
		// Every tick's holder releases, and the next tick's grant follows
		// a release.
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
			// asynchronously too, or its commits would flush the tail. Each
			// crash follows an acknowledged grant by a few milliseconds, so
			// that grant is in the tail.
			cfg.PGConf = []string{"wal_writer_delay = 10000ms"}
			cfg.WitnessAsync = true
			crash := func(at time.Duration) event {
				return event{At: at, Kind: checker.PGCrash, Dur: 300 * time.Millisecond, AfterAck: true}
			}
			cfg.Plan = at(crash(9*time.Second), crash(14*time.Second), crash(19*time.Second))
		},
	},
	{
		// Instance 1 sees every lease expire 5 s early (the TTL is 3 s):
		// every contender's acquire through it is a takeover.
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
		// a frozen database like lib/pq does. Each freeze outlasts the
		// clients' 2 s timeout, and holders heartbeat every second.
		name: "M6", bug: "store calls wait past the request deadline on a frozen database",
		want: []string{"I9"},
		setup: func(cfg *runConfig) {
			cfg.Mutant = ""
			cfg.RequestTimeout = time.Minute
			cfg.Plan = at(
				event{At: 9 * time.Second, Kind: checker.PGFreeze, Dur: 4 * time.Second},
				event{At: 16 * time.Second, Kind: checker.PGFreeze, Dur: 4 * time.Second},
			)
		},
	},
	{
		// Latency on instance 0's answers to the replicas, longer than their
		// 2 s timeout: every acquire through it is decided and committed at
		// once, and its caller times out and retries (through either
		// instance) while the grant it made is live. (Latency between
		// leaseapi and Postgres does not do this reliably: the delayed
		// heartbeats hold every pooled connection, and acquires never reach
		// the database in time.) I11 resolves the lost answers from the run
		// history; a run without such a retry fails as not exercised.
		name: "M7", bug: "acquire not idempotent: the holder's retry gets a new token",
		want: []string{"I11"},
		exercised: func(r *checker.Report) (int, string) {
			return r.Stats.UncertainAcquiresRetried, "acquires whose answer was lost, which took effect and were retried while their grant was live"
		},
		setup: func(cfg *runConfig) {
			// The runner retries only while the tick is current: a 4 s period
			// leaves room for the retry (about 2 s after the tick) within the
			// first grant's TTL (3 s).
			cfg.Period, cfg.APIProxy = 4*time.Second, true
			cfg.Plan = at(event{At: 7 * time.Second, Kind: checker.APILatency, Dur: 12 * time.Second, Target: 0, Latency: 2500})
		},
	},
	{
		// Not a bug of the service's code but of its outbox: after the
		// warm-up the harness switches off the trigger that writes the
		// events of a run's release or expiry, then pauses every replica
		// across a tick, so that the leases held then expire untold (the
		// missed ticks' trigger stays on: their deliveries show that the
		// webhook still works, which is what exercised counts).
		name: "M8", bug: "the outbox trigger of the runs' updates switched off mid-run (expiries and releases decided, never told)",
		want: []string{"I12"},
		exercised: func(r *checker.Report) (int, string) {
			return r.Stats.Deliveries, "webhook deliveries"
		},
		setup: func(cfg *runConfig) {
			cfg.Mutant, cfg.Webhook = "", true
			cfg.Plan = at(
				event{At: 8 * time.Second, Kind: outboxOff},
				event{At: 10 * time.Second, Kind: replicasPause, Dur: cfg.Period * 3 / 4},
			)
		},
	},
	{
		// The members of each group tick at once (every 4 s): every tick,
		// one member more than the limit is granted while the others
		// hold their slots.
		name: "M13", bug: "group limit off by one (a grant in a group is decided with the limit one higher)",
		want: []string{"I13"},
		exercised: func(r *checker.Report) (int, string) {
			return r.Stats.GroupGrants, "grants in a group"
		},
		setup: func(cfg *runConfig) { cfg.Plan = at() },
	},
	{
		// Every job has a policy (consecutiveFailures 1 or 2), and every
		// replica is paused across a tick 10 s into the run: the leases
		// held then expire, the sweep decides those jobs alerting and
		// tells job.alerting, but the state written is the one read (ok),
		// so the runs that follow never tell job.ok, and a job that fails
		// again is told job.alerting again.
		name: "M14", bug: "a policy's decision told but its state not written (the job stays ok)",
		want: []string{"I14"},
		exercised: func(r *checker.Report) (int, string) {
			return r.Stats.PolicyTransitions[checker.EventJobAlerting], "job.alerting told"
		},
		setup: func(cfg *runConfig) {
			cfg.PolicyEvery = 1
			cfg.Plan = at(event{At: 10 * time.Second, Kind: replicasPause, Dur: cfg.Period * 3 / 4})
		},
	},
}

// defaultMutantSeeds: every mutant runs with each. The second is the seed
// M7 once escaped with; "random" draws one per run.
const defaultMutantSeeds = "20261130,1510926745,random"

// mutantRow is one line of the table TestMutants prints.
type mutantRow struct {
	mutant    string
	seed      uint64
	want      string
	caught    []string
	uncertain string
	verdict   string
}

// TestMutants runs every mutant with every seed and wants each run caught
// by an invariant named for the mutant (make chaos-mutants). CHAOS_MUTANTS
// (comma-separated names) selects mutants, CHAOS_MUTANT_SEEDS the seeds.
func TestMutants(t *testing.T) {
	only := os.Getenv("CHAOS_MUTANTS")
	seeds, err := parseSeeds("CHAOS_MUTANT_SEEDS", defaultMutantSeeds)
	if err != nil {
		t.Fatal(err)
	}
	var table []mutantRow
	for _, m := range mutants {
		if only != "" && !slices.Contains(strings.Split(only, ","), m.name) {
			continue
		}
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/Seed%d", m.name, seed), func(t *testing.T) {
				row := runMutant(t, m, seed)
				table = append(table, row)
			})
		}
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "mutant\tseed\tmust be caught by\tcaught by\tuncertain calls (acquires: granted, retried while live)\tverdict")
	for _, r := range table {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", r.mutant, r.seed, r.want, strings.Join(r.caught, " "), r.uncertain, r.verdict)
	}
	_ = w.Flush()
	t.Logf("negative controls:\n%s", b.String())
}

// runMutant runs one mutant with one seed and judges it.
func runMutant(t *testing.T, m mutant, seed uint64) mutantRow {
	cfg := prConfig(seed)
	cfg.Name = "mutant-" + m.name
	cfg.Mutant, cfg.Control = m.name, true
	cfg.Duration, cfg.WarmUp, cfg.Jobs = mutantDuration, 5*time.Second, 10
	cfg.LinearizabilityTimeout = 10 * time.Second
	cfg.Webhook, cfg.PolicyEvery = false, 0 // a mutant that needs them says so
	cfg.HungWebhook, cfg.WebhookTimeout = false, 0
	m.setup(cfg)
	r, art := runChaos(t, cfg)
	row := mutantRow{mutant: m.name, seed: seed, want: strings.Join(m.want, "/"), verdict: "caught"}
	for _, inv := range checker.Invariants {
		if r.Caught(inv) {
			row.caught = append(row.caught, inv)
		}
	}
	s := r.Stats
	row.uncertain = fmt.Sprintf("%d (%d: %d, %d)", s.Uncertain, s.UncertainAcquires, s.UncertainAcquiresGranted, s.UncertainAcquiresRetried)
	if m.exercised != nil {
		if n, what := m.exercised(r); n == 0 {
			row.verdict = "NOT EXERCISED"
			t.Errorf("mutant %s (%s), seed %d: the run had no %s, so it could not catch the bug; artifacts in %s",
				m.name, m.bug, seed, what, art)
			return row
		}
	}
	var hit *checker.Violation
	for i, v := range r.Violations {
		if slices.Contains(m.want, v.Invariant) {
			hit = &r.Violations[i]
			break
		}
	}
	if hit == nil {
		row.verdict = "ESCAPED"
		t.Errorf("mutant %s (%s), seed %d, was not caught by %s; the checkers caught %v; reproduce with CHAOS_MUTANTS=%s CHAOS_MUTANT_SEEDS=%d; artifacts in %s",
			m.name, m.bug, seed, strings.Join(m.want, " or "), row.caught, m.name, seed, art)
		return row
	}
	t.Logf("caught: %s", hit)
	_ = os.RemoveAll(art)
	return row
}
