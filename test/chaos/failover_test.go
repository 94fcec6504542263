//go:build chaos

package chaos

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/internal/checker"
	"github.com/leaseapi/leaseapi/test/chaos/record"
)

// failoverConfig is the failover tier: the chaos workload (3 replica
// processes, 10 jobs every 2 s, TTL 3 s) on two leaseapi instances with
// replicated durability, one reaching a three-node Patroni cluster through
// a multi-host DSN, the other through HAProxy.
func failoverConfig(seed uint64) *runConfig {
	return &runConfig{
		Name: "failover", Seed: seed,
		WarmUp:    8 * time.Second,
		Instances: 2, Replicas: 3, Jobs: 10,
		Period: 2 * time.Second, TTL: 3 * time.Second, Heartbeat: time.Second,
		RequestTimeout: requestDeadline, ClientTimeout: 2 * time.Second, MaxTTL: time.Minute,
		Webhook: true, PolicyEvery: 3,
		Groups: defaultGroups(), GroupPeriod: groupPeriod, GroupGrace: groupGrace, GroupWorkMin: groupWorkMin,
	}
}

// failoverFaults are the faults of one run, in order; each is followed by
// recovery (a leader, both standbys streaming, the old node back).
var failoverFaults = []checker.FaultKind{
	checker.LeaderKill, checker.PostmasterKill, checker.Switchover, checker.WALStall,
	checker.WALStallKill, checker.LeaderFreeze, checker.EtcdStop,
}

// walStall is how long the leader's WAL senders stay stopped: past the
// request deadline (1 s), so that commits wait for the standby and are
// cancelled.
const walStall = 2500 * time.Millisecond

// unguardedStall is the stall of the unguarded control: long enough that
// a call cancelled at the deadline is retried (after its 503's Retry-After)
// while the stall lasts, so the retry finds its own unreplicated write;
// with walStall only the calls of the stall's first half second would be.
const unguardedStall = 6 * time.Second

// defaultControlSeeds are the seeds of the asynchronous control: a fixed
// one and a random one on every run, since the control must bite on every
// seed (CHAOS_CONTROL_SEEDS overrides; CHAOS_SEEDS names the seeds of the
// synchronous run).
const defaultControlSeeds = "20261202,random"

// TestFailover runs the chaos workload across every failover fault on a
// synchronous Patroni cluster and holds the history to I1–I14, plus the
// promotions (each advanced the timeline by one, tokens above the new
// timeline's base), and no answer other than 200, 409 or 503 (429 when
// limited). Then the negative controls, each of which must lose
// acknowledged writes (I1) when the leader's WAL senders stall and the
// leader is killed: the same cluster with asynchronous replication and
// local durability, and the synchronous cluster with the unguarded build,
// whose retried calls echo what their cancelled first attempts wrote
// without waiting for the standby.
func TestFailover(t *testing.T) {
	seeds, err := parseSeeds("CHAOS_SEEDS", "20261202")
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
			cfg := failoverConfig(seed)
			r, art := runFailover(t, cfg, true, failoverFaults)
			if r.Failed() {
				var lines []string
				for _, v := range r.Violations {
					lines = append(lines, "  "+v.String())
				}
				t.Errorf("seed %d broke invariants across failovers; artifacts in %s\n%s", seed, art, strings.Join(lines, "\n"))
				return
			}
			if missing := webhookNotExercised(cfg, r); len(missing) > 0 {
				t.Errorf("seed %d: the webhook was not exercised: %s, so I12 judged nothing; artifacts in %s", seed, strings.Join(missing, "; "), art)
				return
			}
			if missing := policiesNotExercised(cfg, r); len(missing) > 0 {
				t.Errorf("seed %d: the policies were not exercised: %s, so I14 judged little; artifacts in %s", seed, strings.Join(missing, "; "), art)
			}
			if missing := groupsNotExercised(cfg, r); len(missing) > 0 {
				t.Errorf("seed %d: the groups were not exercised: %s, so I13 judged little; artifacts in %s", seed, strings.Join(missing, "; "), art)
				return
			}
			_ = os.RemoveAll(art)
		})
	}
	controls, err := parseSeeds("CHAOS_CONTROL_SEEDS", defaultControlSeeds)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range controls {
		t.Run(fmt.Sprintf("AsyncControlSeed%d", seed), func(t *testing.T) {
			cfg := failoverConfig(seed)
			cfg.Name, cfg.Control, cfg.Webhook, cfg.PolicyEvery = "failover-async", true, false, 0
			cfg.InstanceEnv = map[int][]string{0: {"LEASEAPI_DURABILITY=local"}, 1: {"LEASEAPI_DURABILITY=local"}}
			r, art := runFailover(t, cfg, false, []checker.FaultKind{checker.WALStallKill})
			wantLostWrite(t, r, art, "asynchronous replication with a stalled, killed leader")
		})
	}
	for _, seed := range controls {
		t.Run(fmt.Sprintf("UnguardedControlSeed%d", seed), func(t *testing.T) {
			cfg := failoverConfig(seed)
			cfg.Name, cfg.Control, cfg.Mutant, cfg.WALStall = "failover-unguarded", true, "unguarded", unguardedStall
			cfg.Webhook, cfg.PolicyEvery = false, 0
			r, art := runFailover(t, cfg, true, []checker.FaultKind{checker.WALStallKill})
			wantLostWrite(t, r, art, "the unguarded build with a stalled, killed leader")
		})
	}
}

