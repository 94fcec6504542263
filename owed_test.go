package leaseapi_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

func TestValidateCatchUp(t *testing.T) {
	for _, c := range []struct {
		policy leaseapi.CatchUp
		window time.Duration
		field  string // "" when valid
	}{
		{"", 0, ""},
		{leaseapi.CatchUpNone, 0, ""},
		{leaseapi.CatchUpLatest, 0, ""},
		{leaseapi.CatchUpLatest, leaseapi.MinCatchUpWindow, ""},
		{leaseapi.CatchUpLatest, leaseapi.MaxCatchUpWindow, ""},
		{"", time.Hour, ""},
		{"Latest", 0, "catchUp"},
		{"all", 0, "catchUp"},
		{leaseapi.CatchUpLatest, leaseapi.MinCatchUpWindow - time.Millisecond, "catchUpWindowMs"},
		{leaseapi.CatchUpLatest, leaseapi.MaxCatchUpWindow + time.Millisecond, "catchUpWindowMs"},
		{leaseapi.CatchUpLatest, -time.Minute, "catchUpWindowMs"},
	} {
		err := leaseapi.ValidateCatchUp(c.policy, c.window)
		if c.field == "" {
			if err != nil {
				t.Errorf("ValidateCatchUp(%q, %v) = %v, want nil", c.policy, c.window, err)
			}
			continue
		}
		var ie *leaseapi.InvalidError
		if !errors.As(err, &ie) || ie.Field != c.field || !errors.Is(err, leaseapi.ErrInvalid) {
			t.Errorf("ValidateCatchUp(%q, %v) = %v, want an InvalidError of %s", c.policy, c.window, err, c.field)
		}
	}
}

func TestTriggerParamsValidate(t *testing.T) {
	ok := leaseapi.TriggerParams{JobID: "etl:nightly", Reason: "rerun after fix", Key: "k-1", Grace: time.Minute}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v", ok, err)
	}
	for name, c := range map[string]struct {
		edit  func(*leaseapi.TriggerParams)
		field string
	}{
		"job id":          {func(p *leaseapi.TriggerParams) { p.JobID = "-x" }, "jobId"},
		"reason too long": {func(p *leaseapi.TriggerParams) { p.Reason = strings.Repeat("é", 257) }, "reason"},
		"reason control":  {func(p *leaseapi.TriggerParams) { p.Reason = "a\nb" }, "reason"},
		"key too long":    {func(p *leaseapi.TriggerParams) { p.Key = strings.Repeat("k", 257) }, "Idempotency-Key"},
		"key not ascii":   {func(p *leaseapi.TriggerParams) { p.Key = "ké" }, "Idempotency-Key"},
		"no grace":        {func(p *leaseapi.TriggerParams) { p.Grace = 0 }, "grace"},
	} {
		p := ok
		c.edit(&p)
		var ie *leaseapi.InvalidError
		if err := p.Validate(); !errors.As(err, &ie) || ie.Field != c.field {
			t.Errorf("%s: Validate = %v, want an InvalidError of %s", name, err, c.field)
		}
	}
	longest := ok
	longest.Reason, longest.Key = strings.Repeat("é", 256), strings.Repeat("k", 256)
	if err := longest.Validate(); err != nil {
		t.Errorf("the longest reason and key: %v", err)
	}
}

func TestOwedParamsValidate(t *testing.T) {
	ids := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = "job-" + strings.Repeat("a", i%5)
		}
		return s
	}
	for _, n := range []int{1, leaseapi.MaxOwedJobs} {
		if err := (&leaseapi.OwedParams{JobIDs: ids(n)}).Validate(); err != nil {
			t.Errorf("%d ids: %v", n, err)
		}
	}
	for name, p := range map[string]leaseapi.OwedParams{
		"none":     {},
		"too many": {JobIDs: ids(leaseapi.MaxOwedJobs + 1)},
		"bad id":   {JobIDs: []string{"ok", "a b"}},
		"empty id": {JobIDs: []string{""}},
	} {
		var ie *leaseapi.InvalidError
		if err := p.Validate(); !errors.As(err, &ie) || ie.Field != "jobs" {
			t.Errorf("%s: Validate = %v, want an InvalidError of jobs", name, err)
		}
	}
}

