package api_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/apitest"
	"github.com/leaseapi/leaseapi/webhook"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	return doc
}

func TestSpecValid(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not valid OpenAPI: %v", err)
	}
	closed, err := apitest.ClosedSpec()
	if err != nil {
		t.Fatal(err)
	}
	closedDoc, err := openapi3.NewLoader().LoadFromData(closed)
	if err != nil {
		t.Fatalf("load the closed form: %v", err)
	}
	if err := closedDoc.Validate(context.Background()); err != nil {
		t.Fatalf("the closed form of openapi.yaml is not valid OpenAPI: %v", err)
	}
	if got, want := doc.OpenAPI, "3.0.3"; got != want {
		t.Errorf("openapi version: got %q, want %q", got, want)
	}
}

// TestSpecProblemCodes: the problem codes the spec lists (an extensible
// enum: later releases may add codes) are exactly the codes package api
// declares.
func TestSpecProblemCodes(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	listed, ok := doc.Components.Schemas["Problem"].Value.Properties["code"].Value.Extensions["x-extensible-enum"].([]any)
	if !ok {
		t.Fatal("Problem.code lists no x-extensible-enum")
	}
	var got []string
	for _, v := range listed {
		got = append(got, v.(string))
	}
	want := []string{
		api.CodeInvalidRequest, api.CodeUnauthorized, api.CodeForbidden, api.CodeNotFound,
		api.CodeMethodNotAllowed, api.CodeLeaseHeld, api.CodeTickDone, api.CodeJobPaused, api.CodeTickAhead, api.CodeLeaseLost,
		api.CodePayloadTooLarge, api.CodeUnsupportedMediaType, api.CodeUnavailable, api.CodeInternal, api.CodeOverloaded, api.CodeRateLimited,
		api.CodeCredentialExists, api.CodeIdempotencyKeyReused, api.CodeIdempotencyKeyInFlight, api.CodeGroupFull, api.CodeGroupInUse,
		api.CodeWebhookExists, api.CodePolicyNotFound, api.CodeTooSoon, api.CodeFeatureDisabled,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problem codes in the spec: got %v, want %v", got, want)
	}
}

