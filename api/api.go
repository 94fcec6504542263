// Package api is the wire contract of leaseapi: the OpenAPI document the
// server implements (Spec, served at /openapi.yaml), the JSON request and
// response types, and the problem codes. The handlers decode and encode
// these types, and clients such as the jobs runner use them too.
package api

import (
	"cmp"
	_ "embed"
	"time"

	"github.com/leaseapi/leaseapi"
)

// Spec is api/openapi.yaml, the OpenAPI 3.0.3 document of the HTTP API.
//
//go:embed openapi.yaml
var Spec []byte

// Problem codes: the machine `code` of every problem+json response.
const (
	CodeInvalidRequest       = "invalid_request"        // 400
	CodeUnauthorized         = "unauthorized"           // 401
	CodeForbidden            = "forbidden"              // 403
	CodeNotFound             = "not_found"              // 404
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeLeaseHeld            = "lease_held"             // 409
	CodeTickDone             = "tick_done"              // 409
	CodeLeaseLost            = "lease_lost"             // 409
	CodeJobPaused            = "job_paused"             // 409
	CodeTickAhead            = "tick_ahead"             // 409
	CodePayloadTooLarge      = "payload_too_large"      // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415
	CodeInternal             = "internal"               // 500
	CodeUnavailable          = "unavailable"            // 503
	CodeOverloaded           = "overloaded"             // 503
	CodeRateLimited          = "rate_limited"           // 429
	CodeCredentialExists     = "credential_exists"      // 409
	CodeWebhookExists        = "webhook_exists"         // 409
	// CodeIdempotencyKeyReused: an Idempotency-Key sent with another request.
	CodeIdempotencyKeyReused = "idempotency_key_reused" // 422
	// CodeIdempotencyKeyInFlight: the key's first request is not answered yet.
	CodeIdempotencyKeyInFlight = "idempotency_key_in_flight" // 409
	// CodeGroupFull: every slot of the job's concurrency group is in use.
	CodeGroupFull = "group_full" // 409
	// CodeGroupInUse: a job is still in the group to be deleted.
	CodeGroupInUse = "group_in_use" // 409
	// CodePolicyNotFound: the job has no alert policy.
	CodePolicyNotFound = "policy_not_found" // 404
	// CodeTooSoon: the job's previous grant started less than the
	// acquire's minIntervalMs ago.
	CodeTooSoon = "too_soon" // 409
	// CodeFeatureDisabled: the request asks for a rule the database is
	// not finalized for yet (leaseapi upgrade finalize).
	CodeFeatureDisabled = "feature_disabled" // 400
)

// ProblemTypePrefix prefixes the code to form a problem's `type` URI. The URI
// identifies the problem; it is not meant to be dereferenced.
const ProblemTypePrefix = "https://leaseapi.dev/problems/"

// ProblemContentType is the media type of error responses (RFC 9457).
const ProblemContentType = "application/problem+json"

// MaxBodyBytes is the largest request body the server reads (64 KiB).
const MaxBodyBytes = 64 << 10

// Problem is an RFC 9457 problem details document with a machine code.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	// Lease is the lease as it was when a conflict (409) was decided.
	Lease *Lease `json:"lease,omitempty"`
	// Now is the store's clock when a tick_ahead refusal was decided.
	Now *Time `json:"now,omitempty"`
	// Group is the job's concurrency group when a group_full refusal was
	// decided, with at most leaseapi.MaxGroupFullHolders holders.
	Group *Group `json:"group,omitempty"`
}

