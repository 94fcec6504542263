package handlers_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// TestScheduleOverHTTP: an acquire registers its schedule with the
// effective grace (the request's or the default, capped at the schedule's
// shortest gap), the lease shows it with the next tick, and DELETE
// /leases/{jobId}/schedule forgets it.
func TestScheduleOverHTTP(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		opts := defaultOptions()
		opts.MissedGrace = 90 * time.Second
		b := setup(t, open(t), opts)

		for _, tc := range []struct {
			name      string
			spec      string
			graceMs   *int64
			wantGrace int64
		}{
			{"DefaultGrace", "CRON_TZ=Europe/Berlin 0 7 * * *", nil, 90_000},
			{"RequestedGrace", "*/5 * * * *", ptr[int64](30_000), 30_000},
			{"CappedAtTheGap", "@every 10s", ptr[int64](60_000), 10_000},
			{"DefaultCappedAtTheGap", "* * * * * *", nil, 1000},
		} {
			t.Run(tc.name, func(t *testing.T) {
				job := b.job(tc.name)
				l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Schedule: &tc.spec, GraceMs: tc.graceMs}))
				if l.Schedule == nil || *l.Schedule != tc.spec || l.GraceMs == nil || *l.GraceMs != tc.wantGrace {
					t.Fatalf("lease: schedule %v grace %v, want %q %d", l.Schedule, l.GraceMs, tc.spec, tc.wantGrace)
				}
				if l.NextTick == nil || !l.NextTick.After(l.AcquiredAt.Time) {
					t.Errorf("nextTick %v, want a tick after acquiredAt %s", l.NextTick, l.AcquiredAt)
				}
				forgot := wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job + "/schedule"}))
				if forgot.Schedule != nil || forgot.GraceMs != nil || forgot.NextTick != nil {
					t.Errorf("after DELETE schedule: %+v", forgot)
				}
			})
		}

		before := b.snapshot(t)
		for _, tc := range []struct {
			name, body, detail string
		}{
			{"NotASpec", `{"owner":"a","schedule":"every morning"}`, "schedule is not a valid cron spec"},
			{"NeverFires", `{"owner":"a","schedule":"0 0 30 2 *"}`, "never fires"},
			{"UnknownZone", `{"owner":"a","schedule":"CRON_TZ=Mars/Olympus 0 7 * * *"}`, "schedule is not a valid cron spec"},
			{"GraceWithoutSchedule", `{"owner":"a","graceMs":1000}`, "graceMs is the grace of a schedule"},
			{"GraceTooLong", `{"owner":"a","schedule":"@daily","graceMs":86400001}`, "graceMs must be an integer from 1 to 86400000"},
			{"GraceZero", `{"owner":"a","schedule":"@daily","graceMs":0}`, "graceMs must be an integer from 1 to 86400000"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := b.doInvalid(t, request{method: http.MethodPost, path: "/leases/" + b.job("bad-schedule") + "/acquire", body: tc.body})
				if p := wantProblem(t, resp, http.StatusBadRequest, api.CodeInvalidRequest); !strings.Contains(p.Detail, tc.detail) {
					t.Errorf("detail %q, want it to say %q", p.Detail, tc.detail)
				}
			})
		}
		tooLong := `{"owner":"a","schedule":"@every 1s` + strings.Repeat(" ", 250) + `"}`
		wantProblem(t, b.doInvalid(t, request{method: http.MethodPost, path: "/leases/" + b.job("bad-schedule") + "/acquire", body: tooLong}),
			http.StatusBadRequest, api.CodeInvalidRequest)
		if after := b.snapshot(t); !after.equal(before) {
			t.Error("a refused schedule changed the store")
		}
	})
}