func TestManualTick(t *testing.T) {
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	now := *at("2026-12-02T06:00:00.123456789Z")
	for _, c := range []struct {
		name                   string
		lastCompleted, current *time.Time
		want                   string
	}{
		{"the clock, at millisecond precision", nil, nil, "2026-12-02T06:00:00.123Z"},
		{"older ticks do not matter", at("2026-12-02T05:00:00Z"), at("2026-12-02T05:00:00Z"), "2026-12-02T06:00:00.123Z"},
		{"after the last completed tick", at("2026-12-02T07:00:00Z"), nil, "2026-12-02T07:00:00.001Z"},
		{"after the current tick", at("2026-12-02T07:00:00Z"), at("2026-12-02T08:00:00.5Z"), "2026-12-02T08:00:00.501Z"},
		{"a tick equal to the clock", nil, at("2026-12-02T06:00:00.123Z"), "2026-12-02T06:00:00.124Z"},
	} {
		got := leaseapi.ManualTick(now, c.lastCompleted, c.current)
		if want := *at(c.want); !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%s: ManualTick = %v, want %v in UTC", c.name, got, want)
		}
	}
	if g := leaseapi.ManualTickGrace(time.Minute, leaseapi.DefaultTriggerGrace); g != leaseapi.DefaultTriggerGrace {
		t.Errorf("ManualTickGrace(1m, 5m) = %v", g)
	}
	if g := leaseapi.ManualTickGrace(time.Hour, leaseapi.DefaultTriggerGrace); g != time.Hour {
		t.Errorf("ManualTickGrace(1h, 5m) = %v", g)
	}
}

func TestCatchUpAndTriggerValues(t *testing.T) {
	for _, c := range []leaseapi.CatchUp{leaseapi.CatchUpNone, leaseapi.CatchUpLatest} {
		if !c.Valid() {
			t.Errorf("%q is not valid", c)
		}
	}
	for _, tr := range []leaseapi.Trigger{leaseapi.TriggerSchedule, leaseapi.TriggerCatchUp, leaseapi.TriggerManual} {
		if !tr.Valid() {
			t.Errorf("%q is not valid", tr)
		}
	}
	if leaseapi.CatchUp("").Valid() || leaseapi.Trigger("").Valid() || leaseapi.Trigger("cron").Valid() {
		t.Error("an empty or unknown value is valid")
	}
}

func TestAcquireParamsCatchUp(t *testing.T) {
	base := leaseapi.AcquireParams{JobID: "etl:nightly", Owner: "r1", TTL: time.Minute, Schedule: "30 2 * * *", Grace: time.Minute}
	for _, c := range []struct {
		name  string
		edit  func(p *leaseapi.AcquireParams)
		field string // "" when valid
	}{
		{"none sent", func(p *leaseapi.AcquireParams) {}, ""},
		{"latest with the schedule", func(p *leaseapi.AcquireParams) { p.CatchUp = leaseapi.CatchUpLatest }, ""},
		{"latest with a window", func(p *leaseapi.AcquireParams) {
			p.CatchUp, p.CatchUpWindow = leaseapi.CatchUpLatest, time.Hour
		}, ""},
		{"policy without a schedule", func(p *leaseapi.AcquireParams) {
			p.Schedule, p.Grace, p.CatchUp = "", 0, leaseapi.CatchUpLatest
		}, "catchUp"},
		{"window without a policy", func(p *leaseapi.AcquireParams) { p.CatchUpWindow = time.Hour }, "catchUpWindowMs"},
		{"unknown policy", func(p *leaseapi.AcquireParams) { p.CatchUp = "all" }, "catchUp"},
		{"window too short", func(p *leaseapi.AcquireParams) {
			p.CatchUp, p.CatchUpWindow = leaseapi.CatchUpLatest, time.Second
		}, "catchUpWindowMs"},
	} {
		p := base
		c.edit(&p)
		err := p.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", c.name, err)
			}
			continue
		}
		var ie *leaseapi.InvalidError
		if !errors.As(err, &ie) || ie.Field != c.field {
			t.Errorf("%s: Validate() = %v, want an InvalidError of %s", c.name, err, c.field)
		}
	}
}
