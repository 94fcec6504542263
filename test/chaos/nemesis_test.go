//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/leaseapi/leaseapi/internal/checker"
)

// event is one fault of the schedule.
type event struct {
	At   time.Duration // offset from the start of the run
	Kind checker.FaultKind
	Dur  time.Duration
	// Target picks the replica slot or the instance.
	Target int
	// Latency and Jitter (ms) of a db_latency fault. The latency delays
	// the answers only (Postgres to leaseapi): statements arrive and commit
	// on time, their results come late.
	Latency, Jitter int
	// AfterAck makes a pg_crash follow an acknowledged write: the harness
	// acquires a free job through leaseapi and crashes Postgres as soon as
	// the grant is answered.
	AfterAck bool
}

// replicasPause is a plan's pause of every replica at once: an outage of
// the whole fleet, after which a job with catch-up owes the tick nobody
// ran. It is injected as one replica_pause fault per replica, aligned on
// the schedule: it starts TTL + 600 ms before a tick T (every lease has
// expired by T, so T is missed, not skipped) and ends Dur after T, which
// must lie between T's grace plus a sweep and the next tick, so that T is
// decided missed, and so owed, while every replica is stopped, and the
// replicas resume with T the current tick.
const replicasPause checker.FaultKind = "replicas_pause"

func (ev event) String() string {
	s := fmt.Sprintf("+%5.1fs %-14s", ev.At.Seconds(), ev.Kind)
	switch ev.Kind {
	case checker.ReplicaPause, checker.ReplicaKill:
		s += fmt.Sprintf(" replica %d", ev.Target)
	case replicasPause:
		return s + fmt.Sprintf(" every replica, from TTL+600ms before a tick to %s after it", ev.Dur)
	case outboxOff:
		return s + " the outbox trigger of the runs' updates switched off (a negative control)"
	case checker.PGRestart, checker.PGCrash, checker.PGFreeze:
	default:
		s += fmt.Sprintf(" instance %d", ev.Target)
	}
	if ev.Dur > 0 {
		s += fmt.Sprintf(" for %s", ev.Dur)
	}
	if ev.AfterAck {
		s += " after an acknowledged grant"
	}
	if ev.Kind == checker.DBLatency || ev.Kind == checker.APILatency {
		s += fmt.Sprintf(" (%d±%d ms)", ev.Latency, ev.Jitter)
	}
	return s
}