// TestHostileSchedules: a spec the parser refuses, or whose ticks come
// faster than the smallest lease, is 400 with a reason, never a 5xx, and
// stores nothing; day-of-week 7 is Sunday.
func TestHostileSchedules(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		opts := defaultOptions()
		opts.MinTTL = 5 * time.Second
		b := setup(t, open(t), opts)
		before := b.snapshot(t)
		for _, tc := range []struct {
			name, spec string
			details    []string
		}{
			{"ZoneAlone", "CRON_TZ=Europe/Berlin", []string{"names a zone (CRON_TZ=Europe/Berlin) but no fields"}},
			{"TZAlone", "TZ=UTC", []string{"names a zone (TZ=UTC) but no fields"}},
			{"UnderASecond", "@every 1ms", []string{"shorter than 1s"}},
			{"UnderTheSmallestLease", "@every 2s", []string{"every 2s", "smallest lease this server grants is 5s", "cannot run more often than its smallest lease"}},
			{"EverySecond", "* * * * * *", []string{"every 1s", "is 5s"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				body := `{"owner":"a","schedule":"` + tc.spec + `"}`
				resp := b.doInvalid(t, request{method: http.MethodPost, path: "/leases/" + b.job("hostile") + "/acquire", body: body})
				p := wantProblem(t, resp, http.StatusBadRequest, api.CodeInvalidRequest)
				for _, d := range tc.details {
					if !strings.Contains(p.Detail, d) {
						t.Errorf("detail %q, want it to say %q", p.Detail, d)
					}
				}
			})
		}
		if after := b.snapshot(t); !after.equal(before) {
			t.Error("a refused schedule changed the store")
		}
		for _, tc := range []struct {
			spec string
			days []time.Weekday
		}{
			{"@every 5s", nil},
			{"0 7 * * 7", []time.Weekday{time.Sunday}},
			{"0 7 * * 5-7", []time.Weekday{time.Friday, time.Saturday, time.Sunday}},
		} {
			l := wantLease(t, b.acquire(t, b.job("sunday"), api.AcquireRequest{Owner: "a", Schedule: &tc.spec}))
			if l.NextTick == nil {
				t.Fatalf("%q: no next tick", tc.spec)
			}
			if tc.days != nil && !slices.Contains(tc.days, l.NextTick.Weekday()) {
				t.Errorf("%q: next tick %s is a %s, want one of %v", tc.spec, l.NextTick, l.NextTick.Weekday(), tc.days)
			}
		}
	})
}

// TestStoredFastScheduleKeepsRunning: a job whose stored schedule ticks
// faster than the smallest lease (stored before that rule, or before
// LEASEAPI_MIN_TTL was raised) is still granted with that spec, which its
// replicas send with every acquire; another spec for it, or that spec for
// another job, is refused.
func TestStoredFastScheduleKeepsRunning(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		store := open(t)
		old := setup(t, store, defaultOptions()) // MinTTL 1s
		spec, other := "@every 2s", "@every 3s"
		job := old.job("fast")
		first := wantLease(t, old.acquire(t, job, api.AcquireRequest{Owner: "a", Schedule: &spec}))

		opts := defaultOptions()
		opts.MinTTL = 5 * time.Second
		raised := setup(t, store, opts)
		retry := wantLease(t, raised.acquire(t, job, api.AcquireRequest{Owner: "a", Schedule: &spec}))
		if retry.Token != first.Token {
			t.Errorf("the holder's retry with the stored spec: token %d, want %d", retry.Token, first.Token)
		}
		for name, tc := range map[string]struct{ job, spec string }{
			"AnotherSpec": {job, other},
			"AnotherJob":  {old.job("new"), spec},
		} {
			resp := raised.acquire(t, tc.job, api.AcquireRequest{Owner: "a", Schedule: &tc.spec})
			p := wantProblem(t, resp, http.StatusBadRequest, api.CodeInvalidRequest)
			if !strings.Contains(p.Detail, "smallest lease this server grants is 5s") {
				t.Errorf("%s: detail %q, want it to name the smallest lease", name, p.Detail)
			}
		}
	})
}

// TestNearestTickOverHTTP: nearestTick takes the schedule's tick nearest
// to the server's clock and the answer's tick says which; the holder's
// retry is answered with its grant; a tick is snapped to the stored
// schedule's tick at or before it, so another name of a completed tick is
// tick_done.
func TestNearestTickOverHTTP(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("nearest")
		// Every 2 minutes: the next tick lies within the 5 minutes a tick
		// may lie ahead of the clock (tick_ahead).
		spec, gap := "@every 2m", 2*time.Minute
		granted := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", NearestTick: true, Schedule: &spec}))
		tick := granted.AcquiredAt.Add(time.Minute).Truncate(gap)
		if granted.Tick == nil || !granted.Tick.Equal(tick) && !granted.Tick.Equal(tick.Add(-gap)) {
			t.Fatalf("nearestTick: tick %v, want the tick at or before acquiredAt %s + 1m", granted.Tick, granted.AcquiredAt)
		}
		retry := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", NearestTick: true}))
		if retry.Token != granted.Token || !retry.Tick.Equal(granted.Tick.Time) {
			t.Errorf("the holder's nearestTick retry: token %d tick %v, want token %d tick %v", retry.Token, retry.Tick, granted.Token, granted.Tick)
		}
		wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "b", NearestTick: true}), http.StatusConflict, api.CodeLeaseHeld)
		wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "a", Token: granted.Token, Outcome: ptr(leaseapi.OutcomeSucceeded)}))

		// The completed tick named a minute later is the same tick.
		later := api.FormatTime(granted.Tick.Add(time.Minute))
		p := wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "b", Tick: &later}), http.StatusConflict, api.CodeTickDone)
		if p.Lease == nil || p.Lease.LastCompletedTick == nil || !p.Lease.LastCompletedTick.Equal(granted.Tick.Time) {
			t.Errorf("tick_done lease: %+v, want lastCompletedTick %v", p.Lease, granted.Tick)
		}
		// The next tick, named a minute late, is granted as itself.
		next := api.FormatTime(granted.Tick.Add(gap + time.Minute))
		l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "b", Tick: &next}))
		if l.Tick == nil || !l.Tick.Equal(granted.Tick.Add(gap)) {
			t.Errorf("a tick a minute after the next one: tick %v, want %v", l.Tick, granted.Tick.Add(gap))
		}
	})
}

