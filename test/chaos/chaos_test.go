//go:build chaos

// Package chaos is the chaos suite of leaseapi (docs/reliability.md): real
// leaseapi processes on a private Postgres cluster behind in-process
// toxiproxy proxies, real replica processes running jobs.Runner, and a
// seeded nemesis that pauses, kills, restarts and crashes them; afterwards
// internal/checker decides whether invariants I1–I14 held.
//
//	go test -tags chaos -count=1 -v -run TestChaos ./test/chaos
//
// CHAOS_SEEDS (comma-separated; "random" draws one) and CHAOS_DURATION
// override the seeds and the length of a run; CHAOS_FAULTS (comma-separated
// kinds, e.g. db_reset,pg_crash) keeps only those faults of the schedule. A failed run leaves its
// artifacts (summary.json, porcupine visualizations, service, replica and
// Postgres logs, the fault log and the call histories) in the directory
// the failure message names, under test/chaos/artifacts/.
package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/internal/checker"
)

// prConfig is the PR tier, scaled to this 2-core machine (see
// docs/reliability.md, Fault tiers): 5 replica processes, 20 jobs every
// 2 s (every second one with catch-up, all with a grace of 500 ms, owed
// ticks polled every second, ticks decided every 250 ms), 2 leaseapi
// instances, TTL 3 s with heartbeats every second, an operator's run now
// every 5 s or so, 110 s per seed; the jobs split between two teams, team
// A's webhook on a receiver that hangs, team B's answering, with a
// delivery timeout of 2 s (I12, I12b); and two concurrency groups, limit 1
// over 5 jobs of their own and limit 2 over 5 (I13); every third job with
// an alert policy, told to a webhook of job.alerting and job.ok (I14).
func prConfig(seed uint64) *runConfig {
	return &runConfig{
		Name: "pr", Seed: seed,
		Duration: 110 * time.Second, WarmUp: 15 * time.Second,
		Instances: 2, Replicas: 5, Jobs: 20,
		Period: 2 * time.Second, TTL: 3 * time.Second, Heartbeat: time.Second,
		RequestTimeout: requestDeadline, ClientTimeout: 2 * time.Second, MaxTTL: time.Minute,
		Plan:        prPlan,
		ZombieEvery: 700 * time.Millisecond,
		Grace:       500 * time.Millisecond, CatchUpEvery: 2, OwedPoll: time.Second,
		MissedSweep: 250 * time.Millisecond, TriggerEvery: 5 * time.Second,
		Webhook: true, HungWebhook: true, WebhookTimeout: 2 * time.Second, PolicyEvery: 3,
		Groups: defaultGroups(), GroupPeriod: groupPeriod, GroupGrace: groupGrace, GroupWorkMin: groupWorkMin,
	}
}

// requestDeadline is the service's deadline for every call in each tier
// (LEASEAPI_REQUEST_TIMEOUT), which I9 holds it to: mutant M6 configures
// it away, and that is its bug, so the checker keeps this one.
const requestDeadline = time.Second

// defaultSeeds are the PR tier's seeds: one fixed, one random.
const defaultSeeds = "20261130,random"

func TestChaos(t *testing.T) {
	seeds, err := parseSeeds("CHAOS_SEEDS", defaultSeeds)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
			cfg := prConfig(seed)
			if d := os.Getenv("CHAOS_DURATION"); d != "" {
				v, err := time.ParseDuration(d)
				if err != nil {
					t.Fatalf("CHAOS_DURATION: %v", err)
				}
				cfg.Duration = v
			}
			r, art := runChaos(t, cfg)
			if r.Failed() {
				var lines []string
				for _, v := range r.Violations {
					lines = append(lines, "  "+v.String())
				}
				t.Errorf("seed %d broke invariants; reproduce with CHAOS_SEEDS=%d; artifacts in %s\n%s",
					seed, seed, art, strings.Join(lines, "\n"))
				return
			}
			if missing := notExercised(cfg, r); missing != "" {
				t.Errorf("seed %d: the workload was not exercised: %s, so the rules about it (I6's for owed ticks, I12) judged nothing; reproduce with CHAOS_SEEDS=%d; artifacts in %s",
					seed, missing, seed, art)
				return
			}
			_ = os.RemoveAll(art)
		})
	}
}

