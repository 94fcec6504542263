package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// plainLease and plainProblem are Lease and Problem without their
// MarshalJSON methods: encoding/json encodes them by reflection, the
// reference AppendJSON is held to.
type plainLease Lease

type plainProblem struct {
	Type   string      `json:"type"`
	Title  string      `json:"title"`
	Status int         `json:"status"`
	Detail string      `json:"detail"`
	Code   string      `json:"code"`
	Lease  *plainLease `json:"lease,omitempty"`
	Now    *Time       `json:"now,omitempty"`
	Group  *Group      `json:"group,omitempty"`
}

// FuzzAppendJSON: AppendJSON of a lease and of a problem is valid JSON that
// decodes to what encoding/json's own encoding decodes to, and is the same
// bytes when no string holds <, > or & (which encoding/json escapes).
func FuzzAppendJSON(f *testing.F) {
	f.Add("job-1", "replica-1", "the lease is held by replica-1", int64(7), int64(1764486000123), true, true)
	f.Add("a", `"quoted" \back\slash`, "tab\there\nnewline\x00nul\x1f", int64(1), int64(0), false, false)
	f.Add("<b>&", "ünïcödé ✓", "bad utf-8 \xff\xfe and \u2028\u2029 separators", int64(-1), int64(-62135596800000), true, false)
	f.Add("", "", "", int64(9223372036854775807), int64(253402300799999), false, true)
	f.Fuzz(func(t *testing.T, jobID, owner, detail string, token, ms int64, withTimes, withLease bool) {
		at := time.UnixMilli(ms)
		if at.Year() < 0 || at.Year() > 9999 {
			at = time.UnixMilli(0) // the wire has four-digit years only
		}
		outcome := leaseapi.Outcome(owner)
		l := Lease{
			JobID: jobID, Owner: owner, Token: token, State: leaseapi.State(detail),
			AcquiredAt: NewTime(at), RenewedAt: NewTime(at.Add(time.Second)), ExpiresAt: NewTime(at.Add(time.Minute)),
			TTLMs: ms,
		}
		if withTimes {
			released, tick := NewTime(at.Add(2*time.Second)), NewTime(at.Add(-time.Hour))
			l.ReleasedAt, l.Tick, l.LastCompletedTick, l.LastOutcome = &released, &tick, &tick, &outcome
		}
		p := Problem{Type: ProblemTypePrefix + owner, Title: jobID, Status: int(token % 1000), Detail: detail, Code: owner}
		ref := plainProblem{Type: p.Type, Title: p.Title, Status: p.Status, Detail: p.Detail, Code: p.Code}
		if withLease {
			p.Lease = &l
			ref.Lease = (*plainLease)(&l)
		}
		if withTimes { // a tick_ahead's clock
			now := NewTime(at)
			p.Now, ref.Now = &now, &now
		}
		if withTimes != withLease { // an alerting job
			l.Alerting, l.AlertReasons = true, []leaseapi.AlertReason{leaseapi.AlertReason(owner), leaseapi.ReasonMissed}
		}
		if withLease && !withTimes { // a group_full's group
			group, slot := jobID, token
			l.Group, l.Slot, l.SlotToken = &group, &slot, &ms
			g := Group{Name: jobID, Limit: token, Held: ms, CreatedBy: &owner, CreatedAt: NewTime(at),
				Holders: []GroupHolder{{JobID: jobID, Owner: owner, Token: token, Slot: 1, SlotToken: ms, ExpiresAt: NewTime(at)}, {JobID: detail}}}
			p.Group, ref.Group = &g, &g
		}
		sameJSON(t, "lease", l.AppendJSON(nil), plainLease(l), jobID+owner+detail)
		sameJSON(t, "problem", p.AppendJSON(nil), ref, jobID+owner+detail)
	})
}

func sameJSON(t *testing.T, what string, got []byte, reference any, strs string) {
	t.Helper()
	want, err := json.Marshal(reference)
	if err != nil {
		t.Fatalf("%s: reference encoding: %v", what, err)
	}
	if !json.Valid(got) {
		t.Fatalf("%s: AppendJSON is not valid JSON: %s", what, got)
	}
	var gotValue, wantValue any
	if err := json.Unmarshal(got, &gotValue); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &wantValue); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotValue, wantValue) {
		t.Fatalf("%s: AppendJSON decodes differently\n got: %s\nwant: %s", what, got, want)
	}
	if !strings.ContainsAny(strs, "<>&") && !bytes.Equal(got, want) {
		t.Fatalf("%s: AppendJSON differs from encoding/json\n got: %s\nwant: %s", what, got, want)
	}
}