// TestPauseOverHTTP: pause and resume over HTTP; a paused job answers 409
// job_paused with the lease to everyone but its holder's retry.
func TestPauseOverHTTP(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("pause")
		tick := "2026-11-30T07:00:00Z"
		held := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: &tick}))

		paused := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/pause", body: `{"reason":"database maintenance"}`}))
		if !paused.Paused || paused.PausedAt == nil || paused.PausedReason == nil || *paused.PausedReason != "database maintenance" || paused.PausedBy != nil {
			t.Fatalf("pause: %+v", paused)
		}
		p := wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "b", Tick: &tick}), http.StatusConflict, api.CodeJobPaused)
		if p.Lease == nil || !p.Lease.Paused || p.Lease.Token != held.Token {
			t.Errorf("job_paused lease: %+v", p.Lease)
		}
		if retry := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: &tick})); retry.Token != held.Token {
			t.Errorf("the holder's retry while paused: token %d, want %d", retry.Token, held.Token)
		}
		// Idempotent, and an empty body is a pause without a reason.
		again := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/pause", body: `{}`}))
		if !again.PausedAt.Equal(paused.PausedAt.Time) || *again.PausedReason != "database maintenance" {
			t.Errorf("pause again: %+v, want the first pause unchanged", again)
		}
		resumed := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/resume", body: `{}`}))
		if resumed.Paused || resumed.PausedAt != nil || resumed.PausedReason != nil {
			t.Errorf("resume: %+v", resumed)
		}
		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/resume", body: `{}`}))

		for _, tc := range []struct {
			name string
			req  request
			code string
		}{
			{"PauseUnknownJob", request{method: http.MethodPost, path: "/leases/" + b.job("nobody") + "/pause", body: `{}`}, api.CodeNotFound},
			{"ResumeUnknownJob", request{method: http.MethodPost, path: "/leases/" + b.job("nobody") + "/resume", body: `{}`}, api.CodeNotFound},
			{"ForgetUnknownJob", request{method: http.MethodDelete, path: "/leases/" + b.job("nobody") + "/schedule"}, api.CodeNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantProblem(t, b.do(t, tc.req), http.StatusNotFound, tc.code)
			})
		}
		before := b.snapshot(t)
		for _, tc := range []struct {
			name, path, body string
		}{
			{"ReasonTooLong", "/pause", `{"reason":"` + strings.Repeat("x", 257) + `"}`},
			{"ReasonControl", "/pause", `{"reason":"a\nb"}`},
			{"ReasonNotString", "/pause", `{"reason":1}`},
			{"PauseUnknownField", "/pause", `{"why":"x"}`},
			{"ResumeUnknownField", "/resume", `{"reason":"x"}`},
			{"PauseNoBody", "/pause", ``},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := request{method: http.MethodPost, path: "/leases/" + job + tc.path, body: tc.body}
				if tc.body == "" {
					req.header = http.Header{"Content-Type": {"application/json"}}
				}
				wantProblem(t, b.doInvalid(t, req), http.StatusBadRequest, api.CodeInvalidRequest)
			})
		}
		if after := b.snapshot(t); !after.equal(before) {
			t.Error("a refused pause or resume changed the store")
		}
	})
}