// runFailover starts the cluster and the workload, injects faults one
// after the other, and checks the history.
func runFailover(t *testing.T, cfg *runConfig, synchronous bool, faults []checker.FaultKind) (*checker.Report, string) {
	art := filepath.Join(artifactsRoot(t), fmt.Sprintf("%s-%s-seed%d", time.Now().Format("20060102-150405"), cfg.Name, cfg.Seed))
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	pc := startPatroni(t, synchronous)
	t.Cleanup(func() { pc.copyLogs(art) })
	e := newFailoverEnv(t, cfg, art, pc)
	t.Logf("%s cluster and instances up in %s (synchronous_mode %t); artifacts in %s", cfg.Name, time.Since(began).Round(time.Second), synchronous, art)

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
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { every(stop, time.Second, e.sample) })
	if pr != nil {
		bg.Go(func() { e.setPolicies(pr, e.start.Add(cfg.WarmUp)) })
	}
	time.Sleep(cfg.WarmUp)

	var proms []checker.Promotion
	for _, k := range faults {
		p, err := e.failoverFault(pc, k)
		if err != nil {
			close(stop)
			bg.Wait()
			t.Fatalf("%s: %v (artifacts in %s)", k, err, art)
		}
		proms = append(proms, p)
		e.logf("fault %s: leader %s (timeline %d) -> %s (timeline %d), healthy after %s",
			k, p.OldLeader, p.OldTimeline, p.NewLeader, p.NewTimeline, p.Healthy.Sub(p.Start).Round(100*time.Millisecond))
		time.Sleep(4 * time.Second) // steady load between faults
	}
	e.end = time.Now()
	close(stop)
	bg.Wait()

	var wg sync.WaitGroup
	for _, slot := range e.reps {
		wg.Go(func() { slot.p.stop(cfg.TTL + 3*time.Second) })
	}
	wg.Wait()
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
	// The runs and leases come from the final primary.
	h, err := e.collect(probes)
	if err != nil {
		t.Fatalf("collect the history: %v (artifacts in %s)", err, art)
	}
	h.Webhook, h.Policies = hw, hp
	_ = writeJSONL(filepath.Join(art, "faults.jsonl"), sortedFaults(h.Faults))
	_ = writeJSONL(filepath.Join(art, "promotions.jsonl"), proms)
	if b, err := json.Marshal(h); err == nil {
		_ = os.WriteFile(filepath.Join(art, "history.json"), b, 0o644)
	}
	opts := checker.RecoveryOptions(cfg.TTL, cfg.Heartbeat, requestDeadline, cfg.ClientTimeout)
	opts.AllowedStatuses = []int{200, 409, 429, 503}
	r := checker.Check(h, opts)
	checker.CheckPromotions(h, r, proms)
	for _, c := range checker.FaultCosts(h) {
		t.Logf("cost of %-15s first grant after %5.1f s, 503s for %5.1f s (%d answers)",
			c.Kind, c.FirstGrant.Seconds(), c.Unavailable.Seconds(), c.Answers503)
	}
	line := fmt.Sprintf("%s seed=%d, %d faults, %d replicas, %d jobs, load average <= %.1f, %s in all: %s",
		cfg.Name, cfg.Seed, len(faults), cfg.Replicas, cfg.Jobs, e.maxLoad, time.Since(began).Round(time.Second), r.SummaryLine())
	t.Log(line)
	summary := struct {
		Line       string              `json:"summary"`
		Costs      []checker.FaultCost `json:"faultCosts"`
		Promotions []checker.Promotion `json:"promotions"`
		Violations []checker.Violation `json:"violations"`
	}{line, checker.FaultCosts(h), proms, r.Violations}
	if b, err := json.MarshalIndent(summary, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(art, "summary.json"), b, 0o644)
	}
	return r, art
}