func TestTimeJSON(t *testing.T) {
	t.Parallel()
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name string
		in   time.Time
		want string
	}{
		{"UTCWhole", time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC), `"2026-11-30T07:00:00.000Z"`},
		{"TruncatesNotRounds", time.Date(2026, 11, 30, 7, 0, 0, 999_999_999, time.UTC), `"2026-11-30T07:00:00.999Z"`},
		{"Micros", time.Date(2026, 11, 30, 7, 0, 0, 123_456_000, time.UTC), `"2026-11-30T07:00:00.123Z"`},
		{"OffsetToUTC", time.Date(2026, 11, 30, 8, 0, 0, 5_000_000, paris), `"2026-11-30T07:00:00.005Z"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(api.NewTime(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			// Also through a zero-value Time that was not built with NewTime.
			got, _ = json.Marshal(api.Time{Time: tt.in})
			if string(got) != tt.want {
				t.Errorf("api.Time{}: got %s, want %s", got, tt.want)
			}
			if s := api.FormatTime(tt.in); `"`+s+`"` != tt.want {
				t.Errorf("FormatTime: got %s, want %s", s, tt.want)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "2026-11-30T07:00:00Z", want: "2026-11-30T07:00:00.000Z"},
		{in: "2026-11-30T08:00:00.123456789+01:00", want: "2026-11-30T07:00:00.123Z"},
		{in: "2026-11-30T07:00:00.1Z", want: "2026-11-30T07:00:00.100Z"},
		{in: "2026-11-30 07:00:00Z", wantErr: true},
		{in: "2026-11-30", wantErr: true},
		{in: "1764486000", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := api.ParseTime(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParseTime(%q): got %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || api.FormatTime(got) != tt.want || got.Location() != time.UTC {
			t.Errorf("ParseTime(%q): got %v, %v; want %s in UTC", tt.in, got, err, tt.want)
		}
	}
	var tm api.Time
	if err := json.Unmarshal([]byte(`"2026-11-30T08:00:00.5+01:00"`), &tm); err != nil || tm.String() != "2026-11-30T07:00:00.500Z" {
		t.Errorf("UnmarshalJSON: got %v, %v", tm, err)
	}
	if err := json.Unmarshal([]byte(`42`), &tm); err == nil {
		t.Error("UnmarshalJSON(42): got nil error")
	}
}

// TestDTOsMatchSpec encodes full and minimal DTOs and validates them against
// the component schemas, read strictly (apitest), so a field renamed on one
// side only, or a null the spec does not allow, fails here.
func TestDTOsMatchSpec(t *testing.T) {
	t.Parallel()
	strict, err := apitest.Strict()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 7, 0, 0, 123_456_789, time.UTC)
	later := now.Add(1500 * time.Millisecond)
	full := leaseapi.Lease{
		JobID: "nightly.report:eu-1", Owner: "pod-7f9c", Token: 42, State: leaseapi.StateReleased,
		AcquiredAt: now, RenewedAt: now, ExpiresAt: later, ReleasedAt: &later, TTL: 30 * time.Second,
		Tick: &now, LastCompletedTick: &now, LastOutcome: leaseapi.OutcomeSucceeded,
		Schedule: "CRON_TZ=Europe/Berlin 0 7 * * *", Grace: time.Minute, NextTick: &later,
		PausedAt: &later, PausedBy: "ops", PausedReason: "maintenance", MissedTicks: 3, SkippedTicks: 1, RevokedBy: "ops",
		Group: "reports:warehouse", Slot: 2, SlotToken: 9,
		AlertStatus: leaseapi.AlertAlerting, AlertReasons: []leaseapi.AlertReason{leaseapi.ReasonFailures, leaseapi.ReasonRuntimeExceeded},
	}
	alertedAt := later
	fullPolicy := leaseapi.JobPolicy{JobID: "a", Policy: leaseapi.AlertPolicy{
		ConsecutiveFailures: 3, FailureRate: &leaseapi.FailureRate{Threshold: 0.5, Runs: 10}, MaxRuntime: time.Hour,
		MinRuntime: time.Second, MissedTicks: 2, RecoveryThreshold: 2, RealertAfter: time.Hour,
	}, State: leaseapi.PolicyState{Status: leaseapi.AlertAlerting, Reasons: []leaseapi.AlertReason{leaseapi.ReasonMissed}, Since: now, AlertedAt: &alertedAt},
		UpdatedBy: "ops (lk_abc)", UpdatedAt: now, Now: later}
	minimalPolicy := leaseapi.JobPolicy{JobID: "a", Policy: leaseapi.AlertPolicy{MissedTicks: 1},
		State: leaseapi.PolicyState{Status: leaseapi.AlertOK, Since: now}, UpdatedAt: now, Now: now}
	minimal := leaseapi.Lease{
		JobID: "a", Owner: "o", Token: 1, State: leaseapi.StateHeld,
		AcquiredAt: now, RenewedAt: now, ExpiresAt: later, TTL: time.Second,
	}
	okLease := minimal // a job with a policy that is not alerting
	okLease.AlertStatus = leaseapi.AlertOK
	running := leaseapi.Run{JobID: "a", Token: 2, Owner: "o", StartedAt: &now, Outcome: leaseapi.OutcomeRunning}
	done := leaseapi.Run{JobID: "a", Token: 1, Owner: "o", Tick: &now, StartedAt: &now, EndedAt: &later, Outcome: leaseapi.OutcomeFailed}
	missed := leaseapi.Run{JobID: "b.c", Tick: &now, EndedAt: &later, Outcome: leaseapi.OutcomeMissed}
	// Runs a repair set aside: a grant's, and a missed tick's.
	discarded := leaseapi.Run{JobID: "a", Token: 3, Owner: "o", Tick: &later, StartedAt: &now, EndedAt: &later, Outcome: leaseapi.OutcomeDiscarded, RevokedBy: "ops"}
	discardedMissed := leaseapi.Run{JobID: "b.c", Tick: &later, EndedAt: &later, Outcome: leaseapi.OutcomeDiscarded}
	grouped := leaseapi.Run{JobID: "a", Token: 4, Owner: "o", StartedAt: &now, Outcome: leaseapi.OutcomeRunning, Group: "g", Slot: 1, SlotToken: 7}
	groupFull := leaseapi.Run{JobID: "a", Tick: &now, EndedAt: &later, Outcome: leaseapi.OutcomeMissed, Group: "g", GroupFull: true}
	group := leaseapi.Group{Name: "reports:warehouse", Limit: 2, Held: 1, CreatedBy: "ops (lk_abc)", CreatedAt: now,
		Holders: []leaseapi.GroupHolder{{JobID: "reports:daily", Owner: "pod-1", Token: 3, Slot: 1, SlotToken: 5, ExpiresAt: later}}}
	wireGroup := api.FromGroup(group)
	cursor := "YQ"
	problemLease := api.FromLease(full)
	tests := []struct {
		name, schema string
		v            any
	}{
		{"FullLease", "Lease", api.FromLease(full)},
		{"MinimalLease", "Lease", api.FromLease(minimal)},
		{"OKLease", "Lease", api.FromLease(okLease)},
		{"FullJobPolicy", "JobPolicy", api.FromJobPolicy(fullPolicy)},
		{"MinimalJobPolicy", "JobPolicy", api.FromJobPolicy(minimalPolicy)},
		{"PolicyNotFoundProblem", "PolicyNotFoundProblem", api.Problem{Type: api.ProblemTypePrefix + api.CodePolicyNotFound, Title: "Policy not found",
			Status: 404, Detail: "d", Code: api.CodePolicyNotFound}},
		{"LeaseListLast", "LeaseList", api.LeaseList{Leases: api.FromLeases(nil), ServerTime: api.NewTime(now)}},
		{"LeaseListMore", "LeaseList", api.LeaseList{Leases: api.FromLeases([]leaseapi.Lease{full, minimal}), NextCursor: &cursor, ServerTime: api.NewTime(now)}},
		{"RunList", "RunList", api.RunList{Runs: api.FromRuns([]leaseapi.Run{running, done, missed, discarded, discardedMissed, grouped, groupFull})}},
		{"Group", "Group", wireGroup},
		{"EmptyGroup", "Group", api.FromGroup(leaseapi.Group{Name: "g", Limit: 1, CreatedAt: now})},
		{"GroupList", "GroupList", api.GroupList{Groups: api.FromGroups([]leaseapi.Group{group}), NextCursor: &cursor}},
		{"EmptyGroupList", "GroupList", api.GroupList{Groups: api.FromGroups(nil)}},
		{"GroupFullProblem", "GroupFullProblem", api.Problem{Type: api.ProblemTypePrefix + api.CodeGroupFull, Title: "Group full", Status: 409, Detail: "d",
			Code: api.CodeGroupFull, Lease: &problemLease, Group: &wireGroup}},
		{"EmptyRunList", "RunList", api.RunList{Runs: api.FromRuns(nil)}},
		{"RecentRunListMore", "RecentRunList", api.RecentRunList{Runs: api.FromRuns([]leaseapi.Run{running, done, missed}), NextCursor: &cursor, ServerTime: api.NewTime(now)}},
		{"RecentRunListLast", "RecentRunList", api.RecentRunList{Runs: api.FromRuns(nil), ServerTime: api.NewTime(now)}},
		{"Stats", "Stats", api.FromStats(leaseapi.Stats{
			Leases: map[leaseapi.State]int64{leaseapi.StateHeld: 3, leaseapi.StateExpired: 1},
			Paused: 1, Overdue: 2,
			Runs24h: map[leaseapi.Outcome]int64{leaseapi.OutcomeSucceeded: 10, leaseapi.OutcomeMissed: 4},
			Now:     now,
		})},
		{"EmptyStats", "Stats", api.FromStats(leaseapi.Stats{Now: now})},
		{"Problem", "Problem", api.Problem{Type: api.ProblemTypePrefix + api.CodeNotFound, Title: "Not found", Status: 404, Detail: "d", Code: api.CodeNotFound}},
		{"ConflictProblem", "Problem", api.Problem{Type: api.ProblemTypePrefix + api.CodeLeaseHeld, Title: "Lease held", Status: 409, Detail: "d", Code: api.CodeLeaseHeld, Lease: &problemLease}},
		{"Status", "Status", api.Status{Status: "ok"}},
		{"BatchResponse", "BatchResponse", api.BatchResponse{Results: []api.BatchResult{
			{JobID: "a", Status: 200, Lease: &problemLease},
			{JobID: "b", Status: 409, Problem: &api.Problem{Type: api.ProblemTypePrefix + api.CodeLeaseHeld, Title: "Lease held", Status: 409, Detail: "d",
				Code: api.CodeLeaseHeld, Lease: &problemLease}},
			{JobID: "c", Status: 429, Problem: &api.Problem{Type: api.ProblemTypePrefix + api.CodeRateLimited, Title: "Rate limited", Status: 429, Detail: "d",
				Code: api.CodeRateLimited}},
		}}},
		{"Health", "Health", api.Health{Status: "ok", Version: "1.0.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if err := strict.ValidateJSON(apitest.SchemaPointer(tt.schema), b); err != nil {
				t.Errorf("%s does not match schema %s: %v\n%s", tt.name, tt.schema, err, b)
			}
		})
	}

	t.Run("RunDuration", func(t *testing.T) {
		t.Parallel()
		r := api.FromRun(done)
		if r.DurationMs == nil || *r.DurationMs != 1500 {
			t.Errorf("durationMs: got %v, want 1500", r.DurationMs)
		}
		if api.FromRun(running).DurationMs != nil {
			t.Error("durationMs of a running run: got non-nil, want null")
		}
		if m := api.FromRun(missed); m.DurationMs != nil || m.Token != nil || m.Owner != nil || m.StartedAt != nil {
			t.Errorf("a missed run: got %+v, want no token, owner, start or duration", m)
		}
		if m := api.FromRun(discardedMissed); m.Token != nil || m.Owner != nil || m.StartedAt != nil {
			t.Errorf("a discarded missed run: got %+v, want no token, owner or start", m)
		}
		if d := api.FromRun(discarded); d.Token == nil || *d.Token != 3 || d.DurationMs == nil {
			t.Errorf("a discarded grant: got %+v, want its token and duration", d)
		}
	})
	t.Run("NullsAreExplicit", func(t *testing.T) {
		t.Parallel()
		b, _ := json.Marshal(api.FromLease(minimal))
		for _, field := range []string{`"releasedAt":null`, `"tick":null`, `"lastCompletedTick":null`, `"lastOutcome":null`,
			`"schedule":null`, `"graceMs":null`, `"nextTick":null`, `"paused":false`, `"pausedAt":null`, `"pausedBy":null`,
			`"pausedReason":null`, `"missedTicks":0`, `"skippedTicks":0`, `"revokedBy":null`, `"timeline":null`} {
			if !strings.Contains(string(b), field) {
				t.Errorf("lease JSON lacks %s: %s", field, b)
			}
		}
	})
	t.Run("RequestsMatchSpec", func(t *testing.T) {
		t.Parallel()
		ttl := int64(30000)
		tick := api.FormatTime(now)
		failed := leaseapi.OutcomeFailed
		spec := "*/5 * * * *"
		reqs := []struct {
			schema string
			v      any
		}{
			{"AcquireRequest", api.AcquireRequest{Owner: "o", TTLMs: &ttl, Tick: &tick}},
			{"AcquireRequest", api.AcquireRequest{Owner: "o"}},
			{"AcquireRequest", api.AcquireRequest{Owner: "o", Group: new("g")}},
			{"AcquireRequest", api.AcquireRequest{Owner: "o", Group: new("")}},
			{"AcquireRequest", api.AcquireRequest{Owner: "o", MinIntervalMs: new(int64(60000))}},
			{"AcquireRequest", api.AcquireRequest{Owner: "o", MinIntervalMs: new(int64(0))}},
			{"PutGroupRequest", api.PutGroupRequest{Limit: 3}},
			{"PolicyBody", api.PolicyBody{MissedTicks: new(int64(2))}},
			{"PolicyBody", api.PolicyBody{ConsecutiveFailures: new(int64(3)), FailureRate: &api.FailureRate{Threshold: 0.25, Runs: 8},
				MaxRuntimeMs: new(int64(60000)), MinRuntimeMs: new(int64(1000)), RecoveryThreshold: new(int64(2)), RealertAfterMs: new(int64(3600000))}},
			{"AcquireRequest", api.AcquireRequest{Owner: "o", Tick: &tick, Schedule: &spec, GraceMs: &ttl}},
			{"PauseRequest", api.PauseRequest{Reason: &spec}},
			{"PauseRequest", api.PauseRequest{}},
			{"ResumeRequest", api.ResumeRequest{}},
			{"HeartbeatRequest", api.HeartbeatRequest{Owner: "o", Token: 1, TTLMs: &ttl}},
			{"HeartbeatRequest", api.HeartbeatRequest{Owner: "o", Token: 1}},
			{"ReleaseRequest", api.ReleaseRequest{Owner: "o", Token: 1, Outcome: &failed}},
			{"ReleaseRequest", api.ReleaseRequest{Owner: "o", Token: 1}},
		}
		for _, rq := range reqs {
			b, _ := json.Marshal(rq.v)
			if err := strict.ValidateJSON(apitest.SchemaPointer(rq.schema), b); err != nil {
				t.Errorf("%s %s: %v", rq.schema, b, err)
			}
		}
	})
}

// TestWebhookBodiesMatchSpec: the data of a run event and of a job.missed
// event, in the body a standard webhook gets, match the WebhookEvent
// schema.
func TestWebhookBodiesMatchSpec(t *testing.T) {
	t.Parallel()
	strict, err := apitest.Strict()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	earlier, later := now.Add(-time.Second), now.Add(time.Second)
	lease := leaseapi.Lease{JobID: "a.b", Owner: "o", Token: 1, State: leaseapi.StateReleased, AcquiredAt: now,
		RenewedAt: now, ExpiresAt: later, ReleasedAt: &later, TTL: time.Second, MissedTicks: 2}
	run := leaseapi.Run{JobID: "a.b", Token: 1, Owner: "o", Tick: &now, StartedAt: &now, EndedAt: &later, Outcome: leaseapi.OutcomeFailed}
	alerting := lease
	alerting.AlertStatus, alerting.AlertReasons = leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailures, leaseapi.ReasonMissed}
	missed := []leaseapi.Run{
		{JobID: "a.b", Tick: &now, EndedAt: &later, Outcome: leaseapi.OutcomeMissed, Trigger: leaseapi.TriggerSchedule},
		{JobID: "a.b", Tick: &earlier, EndedAt: &later, Outcome: leaseapi.OutcomeMissed, Trigger: leaseapi.TriggerSchedule},
	}
	for _, e := range []leaseapi.WebhookEvent{
		{ID: "msg_1", Type: "run.failed", JobID: "a.b", Run: &run, Lease: &lease},
		{ID: "msg_2", Type: "job.missed", JobID: "a.b", Lease: &lease, Missed: missed, MissedCount: 5},
		{ID: "msg_3", Type: "job.alerting", JobID: "a.b", Run: &run, Lease: &alerting,
			AlertReasons: []leaseapi.AlertReason{leaseapi.ReasonFailures, leaseapi.ReasonMissed}, Repeat: true},
		{ID: "msg_4", Type: "job.alerting", JobID: "a.b", Lease: &alerting, AlertReasons: []leaseapi.AlertReason{leaseapi.ReasonMissed}},
		{ID: "msg_5", Type: "job.ok", JobID: "a.b", Run: &run, Lease: &lease, AlertReasons: []leaseapi.AlertReason{leaseapi.ReasonFailures}},
	} {
		data, err := api.MarshalWebhookData(&e)
		if err != nil {
			t.Fatalf("%s: MarshalWebhookData: %v", e.Type, err)
		}
		body, err := webhook.StandardBody(webhook.Message{ID: e.ID, Type: webhook.Event(e.Type), Timestamp: now, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		if err := strict.ValidateJSON(apitest.SchemaPointer("WebhookEvent"), body); err != nil {
			t.Errorf("%s body does not match WebhookEvent: %v\n%s", e.Type, err, body)
		}
	}
}

// TestPolicyEventData: a job.alerting event carries its reasons and
// repeat, a job.ok its reasons and no repeat, and an event without a run
// leaves run out rather than null.
func TestPolicyEventData(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	lease := leaseapi.Lease{JobID: "a.b", Owner: "o", Token: 1, State: leaseapi.StateHeld, AcquiredAt: now, RenewedAt: now, ExpiresAt: now, TTL: time.Second,
		AlertStatus: leaseapi.AlertAlerting, AlertReasons: []leaseapi.AlertReason{leaseapi.ReasonRuntimeExceeded}}
	for _, tt := range []struct {
		e    leaseapi.WebhookEvent
		want map[string]string // raw JSON of data's fields besides lease
	}{
		{leaseapi.WebhookEvent{Type: "job.alerting", JobID: "a.b", Lease: &lease, AlertReasons: []leaseapi.AlertReason{leaseapi.ReasonRuntimeExceeded}, Repeat: true},
			map[string]string{"jobId": `"a.b"`, "reasons": `["runtime_exceeded"]`, "repeat": "true"}},
		{leaseapi.WebhookEvent{Type: "job.alerting", JobID: "a.b", Lease: &lease, AlertReasons: []leaseapi.AlertReason{leaseapi.ReasonMissed}},
			map[string]string{"jobId": `"a.b"`, "reasons": `["missed"]`, "repeat": "false"}},
		{leaseapi.WebhookEvent{Type: "job.ok", JobID: "a.b", Lease: &lease},
			map[string]string{"jobId": `"a.b"`, "reasons": `[]`}},
	} {
		b, err := api.MarshalWebhookData(&tt.e)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if _, ok := got["lease"]; !ok {
			t.Errorf("%s: no lease in %s", tt.e.Type, b)
		}
		delete(got, "lease")
		if len(got) != len(tt.want) {
			t.Errorf("%s: data %s, want the fields %v and lease", tt.e.Type, b, tt.want)
		}
		for k, v := range tt.want {
			if string(got[k]) != v {
				t.Errorf("%s: %s is %s, want %s", tt.e.Type, k, got[k], v)
			}
		}
	}
}