// TestAdminOperations: with tokens configured, pause, resume and forgetting
// a schedule need an admin token, like revoke.
func TestAdminOperations(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		opts := defaultOptions()
		opts.APITokens = []string{"api-token"}
		opts.AdminTokens = []string{"admin-token"}
		b := setup(t, open(t), opts)
		job := b.job("admin")
		bearer := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"a"}`, header: bearer("api-token")}))
		for _, req := range []request{
			{method: http.MethodPost, path: "/leases/" + job + "/pause", body: `{}`},
			{method: http.MethodPost, path: "/leases/" + job + "/resume", body: `{}`},
			{method: http.MethodPost, path: "/leases/" + job + "/repair", body: `{}`},
			{method: http.MethodDelete, path: "/leases/" + job + "/schedule"},
		} {
			req.header = bearer("api-token")
			wantProblem(t, b.do(t, req), http.StatusForbidden, api.CodeForbidden)
			req.header = nil
			wantProblem(t, b.do(t, req), http.StatusUnauthorized, api.CodeUnauthorized)
			req.header = bearer("admin-token")
			wantLease(t, b.do(t, req))
		}

		// Audit: the acting credential's name, never its token.
		paused := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/pause", body: `{}`, header: bearer("admin-token")}))
		if paused.PausedBy == nil || *paused.PausedBy != "admin-token-1" {
			t.Errorf("pausedBy: got %v, want admin-token-1", paused.PausedBy)
		}
		revoked := wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job, header: bearer("admin-token")}))
		if revoked.RevokedBy == nil || *revoked.RevokedBy != "admin-token-1" {
			t.Errorf("revokedBy: got %v, want admin-token-1", revoked.RevokedBy)
		}
		var runs api.RunList
		decode(t, b.do(t, request{method: http.MethodGet, path: "/leases/" + job + "/runs", header: bearer("api-token")}).body, &runs)
		if len(runs.Runs) == 0 || runs.Runs[0].RevokedBy == nil || *runs.Runs[0].RevokedBy != "admin-token-1" {
			t.Errorf("the revoked run: %+v, want revokedBy admin-token-1", runs.Runs)
		}
		if line := b.logs.lines(t, map[string]any{"msg": "request", "method": http.MethodDelete}); len(line) == 0 || line[len(line)-1]["credential"] != "admin-token-1" {
			t.Errorf("access log of the revoke: %v, want its line to name credential admin-token-1", line)
		}
	})
}

// TestMissedRunsOverHTTP: the run history shows missed ticks as runs
// without a holder, valid against the spec.
func TestMissedRunsOverHTTP(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("missed")
		spec := "@every 1s"
		l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Schedule: &spec, GraceMs: ptr[int64](10)}))
		wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "a", Token: l.Token}))
		var runs api.RunList
		for i := 0; ; i++ {
			if _, err := b.store.SweepTicks(t.Context(), 100); err != nil {
				t.Fatalf("SweepTicks: %v", err)
			}
			decode(t, b.get(t, "/leases/"+job+"/runs").body, &runs)
			if len(runs.Runs) > 1 {
				break
			}
			if i == 1000 {
				t.Fatalf("no missed run after %d sweeps: %+v", i, runs)
			}
			time.Sleep(10 * time.Millisecond)
		}
		m := runs.Runs[0]
		if m.Outcome != leaseapi.OutcomeMissed || m.Token != nil || m.Owner != nil || m.StartedAt != nil || m.DurationMs != nil ||
			m.Tick == nil || m.EndedAt == nil || m.EndedAt.Sub(m.Tick.Time) != 10*time.Millisecond {
			t.Errorf("newest run: %+v, want a missed run (tick, end = tick + 10ms, nothing else)", m)
		}
		if got := wantLease(t, b.get(t, "/leases/"+job)); got.MissedTicks < 1 || got.LastOutcome == nil || *got.LastOutcome != leaseapi.OutcomeSucceeded {
			t.Errorf("lease: missedTicks %d lastOutcome %v, want >= 1 and succeeded", got.MissedTicks, got.LastOutcome)
		}
	})
}

// TestLateTicks: a grant for a tick made after the tick's grace counts in
// leaseapi_ticks_late_total; one within the grace, or a renewal, does not.
func TestLateTicks(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		spec, grace := "@every 1m", ptr[int64](60_000) // a tick of the minute is on time for a minute
		late := api.FormatTime(time.Now().Add(-time.Hour).Truncate(time.Minute))
		onTime := api.FormatTime(time.Now())
		wantLease(t, b.acquire(t, b.job("late"), api.AcquireRequest{Owner: "a", Tick: &late, Schedule: &spec, GraceMs: grace}))
		wantLease(t, b.acquire(t, b.job("late"), api.AcquireRequest{Owner: "a", Tick: &late})) // a renewal
		wantLease(t, b.acquire(t, b.job("on-time"), api.AcquireRequest{Owner: "a", Tick: &onTime, Schedule: &spec, GraceMs: grace}))
		if got := b.counter(t, "leaseapi_ticks_late_total", nil); got != 1 {
			t.Errorf("leaseapi_ticks_late_total: got %v, want 1", got)
		}
		if got := b.counter(t, "leaseapi_acquire_total", map[string]string{"result": "granted"}); got != 2 {
			t.Errorf(`leaseapi_acquire_total{result="granted"}: got %v, want 2`, got)
		}
	})
}