// notExercised says what the workload of a run with cfg should have made
// and did not ("" when it made everything): what webhookNotExercised,
// groupsNotExercised and policiesNotExercised want, run-now calls answered with a manual tick and manual claims
// granted (with an operator), catch-up claims granted (with jobs that
// catch up and a plan that pauses every replica).
func notExercised(cfg *runConfig, r *checker.Report) string {
	missing := webhookNotExercised(cfg, r)
	missing = append(missing, groupsNotExercised(cfg, r)...)
	missing = append(missing, policiesNotExercised(cfg, r)...)
	s := r.Stats
	if cfg.TriggerEvery > 0 && s.TriggersAnswered == 0 {
		missing = append(missing, "no run now was answered with a manual tick")
	}
	if cfg.TriggerEvery > 0 && s.RunsByTrigger[checker.TriggerManual] == 0 {
		missing = append(missing, "no manual tick was claimed")
	}
	if cfg.CatchUpEvery > 0 && cfg.planned(replicasPause) && s.RunsByTrigger[checker.TriggerCatchUp] == 0 {
		missing = append(missing, "no catch-up tick was claimed")
	}
	return strings.Join(missing, "; ")
}

// parseSeeds reads the comma-separated seeds in the environment variable
// name (def when unset); "random" draws one.
func parseSeeds(name, def string) ([]uint64, error) {
	s := os.Getenv(name)
	if s == "" {
		s = def
	}
	var seeds []uint64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "random" {
			seeds = append(seeds, rand.Uint64N(1<<31))
			continue
		}
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: bad seed %q", name, f)
		}
		seeds = append(seeds, v)
	}
	return seeds, nil
}