// Lease is a job's lease on the wire: the Lease schema of api/openapi.yaml.
type Lease struct {
	JobID             string            `json:"jobId"`
	Owner             string            `json:"owner"`
	Token             int64             `json:"token"`
	Timeline          *int64            `json:"timeline"`
	State             leaseapi.State    `json:"state"`
	AcquiredAt        Time              `json:"acquiredAt"`
	RenewedAt         Time              `json:"renewedAt"`
	ExpiresAt         Time              `json:"expiresAt"`
	ReleasedAt        *Time             `json:"releasedAt"`
	TTLMs             int64             `json:"ttlMs"`
	Tick              *Time             `json:"tick"`
	LastCompletedTick *Time             `json:"lastCompletedTick"`
	LastOutcome       *leaseapi.Outcome `json:"lastOutcome"`
	Schedule          *string           `json:"schedule"`
	GraceMs           *int64            `json:"graceMs"`
	NextTick          *Time             `json:"nextTick"`
	Paused            bool              `json:"paused"`
	PausedAt          *Time             `json:"pausedAt"`
	PausedBy          *string           `json:"pausedBy"`
	PausedReason      *string           `json:"pausedReason"`
	MissedTicks       int64             `json:"missedTicks"`
	SkippedTicks      int64             `json:"skippedTicks"`
	RevokedBy         *string           `json:"revokedBy"`
	// CatchUp and CatchUpWindowMs are the job's catch-up policy; OwedTick
	// and OwedReason the tick it owes (nil when nothing).
	CatchUp         leaseapi.CatchUp  `json:"catchUp"`
	CatchUpWindowMs int64             `json:"catchUpWindowMs"`
	OwedTick        *Time             `json:"owedTick"`
	OwedReason      *leaseapi.Trigger `json:"owedReason"`
	// Group is the job's concurrency group, nil for none; Slot and
	// SlotToken the group's slot the current grant took and its slot
	// token, nil when it took none.
	Group     *string `json:"group"`
	Slot      *int64  `json:"slot"`
	SlotToken *int64  `json:"slotToken"`
	// Alerting is whether the job's alert policy has it alerting (false
	// without one); AlertReasons are its reasons, absent while not.
	Alerting     bool                   `json:"alerting"`
	AlertReasons []leaseapi.AlertReason `json:"alertReasons,omitempty"`
}

// LeaseList is one page of GET /leases.
type LeaseList struct {
	Leases []Lease `json:"leases"`
	// NextCursor is the cursor of the next page, or nil on the last page.
	NextCursor *string `json:"nextCursor"`
	// ServerTime is the store's clock when the page was read.
	ServerTime Time `json:"serverTime"`
}

// Run is one grant of a lease, or one missed tick, in GET
// /leases/{jobId}/runs and GET /runs. A missed run has no token, owner,
// start or duration.
type Run struct {
	JobID     string           `json:"jobId"`
	Token     *int64           `json:"token"`
	Owner     *string          `json:"owner"`
	Tick      *Time            `json:"tick"`
	StartedAt *Time            `json:"startedAt"`
	EndedAt   *Time            `json:"endedAt"`
	Outcome   leaseapi.Outcome `json:"outcome"`
	// DurationMs is EndedAt - StartedAt in milliseconds, nil while running
	// and for a missed run.
	DurationMs *int64 `json:"durationMs"`
	// RevokedBy names who revoked the run, or nil.
	RevokedBy *string `json:"revokedBy"`
	// Trigger is what started the run; TriggeredBy who triggered a manual
	// tick (nil otherwise, or when the API is open).
	Trigger     leaseapi.Trigger `json:"trigger"`
	TriggeredBy *string          `json:"triggeredBy"`
	// Group, Slot and SlotToken are the concurrency group the grant was
	// made in and the slot it took (nil for none). GroupFull marks a
	// missed run whose group had every slot in use at the end of its
	// tick's grace.
	Group     *string `json:"group"`
	Slot      *int64  `json:"slot"`
	SlotToken *int64  `json:"slotToken"`
	GroupFull bool    `json:"groupFull"`
}

// RunList is the body of GET /leases/{jobId}/runs.
type RunList struct {
	Runs []Run `json:"runs"`
}

// RecentRunList is one page of GET /runs: the runs of every job in the
// caller's scopes, newest first.
type RecentRunList struct {
	Runs []Run `json:"runs"`
	// NextCursor is the cursor of the next page, or nil on the last page.
	NextCursor *string `json:"nextCursor"`
	// ServerTime is the store's clock when the page was read.
	ServerTime Time `json:"serverTime"`
}