// newFailoverEnv is newEnv for the Patroni cluster: the witness schema on a
// private Postgres of its own, the leases on the cluster, instance 0
// through the multi-host DSN and instance 1 through HAProxy, without
// toxiproxy.
func newFailoverEnv(t *testing.T, cfg *runConfig, art string, pc *patroniCluster) *env {
	e := &env{t: t, cfg: cfg, art: art, open: true}
	tags := ""
	if cfg.Mutant != "" {
		tags = "chaos_mutants"
	}
	e.leaseapiBin = build(t, "./cmd/leaseapi", tags)
	e.replicaBin = build(t, "./test/chaos/replica", "chaos")
	if cfg.webhooks() {
		key, err := newWebhookKey()
		if err != nil {
			t.Fatal(err)
		}
		e.webhookKey = key
	}
	e.pg = startCluster(t, nil)
	if err := e.setupDatabase(false); err != nil {
		t.Fatal(err)
	}
	if err := e.setupLeases(pc); err != nil {
		t.Fatal(err)
	}
	w, err := record.Create(filepath.Join(art, "ops-harness.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	e.hrec = w
	t.Cleanup(func() { _ = w.Close() })
	e.httpc = &http.Client{Timeout: cfg.ClientTimeout}
	dsns := []string{pc.multiHostDSN("leaseapi"), pc.haproxyDSN("leaseapi")}
	for i := range cfg.Instances {
		inst := &instance{i: i, port: freePort(t), bin: e.leaseapiBin}
		inst.env = append(baseEnv(),
			fmt.Sprintf("LEASEAPI_ADDR=127.0.0.1:%d", inst.port),
			"LEASEAPI_DATABASE_URL="+dsns[i%len(dsns)],
			"LEASEAPI_DURABILITY=replicated",
			"LEASEAPI_DEFAULT_TTL="+cfg.TTL.String(),
			"LEASEAPI_MIN_TTL=1s",
			"LEASEAPI_MAX_TTL="+cfg.MaxTTL.String(),
			"LEASEAPI_REQUEST_TIMEOUT="+cfg.RequestTimeout.String(),
			"LEASEAPI_BATCH_TIMEOUT="+cfg.RequestTimeout.String(),
			"LEASEAPI_SHUTDOWN_TIMEOUT=5s",
			"LEASEAPI_LOG_LEVEL=info",
			"LEASEAPI_LOG_FORMAT=json",
		)
		if cfg.Mutant != "" {
			inst.env = append(inst.env, "LEASEAPI_MUTANT="+cfg.Mutant)
		}
		inst.env = append(inst.env, e.webhookEnv()...)
		inst.env = append(inst.env, cfg.InstanceEnv[i]...) // later settings win
		e.insts = append(e.insts, inst)
	}
	t.Cleanup(e.killAll)
	for _, inst := range e.insts {
		if err := e.startInstance(inst); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// releaseRetrier is the job of the harness's retried release during a WAL
// stall: a grant acknowledged before the stall, whose release is sent as
// the stall begins (its commit waits for the standby until the deadline
// cancels the wait, and the release is then on the primary only) and
// retried every 250 ms while the stall lasts, alone in its call, so that
// each retry finds its own unreplicated release. Under the durable echo
// every retry waits for the standby and answers 503 until it is durable;
// the unguarded build answers 200 at once, and the kill that follows
// loses an acknowledged release (I1). Its lease row is not one of the
// workload's (workloadJobs).
const releaseRetrier = "stall-retrier"

// holdForRetrier acquires releaseRetrier's lease for longer than any
// stall, and returns the grant.
func (e *env) holdForRetrier() (*api.Lease, error) {
	owner := fmt.Sprintf("retrier-%d", time.Now().UnixNano())
	// A release the last stall-and-kill lost leaves the lease held until
	// its TTL ends: up to 20 s.
	for range 100 {
		res, l := e.call("retrier", 0, releaseRetrier, "acquire", map[string]any{"owner": owner, "ttlMs": int64(15000)})
		if res == "ok" && l != nil {
			return l, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("the harness could not acquire %s before the WAL stall", releaseRetrier)
}

// retryRelease releases l, and retries every 250 ms while the answer is a
// 503 (or none) and the clock is before until.
func (e *env) retryRelease(l *api.Lease, until time.Time) {
	for {
		res, _ := e.call("retrier", 0, releaseRetrier, "release", map[string]any{"owner": l.Owner, "token": l.Token, "outcome": "succeeded"})
		if (res != "unavailable" && res != "unknown") || !time.Now().Before(until) {
			e.logf("retried release of %s: %s", releaseRetrier, res)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// setupLeases creates and migrates the leaseapi database on the cluster,
// through HAProxy; the harness reads it there (through HAProxy: always
// the current primary).
func (e *env) setupLeases(pc *patroniCluster) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("postgres", pc.haproxyDSN("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE leaseapi`); err != nil {
		return fmt.Errorf("create database on the cluster: %w", err)
	}
	cmd := exec.CommandContext(ctx, e.leaseapiBin, "migrate")
	cmd.Env = append(baseEnv(), "LEASEAPI_DATABASE_URL="+pc.haproxyDSN("leaseapi"), "LEASEAPI_LOG_FORMAT=text")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("leaseapi migrate: %w\n%s", err, out)
	}
	db, err := sql.Open("postgres", pc.haproxyDSN("leaseapi"))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(4)
	db.SetConnMaxLifetime(5 * time.Second)
	e.leasesDB = db
	e.t.Cleanup(func() { _ = db.Close() })
	return nil
}

// failoverFault injects one fault, waits until the cluster is whole again
// and records it (the fault's window ends when the cluster is healthy).
func (e *env) failoverFault(pc *patroniCluster, k checker.FaultKind) (checker.Promotion, error) {
	p := checker.Promotion{Kind: k, MustPromote: k != checker.WALStall && k != checker.EtcdStop}
	old, err := pc.waitHealthy(60 * time.Second)
	if err != nil {
		return p, err
	}
	p.OldLeader, p.OldTimeline = old.Name, old.Timeline
	n := pc.node(old.Name)
	f := checker.Fault{Kind: k, Instance: -1}
	f.Start = time.Now()
	p.Start = f.Start
	switch k {
	case checker.LeaderKill:
		pc.killNode(n)
		if _, err := pc.waitLeader(60*time.Second, old.Name); err != nil {
			return p, err
		}
		if err := pc.startNode(n); err != nil {
			return p, err
		}
	case checker.PostmasterKill:
		if pm := n.postmaster(); pm != 0 {
			_ = syscall.Kill(pm, syscall.SIGKILL)
		}
		if _, err := pc.waitLeader(60*time.Second, old.Name); err != nil {
			return p, err
		}
	case checker.Switchover:
		if err := pc.switchover(old.Name); err != nil {
			return p, err
		}
		if _, err := pc.waitLeader(60*time.Second, old.Name); err != nil {
			return p, err
		}
	case checker.WALStall, checker.WALStallKill:
		senders := n.walSenders()
		if len(senders) == 0 {
			return p, fmt.Errorf("leader %s has no WAL sender", old.Name)
		}
		retrier, err := e.holdForRetrier()
		if err != nil {
			return p, err
		}
		f.Start = time.Now() // after the retrier's grant, which is no recovery
		p.Start = f.Start
		stall := cmp.Or(e.cfg.WALStall, walStall)
		signalPIDs(senders, syscall.SIGSTOP)
		retried := make(chan struct{})
		go func() {
			defer close(retried)
			until := time.Now().Add(stall)
			if k == checker.WALStall {
				until = until.Add(3 * time.Second) // the standby catches up: answered 200
			}
			e.retryRelease(retrier, until)
		}()
		time.Sleep(stall)
		if k == checker.WALStall {
			signalPIDs(senders, syscall.SIGCONT)
			<-retried
			break
		}
		<-retried
		pc.killNode(n)
		if _, err := pc.waitLeader(60*time.Second, old.Name); err != nil {
			return p, err
		}
		if err := pc.startNode(n); err != nil {
			return p, err
		}
	case checker.LeaderFreeze:
		pids := append(keys(n.postgresPIDs()), n.patroni.pid())
		signalPIDs(pids, syscall.SIGSTOP)
		_, err := pc.waitLeader(60*time.Second, old.Name)
		signalPIDs(pids, syscall.SIGCONT)
		if err != nil {
			return p, err
		}
	case checker.EtcdStop:
		pc.etcd.stop(5 * time.Second)
		time.Sleep(patroniTTL * time.Second)
		if err := pc.startEtcd(); err != nil {
			return p, err
		}
	}
	now, err := pc.waitHealthy(90 * time.Second)
	if err != nil {
		return p, err
	}
	f.End = time.Now()
	p.Healthy = f.End
	p.NewLeader, p.NewTimeline = now.Name, now.Timeline
	e.addFault(f)
	return p, nil
}

// wantLostWrite fails the test unless r, a negative control's run, was
// caught losing an acknowledged write (I1); the artifacts in art are kept
// when it was not, and removed when it was.
func wantLostWrite(t *testing.T, r *checker.Report, art, what string) {
	t.Helper()
	if !r.Caught("I1") {
		t.Errorf("%s was not caught by I1 (%s); artifacts in %s", what, r.SummaryLine(), art)
		return
	}
	for _, v := range r.Violations {
		if v.Invariant == "I1" {
			t.Logf("caught, as it must be: %s", v)
			break
		}
	}
	_ = os.RemoveAll(art)
}