// artifactsRoot is test/chaos/artifacts (git-ignored).
func artifactsRoot(t *testing.T) string {
	root, err := filepath.Abs("artifacts")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// runChaos runs one configuration and checks it. The artifacts directory
// is kept; the caller removes it when the outcome was the expected one.
func runChaos(t *testing.T, cfg *runConfig) (*checker.Report, string) {
	art := filepath.Join(artifactsRoot(t), fmt.Sprintf("%s-%s-seed%d", time.Now().Format("20060102-150405"), cfg.Name, cfg.Seed))
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos run %s, seed %d (reproduce with CHAOS_SEEDS=%d), artifacts in %s", cfg.Name, cfg.Seed, cfg.Seed, art)
	e := newEnv(t, cfg, art)

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65))
	plan := cfg.Plan(cfg, rng)
	if only := os.Getenv("CHAOS_FAULTS"); only != "" && !cfg.Control {
		// Keep only the named fault kinds, to reproduce one fault alone.
		var kept []event
		for _, ev := range plan {
			if strings.Contains(","+only+",", ","+string(ev.Kind)+",") {
				kept = append(kept, ev)
			}
		}
		plan = kept
	}
	cfg.plan = plan
	steps := operatorPlan(cfg, rand.New(rand.NewPCG(cfg.Seed, 0x6f706572)))
	var planText strings.Builder
	for _, ev := range plan {
		planText.WriteString(ev.String() + "\n")
	}
	for _, s := range steps {
		planText.WriteString(s.String() + "\n")
	}
	_ = os.WriteFile(filepath.Join(art, "plan.txt"), []byte(planText.String()), 0o644)

	if err := e.createGroups(); err != nil {
		t.Fatal(err)
	}
	var hk *hook
	if cfg.Webhook {
		var err error
		if hk, err = e.registerWebhook(); err != nil {
			t.Fatal(err)
		}
	}
	pr, err := e.registerPolicies()
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Replicas {
		slot := &replicaSlot{i: i}
		e.reps = append(e.reps, slot)
		if err := e.startReplica(slot); err != nil {
			t.Fatal(err)
		}
	}
	e.start = time.Now()
	e.logf("replicas started; %d faults and %d run-now steps planned over %s", len(plan), len(steps), cfg.Duration)

	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { every(stop, time.Second, e.sample) })
	if pr != nil {
		bg.Go(func() { e.setPolicies(pr, e.start.Add(cfg.WarmUp)) })
	}
	if cfg.ZombieEvery > 0 {
		zrng := rand.New(rand.NewPCG(cfg.Seed, 0x7a6f6d62))
		bg.Go(func() { every(stop, cfg.ZombieEvery, func() { e.zombie(zrng) }) })
	}
	if len(steps) > 0 {
		orng := rand.New(rand.NewPCG(cfg.Seed, 0x61646d69))
		bg.Go(func() { e.operator(steps, orng, stop) })
	}
	e.nemesis(plan)
	if cfg.Script != nil {
		cfg.Script(e)
	}
	if rest := time.Until(e.start.Add(cfg.Duration)); rest > 0 {
		time.Sleep(rest)
	}
	e.end = time.Now()
	close(stop)
	bg.Wait()

	// Stop the replicas (they release what they hold), probe, stop the
	// instances.
	var wg sync.WaitGroup
	for _, slot := range e.reps {
		wg.Go(func() { slot.p.stop(cfg.TTL + 3*time.Second) })
	}
	wg.Wait()
	e.logf("replicas stopped; probing")
	probes := e.probe(cfg.TTL + 2*cfg.Heartbeat + time.Second)
	var hw *checker.Webhook
	if hk != nil {
		var err error
		if hw, err = e.awaitDelivery(hk); err != nil {
			t.Fatalf("%v (artifacts in %s)", err, art)
		}
	}
	var hp *checker.Policies
	if pr != nil {
		hp = e.awaitPolicies(pr)
	}
	for _, inst := range e.insts {
		inst.mu.Lock()
		p := inst.p
		inst.mu.Unlock()
		p.stop(10 * time.Second)
	}

	h, err := e.collect(probes)
	if err != nil {
		t.Fatalf("collect the history: %v (artifacts in %s)", err, art)
	}
	h.Webhook, h.Policies = hw, hp
	copyFile(e.pg.LogFile, filepath.Join(art, "postgres.log"))
	_ = writeJSONL(filepath.Join(art, "faults.jsonl"), sortedFaults(h.Faults))

	if b, err := json.Marshal(h); err == nil {
		_ = os.WriteFile(filepath.Join(art, "history.json"), b, 0o644)
	}
	began := time.Now()
	opts := checker.RecoveryOptions(cfg.TTL, cfg.Heartbeat, requestDeadline, cfg.ClientTimeout)
	if cfg.LinearizabilityTimeout > 0 {
		opts.LinearizabilityTimeout = cfg.LinearizabilityTimeout
	}
	opts.AllowedStatuses = cfg.AllowedStatuses
	r := checker.Check(h, opts)
	e.logf("checked %d calls in %s", len(h.Ops), time.Since(began).Round(time.Millisecond))
	line := fmt.Sprintf("chaos %s seed=%d %s, %d replicas, %d jobs every %s, %d instances, load average <= %.1f: %s",
		cfg.Name, cfg.Seed, cfg.Duration, cfg.Replicas, cfg.Jobs, cfg.Period, cfg.Instances, e.maxLoad, r.SummaryLine())
	t.Log(line)
	if !cfg.Control {
		_ = os.WriteFile(filepath.Join(artifactsRoot(t), "latest-summary.txt"), []byte(line+"\n"), 0o644)
	}
	summary := struct {
		Seed       uint64              `json:"seed"`
		Mutant     string              `json:"mutant,omitempty"`
		Line       string              `json:"summary"`
		Counts     map[string]int      `json:"counts"`
		Stats      checker.Stats       `json:"stats"`
		Violations []checker.Violation `json:"violations"`
		MaxLoad    float64             `json:"maxLoadAverage"`
	}{cfg.Seed, cfg.Mutant, line, r.Counts, r.Stats, r.Violations, e.maxLoad}
	if b, err := json.MarshalIndent(summary, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(art, "summary.json"), b, 0o644)
	}
	if r.Caught("I4") && !cfg.Control {
		if paths, err := r.WriteVisualizations(art, 30*time.Second); err != nil {
			t.Logf("porcupine visualization: %v", err)
		} else {
			t.Logf("porcupine visualizations: %s", strings.Join(paths, ", "))
		}
	}
	return r, art
}

// every calls fn every d until stop is closed.
func every(stop <-chan struct{}, d time.Duration, fn func()) {
	tk := time.NewTicker(d)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
			fn()
		}
	}
}

func copyFile(from, to string) {
	b, err := os.ReadFile(from)
	if err == nil {
		_ = os.WriteFile(to, b, 0o644)
	}
}

// TestRecheck runs the checkers again over a saved history (CHAOS_RECHECK
// names an artifacts directory), to debug a checker without a new run.
func TestRecheck(t *testing.T) {
	dir := os.Getenv("CHAOS_RECHECK")
	if dir == "" {
		t.Skip("set CHAOS_RECHECK to an artifacts directory")
	}
	b, err := os.ReadFile(filepath.Join(dir, "history.json"))
	if err != nil {
		t.Fatal(err)
	}
	var h checker.History
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r := checker.Check(&h, checker.DefaultOptions())
	t.Logf("checked %d calls in %s: %s", len(h.Ops), time.Since(began).Round(time.Millisecond), r.SummaryLine())
	for _, v := range r.Violations {
		t.Log(v.String())
	}
}