// Stats is the body of GET /stats: the leases by state, the paused and
// overdue jobs, and the runs that ended in the last 24 hours by outcome,
// of the jobs in the caller's scopes.
type Stats struct {
	Leases     LeaseCounts `json:"leases"`
	Paused     int64       `json:"paused"`
	Overdue    int64       `json:"overdue"`
	Runs24h    RunCounts   `json:"runs24h"`
	ServerTime Time        `json:"serverTime"`
}

// LeaseCounts counts leases by state.
type LeaseCounts struct {
	Held     int64 `json:"held"`
	Released int64 `json:"released"`
	Expired  int64 `json:"expired"`
	Revoked  int64 `json:"revoked"`
}

// RunCounts counts finished runs by outcome.
type RunCounts struct {
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Expired   int64 `json:"expired"`
	Revoked   int64 `json:"revoked"`
	Missed    int64 `json:"missed"`
}

// FromStats converts store counts to their wire form.
func FromStats(st leaseapi.Stats) Stats {
	return Stats{
		Leases: LeaseCounts{
			Held: st.Leases[leaseapi.StateHeld], Released: st.Leases[leaseapi.StateReleased],
			Expired: st.Leases[leaseapi.StateExpired], Revoked: st.Leases[leaseapi.StateRevoked],
		},
		Paused: st.Paused, Overdue: st.Overdue,
		Runs24h: RunCounts{
			Succeeded: st.Runs24h[leaseapi.OutcomeSucceeded], Failed: st.Runs24h[leaseapi.OutcomeFailed],
			Expired: st.Runs24h[leaseapi.OutcomeExpired], Revoked: st.Runs24h[leaseapi.OutcomeRevoked],
			Missed: st.Runs24h[leaseapi.OutcomeMissed],
		},
		ServerTime: NewTime(st.Now),
	}
}

// AcquireRequest is the body of POST /leases/{jobId}/acquire.
type AcquireRequest struct {
	Owner string `json:"owner"`
	// TTLMs is the grant's TTL in milliseconds; nil means the server default.
	TTLMs *int64 `json:"ttlMs,omitempty"`
	// Tick is the scheduled fire time (RFC 3339), or nil. It is a string so
	// that the server can name the field when it is not RFC 3339; FormatTime
	// formats one.
	Tick *string `json:"tick,omitempty"`
	// NearestTick asks the server to pick the tick: the schedule's newest
	// tick at or before the database clock plus a margin. Not with Tick.
	NearestTick bool `json:"nearestTick,omitempty"`
	// Group puts the job in that concurrency group at a new grant: a name
	// joins it, "" leaves any group; nil keeps the stored group.
	Group *string `json:"group,omitempty"`
	// Schedule is the job's cron spec (package schedule), registered when
	// the acquire is granted; nil leaves the stored one as it is.
	Schedule *string `json:"schedule,omitempty"`
	// GraceMs is how long after a tick a replica may still start it, in
	// milliseconds; nil means the server default. It needs Schedule.
	GraceMs *int64 `json:"graceMs,omitempty"`
	// CatchUp is the catch-up policy to register with Schedule ("none" or
	// "latest"); nil keeps the stored one. CatchUpWindowMs is its window
	// (1 min to 7 days; nil: 24 h); it needs CatchUp.
	CatchUp         *string `json:"catchUp,omitempty"`
	CatchUpWindowMs *int64  `json:"catchUpWindowMs,omitempty"`
	// MinIntervalMs refuses a new grant sooner than this many milliseconds
	// after the job's previous grant started (too_soon); nil or 0 for no
	// minimum.
	MinIntervalMs *int64 `json:"minIntervalMs,omitempty"`
}

// TriggerRequest is the body of POST /leases/{jobId}/trigger.
type TriggerRequest struct {
	// Reason says why, at most 256 characters.
	Reason *string `json:"reason,omitempty"`
}

// MaxOwedBodyBytes is the largest body of POST /owed (256 KiB), whose
// 1,000 job ids may be longer than MaxBodyBytes allows.
const MaxOwedBodyBytes = 256 << 10

// OwedRequest is the body of POST /owed.
type OwedRequest struct {
	// Jobs are the job ids to ask about, 1 to leaseapi.MaxOwedJobs.
	Jobs []string `json:"jobs"`
}

