//go:build chaos

package chaos

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/test/chaos/record"
)

// The harness as an operator: at seeded times during the chaos phase it
// asks for a run now of a random job (POST /leases/{jobId}/trigger, with
// an admin token and a fresh Idempotency-Key), sometimes sends the same
// call again later with the same key (answered the tick the first made,
// whatever became of it), and sometimes cancels what the job owes
// (DELETE /leases/{jobId}/trigger). Every call is recorded in the
// harness's history like the lease calls; the replicas claim the manual
// ticks through POST /owed, and the checkers hold the claims to I1–I6.

// opStep is one step of the operator.
type opStep struct {
	At  time.Duration // offset from the start of the run
	Job int
	// Reason, when set, is sent as the run now's reason.
	Reason string
	// Retry, when above zero, sends the run now again with its key after
	// that long; Cancel, when above zero, cancels what the job owes after
	// that long (after the retry, if any).
	Retry, Cancel time.Duration
}

func (s opStep) String() string {
	out := fmt.Sprintf("+%5.1fs %-14s job %d", s.At.Seconds(), "run_now", s.Job)
	if s.Retry > 0 {
		out += fmt.Sprintf(", again with its key after %s", s.Retry)
	}
	if s.Cancel > 0 {
		out += fmt.Sprintf(", cancelled after %s", s.Cancel)
	}
	return out
}

// operatorPlan is the operator's seeded schedule: a step every
// U(TriggerEvery/2, 3·TriggerEvery/2) from the end of the warm-up until
// 6 s before the end (so that the replicas claim the last tick during the
// run). Of every four steps, in a seeded order, one repeats the call with
// its key after up to 2 s, one cancels after up to 600 ms (racing the
// replicas' claim), and two do neither: every seed has each kind.
func operatorPlan(cfg *runConfig, rng *rand.Rand) []opStep {
	if cfg.TriggerEvery <= 0 {
		return nil
	}
	var steps []opStep
	var kinds []int
	for at := cfg.WarmUp + uniform(rng, 0, cfg.TriggerEvery); at < cfg.Duration-6*time.Second; at += uniform(rng, cfg.TriggerEvery/2, cfg.TriggerEvery*3/2) {
		s := opStep{At: at, Job: rng.IntN(cfg.Jobs)}
		if rng.IntN(2) == 0 {
			s.Reason = "chaos run now"
		}
		if len(kinds) == 0 {
			kinds = []int{0, 1, 2, 2}
			rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		}
		switch kinds[0] {
		case 0:
			s.Retry = uniform(rng, 0, 2*time.Second)
		case 1:
			s.Cancel = uniform(rng, 0, 600*time.Millisecond)
		}
		kinds = kinds[1:]
		steps = append(steps, s)
	}
	return steps
}

// operator runs the steps one after the other, each at its time (or at
// once when the previous one ran late), until stop is closed; rng picks
// the instance of each call.
func (e *env) operator(steps []opStep, rng *rand.Rand, stop <-chan struct{}) {
	for n, s := range steps {
		t := time.NewTimer(time.Until(e.start.Add(s.At)))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		job := e.jobID(s.Job)
		key := fmt.Sprintf("run-now-%d-%d", e.cfg.Seed, n)
		body := "{}"
		if s.Reason != "" {
			body = fmt.Sprintf(`{"reason":%q}`, s.Reason)
		}
		e.operatorCall(rng, http.MethodPost, job, key, body)
		if s.Retry > 0 {
			time.Sleep(s.Retry)
			e.operatorCall(rng, http.MethodPost, job, key, body)
		}
		if s.Cancel > 0 {
			time.Sleep(s.Cancel)
			e.operatorCall(rng, http.MethodDelete, job, "", "")
		}
	}
}

// operatorCall sends one run now (POST, with key) or cancellation (DELETE)
// of job's owed tick to a random instance, with the admin token, and
// sends it again (the same key) while its outcome is unknown (503, no
// answer) or an earlier attempt of the key is in flight, at most three
// times more; rng picks the instances.
func (e *env) operatorCall(rng *rand.Rand, method, job, key, body string) {
	kind := "trigger"
	if method == http.MethodDelete {
		kind = "cancel_trigger"
	}
	for attempt := range 4 {
		inst := rng.IntN(len(e.insts))
		url := fmt.Sprintf("http://127.0.0.1:%d/leases/%s/trigger", e.insts[inst].port, job)
		req, _ := http.NewRequest(method, url, nil)
		if body != "" {
			req, _ = http.NewRequest(method, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, _ := e.send(&record.Event{Ev: "call", Client: "operator", Instance: inst, Job: job, Kind: kind, Key: key}, req)
		if res != "unavailable" && res != "unknown" && res != api.CodeIdempotencyKeyInFlight {
			return
		}
		if attempt < 3 {
			time.Sleep(300 * time.Millisecond)
		}
	}
}
