package leaseapi

import (
	"errors"
	"time"
	"unicode"
	"unicode/utf8"
)

// ErrInvalid: a parameter is outside its domain (invalid_request). Every
// *InvalidError unwraps to it.
var ErrInvalid = errors.New("invalid parameter")

// InvalidError names the parameter that is outside its domain and the rule
// it breaks, worded for the caller who has to change it.
type InvalidError struct {
	// Field is the parameter's name as the API spells it (jobId, owner, ttlMs, ...).
	Field string
	// Rule says what a valid value is.
	Rule string
}

func (e *InvalidError) Error() string { return "invalid " + e.Field + ": " + e.Rule }

// Unwrap returns ErrInvalid, for errors.Is.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// The rules of the parameters, in the words the API answers with.
const (
	jobIDRule  = "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
	ownerRule  = "must be 1 to 128 printable ASCII characters without spaces (0x21-0x7E)"
	tokenRule  = "must be the integer (>= 1) that acquire returned"
	tickRule   = "must be a time from year 0001 to 9999"
	limitRule  = "must be at least 1"
	prefixRule = "must be 0 to 128 characters of A-Z a-z 0-9 . _ : -"
)

// ValidJobID reports whether id is a valid job id:
// ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$, checked by hand (every request
// checks one, twice). Validation lives in this package so that every layer
// (handlers, runner, stores) agrees on it.
func ValidJobID(id string) bool {
	if id == "" || !ValidPrefix(id) {
		return false
	}
	c := id[0]
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// ValidOwner reports whether owner is 1–128 characters of printable ASCII
// without spaces (0x21–0x7E).
func ValidOwner(owner string) bool {
	if len(owner) < 1 || len(owner) > 128 {
		return false
	}
	for i := 0; i < len(owner); i++ {
		if c := owner[i]; c < 0x21 || c > 0x7E {
			return false
		}
	}
	return true
}

// ValidPrefix reports whether s can start a job id: 0–128 characters of the
// job id alphabet. The empty prefix matches every job.
func ValidPrefix(s string) bool {
	if len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// ValidTick reports whether t can be a tick, or any other time a caller
// sends: the wire format writes years with four digits, and year 0000 is
// one that RFC 3339 admits but many clients (Python's datetime among them)
// cannot represent, so a time lies in the years 0001 to 9999.
func ValidTick(t time.Time) bool {
	return !t.Before(minTick) && t.Before(maxTick)
}

var (
	minTick = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	maxTick = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC)
)

// ErrGraceWithoutSchedule refuses a grace sent without a schedule; the API
// refuses the graceMs field without schedule with it even when it is zero.
var ErrGraceWithoutSchedule = &InvalidError{Field: "graceMs", Rule: "is the grace of a schedule: send it with schedule"}

// InvalidSchedule is the error of a schedule spec the parser refused, with
// the parser's reason: the one wording of that rule, for the handlers and
// the stores alike (the schedule package parses; this package cannot
// import it).
func InvalidSchedule(reason error) *InvalidError {
	return &InvalidError{Field: "schedule", Rule: "is not a valid cron spec: " + reason.Error()}
}

// ValidatePrefix returns an *InvalidError when s cannot start a job id.
func ValidatePrefix(s string) error {
	if !ValidPrefix(s) {
		return &InvalidError{Field: "prefix", Rule: prefixRule}
	}
	return nil
}

// ValidateJobID returns an *InvalidError when id is not a valid job id.
func ValidateJobID(id string) error {
	if !ValidJobID(id) {
		return &InvalidError{Field: "jobId", Rule: jobIDRule}
	}
	return nil
}

func validateOwner(owner string) error {
	if !ValidOwner(owner) {
		return &InvalidError{Field: "owner", Rule: ownerRule}
	}
	return nil
}

func validateToken(token int64) error {
	if token < 1 {
		return &InvalidError{Field: "token", Rule: tokenRule}
	}
	return nil
}

// Validate checks p against the domain: a valid job id and owner, a
// TTL of at least a millisecond (the stores' precision), a tick (if any) in the years 0001 to 9999. The bounds an
// instance puts on the TTL are its configuration, checked by the caller.
func (p *AcquireParams) Validate() error {
	if err := ValidateJobID(p.JobID); err != nil {
		return err
	}
	if err := validateOwner(p.Owner); err != nil {
		return err
	}
	if p.TTL < time.Millisecond {
		return &InvalidError{Field: "ttlMs", Rule: "must be at least 1 (milliseconds)"}
	}
	if p.Tick != nil && !ValidTick(*p.Tick) {
		return &InvalidError{Field: "tick", Rule: tickRule}
	}
	if p.Tick != nil && p.NearestTick {
		return &InvalidError{Field: "nearestTick", Rule: "cannot be sent with tick: send tick to name the tick, or nearestTick to let the server pick it"}
	}
	if len(p.Schedule) > MaxScheduleLength {
		return &InvalidError{Field: "schedule", Rule: "must be at most 256 bytes"}
	}
	if p.Schedule == "" && p.Grace != 0 {
		return ErrGraceWithoutSchedule
	}
	if p.Schedule != "" && (p.Grace < time.Millisecond || p.Grace > MaxGrace) {
		return &InvalidError{Field: "graceMs", Rule: "must be an integer from 1 to 86400000 (milliseconds)"}
	}
	if p.CatchUp != "" && p.Schedule == "" {
		return &InvalidError{Field: "catchUp", Rule: "needs schedule: a catch-up policy is registered with the schedule it applies to"}
	}
	if p.CatchUpWindow != 0 && p.CatchUp == "" {
		return &InvalidError{Field: "catchUpWindowMs", Rule: "needs catchUp"}
	}
	if p.Group != nil && *p.Group != "" {
		if err := ValidateGroupName("group", *p.Group); err != nil {
			return err
		}
	}
	if p.MinInterval != 0 && !ValidMinInterval(p.MinInterval) {
		return &InvalidError{Field: "minIntervalMs", Rule: "must be an integer from 0 (none) to 2678400000 (31 days, in milliseconds)"}
	}
	return ValidateCatchUp(p.CatchUp, p.CatchUpWindow)
}

// MaxScheduleLength is the longest schedule spec, in bytes; MaxGrace the
// longest grace; MaxMinInterval the longest minimum interval between two
// grants of a job (AcquireParams.MinInterval).
const (
	MaxScheduleLength = 256
	MaxGrace          = 24 * time.Hour
	MaxMinInterval    = 31 * 24 * time.Hour
)

// ValidMinInterval reports whether d is a minimum interval between two
// grants (AcquireParams.MinInterval): whole milliseconds, as minIntervalMs
// carries it, from 1 ms to MaxMinInterval.
func ValidMinInterval(d time.Duration) bool {
	return d >= time.Millisecond && d <= MaxMinInterval && d%time.Millisecond == 0
}

// MaxReasonLength is the longest pause reason, in characters.
const MaxReasonLength = 256

// Validate checks p against the domain: a valid job id. By is set by the
// service, not by the caller, and is not checked.
func (p *RevokeParams) Validate() error { return ValidateJobID(p.JobID) }

// Validate checks p against the domain: a valid job id, and a reason of at
// most 256 characters of text (valid UTF-8, no control characters). By is
// set by the service, not by the caller, and is not checked.
func (p *PauseParams) Validate() error {
	if err := ValidateJobID(p.JobID); err != nil {
		return err
	}
	if err := validateReason(p.Reason); err != nil {
		return err
	}
	return nil
}

// Validate checks p against the domain: a valid job id, a window and a
// retention above zero, and a reason as a pause's. By is set by the
// service and is not checked.
func (p *RepairParams) Validate() error {
	if err := ValidateJobID(p.JobID); err != nil {
		return err
	}
	if p.Window <= 0 {
		return &InvalidError{Field: "window", Rule: "must be above zero"}
	}
	if p.Retention <= 0 {
		return &InvalidError{Field: "retention", Rule: "must be above zero"}
	}
	return validateReason(p.Reason)
}

// ValidateJobsAhead checks the inputs of Store.JobsAhead: a window above
// zero and a limit of 1 to MaxJobsAheadLimit.
func ValidateJobsAhead(window time.Duration, limit int) error {
	if window <= 0 {
		return &InvalidError{Field: "window", Rule: "must be above zero"}
	}
	if limit < 1 || limit > MaxJobsAheadLimit {
		return &InvalidError{Field: "limit", Rule: "must be 1 to 1000"}
	}
	return nil
}

func containsControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// Validate checks p against the domain: a valid job id, owner and token,
// and a TTL that is zero (keep the grant's) or at least a millisecond.
func (p *HeartbeatParams) Validate() error {
	if err := ValidateJobID(p.JobID); err != nil {
		return err
	}
	if err := validateOwner(p.Owner); err != nil {
		return err
	}
	if err := validateToken(p.Token); err != nil {
		return err
	}
	if p.TTL != 0 && p.TTL < time.Millisecond {
		return &InvalidError{Field: "ttlMs", Rule: "must be at least 1 (milliseconds), or omitted to keep the grant's"}
	}
	return nil
}

// Validate checks p against the domain: a valid job id, owner and token,
// and outcome succeeded or failed. The empty outcome is invalid here: the
// API's default (succeeded) is applied where the request is read.
func (p *ReleaseParams) Validate() error {
	if err := ValidateJobID(p.JobID); err != nil {
		return err
	}
	if err := validateOwner(p.Owner); err != nil {
		return err
	}
	if err := validateToken(p.Token); err != nil {
		return err
	}
	if !p.Outcome.ValidRelease() {
		return &InvalidError{Field: "outcome", Rule: "must be succeeded or failed"}
	}
	return nil
}

// Validate checks p against the domain: filters that are empty or valid, a
// cursor (After) that is empty or a job id, and a limit of at least 1.
func (p *ListParams) Validate() error {
	if p.State != "" && !p.State.Valid() {
		return &InvalidError{Field: "state", Rule: "must be one of held, released, expired, revoked"}
	}
	if p.Owner != "" {
		if err := validateOwner(p.Owner); err != nil {
			return err
		}
	}
	if err := ValidatePrefix(p.Prefix); err != nil {
		return err
	}
	if p.After != "" && !ValidJobID(p.After) {
		return &InvalidError{Field: "cursor", Rule: "must be the nextCursor of the previous page, unchanged"}
	}
	if p.Limit < 1 {
		return &InvalidError{Field: "limit", Rule: limitRule}
	}
	return nil
}

// Validate checks p against the domain: outcomes that are each a run's
// outcome, given once; a valid prefix; a cursor (After) in the years 0001
// to 9999 with an ID of at least 1; and a limit of at least 1.
func (p *RecentRunsParams) Validate() error {
	seen := make(map[Outcome]bool, len(p.Outcomes))
	for _, o := range p.Outcomes {
		if !o.Valid() {
			return &InvalidError{Field: "outcome", Rule: outcomesRule}
		}
		if seen[o] {
			return &InvalidError{Field: "outcome", Rule: "must name each outcome at most once"}
		}
		seen[o] = true
	}
	if err := ValidatePrefix(p.Prefix); err != nil {
		return err
	}
	if p.After != nil && (p.After.ID < 1 || !ValidTick(p.After.At)) {
		return &InvalidError{Field: "cursor", Rule: "must be the nextCursor of the previous page, unchanged"}
	}
	if p.Limit < 1 {
		return &InvalidError{Field: "limit", Rule: limitRule}
	}
	return nil
}

// outcomesRule is the rule of an outcome filter.
const outcomesRule = "must be a comma-separated list of running, succeeded, failed, expired, revoked, missed"

// Validate checks p against the domain: a valid job id and a limit of at
// least 1.
func (p *RunsParams) Validate() error {
	if err := ValidateJobID(p.JobID); err != nil {
		return err
	}
	if p.Limit < 1 {
		return &InvalidError{Field: "limit", Rule: limitRule}
	}
	return nil
}

// ValidatePrune checks the inputs of Store.PruneRuns: a retention that is
// not negative and a batch of at least 1.
func ValidatePrune(retention time.Duration, batch int) error {
	if retention < 0 {
		return &InvalidError{Field: "retention", Rule: "must not be negative"}
	}
	if batch < 1 {
		return &InvalidError{Field: "batch", Rule: limitRule}
	}
	return nil
}

// validateReason is the rule of an operator's reason (a pause's, a
// trigger's): at most MaxReasonLength characters of text (valid UTF-8, no
// control characters).
func validateReason(reason string) error {
	if !utf8.ValidString(reason) || utf8.RuneCountInString(reason) > MaxReasonLength || containsControl(reason) {
		return &InvalidError{Field: "reason", Rule: "must be at most 256 characters of text without control characters"}
	}
	return nil
}