// OwedList is the answer of POST /owed: the ticks the asked jobs owe, in
// job id order, without the jobs that owe nothing, are unknown or are out
// of the caller's scopes.
type OwedList struct {
	Owed []Owed `json:"owed"`
}

// Owed is one tick a job owes.
type Owed struct {
	JobID         string           `json:"jobId"`
	Tick          Time             `json:"tick"`
	Reason        leaseapi.Trigger `json:"reason"`
	TriggeredBy   *string          `json:"triggeredBy"`
	TriggerReason *string          `json:"triggerReason"`
}

// FromOwed converts what jobs owe to the wire form; never nil.
func FromOwed(os []leaseapi.Owed) []Owed {
	out := make([]Owed, 0, len(os))
	for _, o := range os {
		out = append(out, Owed{JobID: o.JobID, Tick: NewTime(o.Tick), Reason: o.Reason,
			TriggeredBy: stringPtr(o.TriggeredBy), TriggerReason: stringPtr(o.TriggerReason)})
	}
	return out
}

// PauseRequest is the body of POST /leases/{jobId}/pause.
type PauseRequest struct {
	// Reason says why, at most 256 characters.
	Reason *string `json:"reason,omitempty"`
}

// RepairRequest is the body of POST /leases/{jobId}/repair.
type RepairRequest struct {
	// Reason says why, at most 256 characters.
	Reason *string `json:"reason,omitempty"`
}

// ResumeRequest is the body of POST /leases/{jobId}/resume: an empty object.
type ResumeRequest struct{}

// HeartbeatRequest is the body of POST /leases/{jobId}/heartbeat.
type HeartbeatRequest struct {
	Owner string `json:"owner"`
	Token int64  `json:"token"`
	// TTLMs is the new TTL in milliseconds; nil keeps the grant's TTL.
	TTLMs *int64 `json:"ttlMs,omitempty"`
}

// ReleaseRequest is the body of POST /leases/{jobId}/release.
type ReleaseRequest struct {
	Owner string `json:"owner"`
	Token int64  `json:"token"`
	// Outcome is succeeded (the default when nil) or failed.
	Outcome *leaseapi.Outcome `json:"outcome,omitempty"`
}

// Status is the body of GET /readyz.
type Status struct {
	Status string `json:"status"`
}

// Health is the body of GET /healthz: alive, and the version that serves.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// FromLease converts a domain lease to its wire form.
func FromLease(l leaseapi.Lease) Lease {
	out := Lease{
		JobID:             l.JobID,
		Owner:             l.Owner,
		Token:             l.Token,
		Timeline:          int64Ptr(l.Timeline),
		State:             l.State,
		AcquiredAt:        NewTime(l.AcquiredAt),
		RenewedAt:         NewTime(l.RenewedAt),
		ExpiresAt:         NewTime(l.ExpiresAt),
		ReleasedAt:        timePtr(l.ReleasedAt),
		TTLMs:             l.TTL.Milliseconds(),
		Tick:              timePtr(l.Tick),
		LastCompletedTick: timePtr(l.LastCompletedTick),
		NextTick:          timePtr(l.NextTick),
		Paused:            l.Paused(),
		PausedAt:          timePtr(l.PausedAt),
		PausedBy:          stringPtr(l.PausedBy),
		PausedReason:      stringPtr(l.PausedReason),
		MissedTicks:       l.MissedTicks,
		SkippedTicks:      l.SkippedTicks,
		RevokedBy:         stringPtr(l.RevokedBy),
		CatchUp:           cmp.Or(l.CatchUp, leaseapi.CatchUpNone),
		CatchUpWindowMs:   cmp.Or(l.CatchUpWindow, leaseapi.DefaultCatchUpWindow).Milliseconds(),
		OwedTick:          timePtr(l.OwedTick),
		Group:             stringPtr(l.Group),
		Slot:              int64Ptr(int64(l.Slot)),
		SlotToken:         int64Ptr(l.SlotToken),
	}
	if l.OwedReason != "" {
		r := l.OwedReason
		out.OwedReason = &r
	}
	if l.AlertStatus == leaseapi.AlertAlerting {
		out.Alerting, out.AlertReasons = true, l.AlertReasons
	}
	if l.LastOutcome != "" {
		o := l.LastOutcome
		out.LastOutcome = &o
	}
	if l.Schedule != "" {
		spec, grace := l.Schedule, l.Grace.Milliseconds()
		out.Schedule, out.GraceMs = &spec, &grace
	}
	return out
}