func uniform(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// prPlan is the PR tier's schedule (docs/reliability.md, scaled to the run's
// length): after the fault-free warm-up, every replica paused across a
// tick (replicasPause, alone in the first 10 s), then six major faults spread evenly in
// a seeded order (Postgres fast restart at about 40 % and crash at about
// 80 % of the chaos phase; reset_peer 2 s and blackhole 3 s on one
// instance's database proxy; one instance SIGKILLed and restarted; one
// SIGSTOPped for 4 s), 100±50 ms latency windows of 10 s on one proxy in
// between, a replica SIGSTOPped for U(0.5 s, 6 s) every 5–10 s, and a
// replica SIGKILLed and restarted every 20 s.
func prPlan(cfg *runConfig, rng *rand.Rand) []event {
	// The fleet's outage first, alone: a replica fault meanwhile would let
	// that replica run the tick, a database fault delay its decision.
	evs := []event{{At: cfg.WarmUp + time.Second, Kind: replicasPause, Dur: cfg.Period * 3 / 4}}
	start := cfg.WarmUp + allPausedSlot
	chaos := cfg.Duration - start - 8*time.Second // leave the end to recover
	slot := chaos / 6
	others := []checker.FaultKind{checker.DBReset, checker.DBBlackhole, checker.InstanceKill, checker.InstancePause}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	majors := []checker.FaultKind{others[0], others[1], checker.PGRestart, others[2], checker.PGCrash, others[3]}
	for i, k := range majors {
		at := start + time.Duration(i)*slot + uniform(rng, slot/4, slot/2)
		ev := event{At: at, Kind: k, Target: rng.IntN(cfg.Instances)}
		switch k {
		case checker.DBReset:
			ev.Dur = 2 * time.Second
		case checker.DBBlackhole:
			ev.Dur = 3 * time.Second
		case checker.InstancePause:
			ev.Dur = 4 * time.Second
		case checker.InstanceKill:
			ev.Dur = time.Second
		}
		evs = append(evs, ev)
		// A latency window in the quiet part of some slots (~30 % of the time).
		if i%2 == 1 && slot > 12*time.Second {
			evs = append(evs, event{At: at + 4*time.Second, Kind: checker.DBLatency, Dur: min(10*time.Second, slot-6*time.Second),
				Target: rng.IntN(cfg.Instances), Latency: 100, Jitter: 50})
		}
	}
	for at := start + uniform(rng, 2*time.Second, 5*time.Second); at < cfg.Duration-6*time.Second; at += uniform(rng, 5*time.Second, 10*time.Second) {
		evs = append(evs, event{At: at, Kind: checker.ReplicaPause, Target: rng.IntN(cfg.Replicas),
			Dur: uniform(rng, 500*time.Millisecond, 6*time.Second)})
	}
	for at := start + 10*time.Second; at < cfg.Duration-5*time.Second; at += 20 * time.Second {
		evs = append(evs, event{At: at + uniform(rng, 0, 2*time.Second), Kind: checker.ReplicaKill,
			Target: rng.IntN(cfg.Replicas), Dur: 500 * time.Millisecond})
	}
	return evs
}

// allPausedSlot is the part of the chaos phase that prPlan keeps for the
// pause of every replica: up to a period to align it on a tick, TTL +
// 600 ms before the tick and up to a period after it, and a second left.
const allPausedSlot = 10 * time.Second

// nemesis runs the schedule: every fault in its own goroutine at its time.
// It returns when the last fault has healed.
func (e *env) nemesis(evs []event) {
	var wg sync.WaitGroup
	for _, ev := range evs {
		wg.Go(func() {
			wait := time.Until(e.start.Add(ev.At))
			if wait > 0 {
				time.Sleep(wait)
			}
			e.inject(ev)
		})
	}
	wg.Wait()
}

// inject applies one fault and heals it.
func (e *env) inject(ev event) {
	f := checker.Fault{Kind: ev.Kind, Instance: -1}
	switch ev.Kind {
	case replicasPause:
		e.pauseAll(ev)
		return
	case outboxOff:
		e.switchOutboxOff()
		return

	case checker.ReplicaPause, checker.ReplicaKill:
		slot := e.reps[ev.Target%len(e.reps)]
		slot.mu.Lock()
		defer slot.mu.Unlock()
		f.Target = slot.owner
		f.Start = time.Now()
		if ev.Kind == checker.ReplicaPause {
			slot.p.signal(syscall.SIGSTOP)
			time.Sleep(ev.Dur)
			slot.p.signal(syscall.SIGCONT)
		} else {
			slot.p.kill()
			time.Sleep(ev.Dur)
			if err := e.startReplica(slot); err != nil {
				e.logf("restart replica %d: %v", slot.i, err)
			}
		}
		f.End = time.Now()

	case checker.InstancePause, checker.InstanceKill:
		inst := e.insts[ev.Target%len(e.insts)]
		f.Instance = inst.i
		inst.mu.Lock()
		p := inst.p
		inst.mu.Unlock()
		f.Start = time.Now()
		if ev.Kind == checker.InstancePause {
			p.signal(syscall.SIGSTOP)
			time.Sleep(ev.Dur)
			p.signal(syscall.SIGCONT)
		} else {
			p.kill()
			time.Sleep(ev.Dur)
			if err := e.startInstance(inst); err != nil {
				e.logf("restart instance %d: %v", inst.i, err)
			}
		}
		f.End = time.Now()

	case checker.DBLatency, checker.DBReset, checker.DBBlackhole, checker.APILatency:
		proxies := e.proxies
		if ev.Kind == checker.APILatency {
			proxies = e.apiProxies
		}
		i := ev.Target % len(proxies)
		f.Instance = i
		var toxics []string
		switch ev.Kind {
		case checker.DBLatency, checker.APILatency:
			toxics = []string{fmt.Sprintf(`{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":%d}}`, ev.Latency, ev.Jitter)}
		case checker.DBReset:
			toxics = []string{`{"name":"reset","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`}
		case checker.DBBlackhole:
			toxics = []string{
				`{"name":"hole_up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`,
				`{"name":"hole_down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`,
			}
		}
		f.Start = time.Now()
		names := e.addToxics(proxies[i], toxics)
		time.Sleep(ev.Dur)
		for _, n := range names {
			_ = proxies[i].Toxics.RemoveToxic(context.Background(), n)
		}
		if ev.Kind == checker.DBReset || ev.Kind == checker.DBBlackhole {
			e.awaitPostgres(proxies[i])
		}
		f.End = time.Now()

	case checker.PGRestart:
		f.Start = time.Now()
		if err := e.pg.RestartFast(); err != nil {
			e.logf("%v", err)
		}
		f.End = time.Now()

	case checker.PGCrash:
		if ev.AfterAck {
			e.ackedGrant()
		}
		f.Start = time.Now()
		if err := e.pg.Crash(); err != nil {
			e.logf("%v", err)
		}
		time.Sleep(ev.Dur)
		if err := e.pg.StartServer(); err != nil {
			e.logf("%v", err)
		}
		f.End = time.Now()

	case checker.PGFreeze:
		f.Start = time.Now()
		e.pg.SignalAll(syscall.SIGSTOP)
		time.Sleep(ev.Dur)
		e.pg.SignalAll(syscall.SIGCONT)
		f.End = time.Now()
	}
	e.addFault(f)
	e.logf("fault %s: %s-%s", ev, f.Start.Format("15:04:05.000"), f.End.Format("15:04:05.000"))
}

// pauseAll stops every replica across a tick (replicasPause) and records
// one replica_pause fault per replica.
func (e *env) pauseAll(ev event) {
	for _, slot := range e.reps {
		slot.mu.Lock()
		defer slot.mu.Unlock()
	}
	lead := e.cfg.TTL + 600*time.Millisecond
	p := e.cfg.Period.Milliseconds()
	first := time.Now().Add(lead).UnixMilli()
	tick := time.UnixMilli((first + p - 1) / p * p) // the first tick at least lead away
	time.Sleep(time.Until(tick.Add(-lead)))
	start := time.Now()
	for _, slot := range e.reps {
		slot.p.signal(syscall.SIGSTOP)
	}
	time.Sleep(time.Until(tick.Add(ev.Dur)))
	for _, slot := range e.reps {
		slot.p.signal(syscall.SIGCONT)
	}
	end := time.Now()
	for _, slot := range e.reps {
		e.addFault(checker.Fault{Kind: checker.ReplicaPause, Target: slot.owner, Instance: -1, Start: start, End: end})
	}
	e.logf("fault %s: every replica paused %s-%s across the tick %s", ev, start.Format("15:04:05.000"),
		end.Format("15:04:05.000"), tick.UTC().Format("15:04:05.000"))
}

func (e *env) addToxics(p *toxiproxy.Proxy, toxics []string) []string {
	var names []string
	for _, js := range toxics {
		w, err := p.Toxics.AddToxicJson(strings.NewReader(js))
		if err != nil {
			e.logf("toxic %s: %v", js, err)
			continue
		}
		names = append(names, w.Name)
	}
	return names
}

// awaitPostgres returns once Postgres answers through p again, or after
// 30 s. A proxy whose reset_peer or timeout toxic was just removed can go
// on refusing or dropping new connections for seconds (toxiproxy issue
// 465); the fault lasts until the path works again, and I9's recovery is
// measured from then.
func (e *env) awaitPostgres(p *toxiproxy.Proxy) {
	began := time.Now()
	for time.Since(began) < 30*time.Second {
		if err := postgresAnswers(p.Listen); err == nil {
			if d := time.Since(began); d > 100*time.Millisecond {
				e.logf("proxy %s carried Postgres again %s after its toxics were removed", p.Name, d.Round(time.Millisecond))
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.logf("proxy %s did not carry Postgres within 30s after its toxics were removed", p.Name)
}

// postgresAnswers sends Postgres's SSLRequest to addr and reads the one
// byte a server answers it with ('S' or 'N').
func postgresAnswers(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	sslRequest := []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f} // length 8, code 80877103
	if _, err := c.Write(sslRequest); err != nil {
		return err
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	if b[0] != 'S' && b[0] != 'N' {
		return fmt.Errorf("answer %q to an SSLRequest", b[0])
	}
	return nil
}

// ackedGrant acquires, as the owner "crash-witness", the first job that is
// free, and returns as soon as the grant is answered (or after a few
// seconds without one). The call is recorded: a crash that loses the grant
// leaves a client-seen token the run history lacks (I1).
func (e *env) ackedGrant() {
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		job := e.jobID(i % e.cfg.Jobs)
		if res, l := e.call("crash-witness", 0, job, "acquire", map[string]any{"owner": "crash-witness", "ttlMs": int64(1000)}); res == "ok" {
			e.logf("acknowledged grant of %s token %d to crash-witness; crashing Postgres", job, l.Token)
			return
		}
	}
	e.logf("no acknowledged grant before the crash")
}