// int64Ptr is nil for 0, else a pointer to a copy of n.
func int64Ptr(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

// stringPtr is nil for "", else a pointer to a copy of s.
func stringPtr(s string) *string {
	if s == "" {
		return nil // without allocating: &s would move s to the heap on every call
	}
	p := new(string)
	*p = s
	return p
}

// FromLeases converts a page of domain leases; the result is never nil, so
// that an empty page encodes as [].
func FromLeases(ls []leaseapi.Lease) []Lease {
	out := make([]Lease, 0, len(ls))
	for _, l := range ls {
		out = append(out, FromLease(l))
	}
	return out
}

// FromRun converts a domain run to its wire form.
func FromRun(r leaseapi.Run) Run {
	out := Run{
		JobID:       r.JobID,
		Tick:        timePtr(r.Tick),
		StartedAt:   timePtr(r.StartedAt),
		EndedAt:     timePtr(r.EndedAt),
		Outcome:     r.Outcome,
		RevokedBy:   stringPtr(r.RevokedBy),
		Trigger:     cmp.Or(r.Trigger, leaseapi.TriggerSchedule),
		TriggeredBy: stringPtr(r.TriggeredBy),
		Group:       stringPtr(r.Group),
		Slot:        int64Ptr(int64(r.Slot)),
		SlotToken:   int64Ptr(r.SlotToken),
		GroupFull:   r.GroupFull,
	}
	// A missed run has no holder; nor has a discarded one that was missed.
	if r.Outcome != leaseapi.OutcomeMissed && r.StartedAt != nil {
		token, owner := r.Token, r.Owner
		out.Token, out.Owner = &token, &owner
	}
	if d, ok := r.Duration(); ok {
		ms := d.Milliseconds()
		out.DurationMs = &ms
	}
	return out
}

// FromRuns converts run history; the result is never nil.
func FromRuns(rs []leaseapi.Run) []Run {
	out := make([]Run, 0, len(rs))
	for _, r := range rs {
		out = append(out, FromRun(r))
	}
	return out
}

func timePtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	tt := NewTime(*t)
	return &tt
}

// CreateCredentialRequest is the body of POST /credentials.
type CreateCredentialRequest struct {
	Name   string        `json:"name"`
	Role   leaseapi.Role `json:"role"`
	Scopes []string      `json:"scopes"`
	// RatePerSecond limits the credential's acquires and reads per
	// instance; absent takes the server's default, 0 means no limit.
	RatePerSecond *float64 `json:"ratePerSecond,omitempty"`
}

// Credential is a credential as listed: never its secret.
type Credential struct {
	ID            string        `json:"id"`
	Name          string        `json:"name"`
	Role          leaseapi.Role `json:"role"`
	Scopes        []string      `json:"scopes"`
	RatePerSecond *float64      `json:"ratePerSecond"`
	CreatedAt     Time          `json:"createdAt"`
}

// CreatedCredential is the answer of POST /credentials: the credential
// and its bearer token, shown this once and never again.
type CreatedCredential struct {
	Credential
	Token string `json:"token"`
}

// CredentialList is the answer of GET /credentials.
type CredentialList struct {
	Credentials []Credential `json:"credentials"`
}

// FromCredential converts a credential to its wire form.
func FromCredential(c leaseapi.Credential) Credential {
	return Credential{ID: c.ID, Name: c.Name, Role: c.Role, Scopes: c.Scopes, RatePerSecond: c.RatePerSecond, CreatedAt: NewTime(c.CreatedAt)}
}

// Whoami is the answer of GET /whoami: the caller's credential, or open
// mode (no credential exists and none is needed).
type Whoami struct {
	Open   bool          `json:"open,omitempty"`
	Name   string        `json:"name,omitempty"`
	Role   leaseapi.Role `json:"role,omitempty"`
	Scopes []string      `json:"scopes,omitempty"`
}
