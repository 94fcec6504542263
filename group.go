package leaseapi

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Concurrency groups: a named limit on how many of its jobs hold a lease at
// once. A group is Limit slot rows; a new grant of a job in the group takes
// the lowest free slot and carries its number and a slot token, strictly
// increasing per group (with the timeline rule of job tokens), so that a
// shared resource can fence its holders. A slot is free when its last
// grant was released, expired by the store's clock, or was revoked and is
// past the expiry it had when it was revoked (a revoked holder may run
// until its next heartbeat). The rule is decide.SlotInUse.

// The bounds of a group's limit.
const (
	MinGroupLimit = 1
	MaxGroupLimit = 10000
)

// MaxGroupFullHolders bounds the holders a group_full refusal names.
const MaxGroupFullHolders = 10

// Group is a concurrency group as read at one instant of the store's clock.
type Group struct {
	Name  string
	Limit int
	// Held is how many slots are in use; it may exceed Limit for a while
	// after the limit was lowered.
	Held int
	// Holders are the grants in the group's slots, by slot.
	Holders   []GroupHolder
	CreatedBy string
	CreatedAt time.Time
	// Now is the store's clock when the group was read.
	Now time.Time
}

// GroupHolder is a grant that holds a slot of a group.
type GroupHolder struct {
	JobID string
	Owner string
	// Token is the job's fencing token of the grant; SlotToken the
	// group's.
	Token     int64
	Slot      int
	SlotToken int64
	// ExpiresAt is when the slot frees by itself: the grant's expiry (a
	// heartbeat extends it), or, for a revoked grant, the expiry it had
	// when it was revoked.
	ExpiresAt time.Time
}

// PutGroupParams create a group or change its limit.
type PutGroupParams struct {
	Name  string
	Limit int
	// By is who made the change (set by the service).
	By string
}

// Validate checks p: a name with the job id syntax and a limit from
// MinGroupLimit to MaxGroupLimit.
func (p *PutGroupParams) Validate() error {
	if err := ValidateGroupName("name", p.Name); err != nil {
		return err
	}
	if p.Limit < MinGroupLimit || p.Limit > MaxGroupLimit {
		return &InvalidError{Field: "limit", Rule: "must be an integer from 1 to 10000"}
	}
	return nil
}

// ValidateGroupName returns an *InvalidError for field when name is not a
// valid group name: the job id syntax.
func ValidateGroupName(field, name string) error {
	if !ValidJobID(name) {
		return &InvalidError{Field: field, Rule: jobIDRule}
	}
	return nil
}

// GroupListParams select a page of groups sorted by name.
type GroupListParams struct {
	// Prefix keeps the groups whose name starts with it.
	Prefix string
	// After is the name the page starts after, or "" for the first page.
	After string
	// Limit is the page size, at least 1.
	Limit int
}

// Validate checks p: a valid prefix, a cursor that is empty or a name, a
// limit of at least 1.
func (p *GroupListParams) Validate() error {
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

// GroupPage is one page of groups.
type GroupPage struct {
	Groups []Group
	More   bool
}

var (
	// ErrGroupFull: every slot of the job's group is in use (group_full).
	// Every *GroupFullError unwraps to it.
	ErrGroupFull = errors.New("group full")
	// ErrGroupInUse: a job still names the group (group_in_use).
	ErrGroupInUse = errors.New("group in use")
)

// GroupFullError is an acquire refused because the job's group had as many
// slots in use as its limit. Nothing was written.
type GroupFullError struct {
	// Group is the group at the refusal, with at most
	// MaxGroupFullHolders holders.
	Group Group
	// RetryAfter is how long until the first slot in use frees by itself
	// (at least a second).
	RetryAfter time.Duration
	// Lease is the job's lease at the refusal, or nil when it has none.
	Lease *Lease
}

func (e *GroupFullError) Error() string {
	return fmt.Sprintf("group %q full: %d of %d slots in use", e.Group.Name, e.Group.Held, e.Group.Limit)
}

// Unwrap returns ErrGroupFull, for errors.Is.
func (e *GroupFullError) Unwrap() error { return ErrGroupFull }

// UnknownGroup is the refusal of an acquire that names a group that does
// not exist (the handlers answer a group outside the caller's scopes with
// the same words).
func UnknownGroup(name string) *InvalidError {
	return &InvalidError{Field: "group", Rule: fmt.Sprintf("names no group: create %q first (PUT /groups/{name})", name)}
}

// Grouping is the part of a Store that keeps concurrency groups.
type Grouping interface {
	// PutGroup creates p.Name with p.Limit, or changes its limit. Slots
	// above a lowered limit retire as they free.
	PutGroup(ctx context.Context, p *PutGroupParams) (Group, error)
	// Group returns the group name with its holders, or ErrNotFound.
	Group(ctx context.Context, name string) (Group, error)
	// Groups returns one page of groups sorted by name, with their holders.
	Groups(ctx context.Context, p *GroupListParams) (GroupPage, error)
	// DeleteGroup deletes the group: ErrNotFound when there is none, a
	// *GroupInUseError while a job is in it.
	DeleteGroup(ctx context.Context, name string) error
	// LeaveGroup takes the job out of its group (a grant it holds keeps
	// its slot until it ends). ErrNotFound for an unknown job.
	LeaveGroup(ctx context.Context, jobID string) (Lease, error)
}

// GroupInUseError refuses to delete a group a job is in.
type GroupInUseError struct {
	Group string
	// JobID is one of the jobs in it.
	JobID string
}

func (e *GroupInUseError) Error() string {
	return fmt.Sprintf("group %q in use: job %q is in it (DELETE /leases/{jobId}/group takes a job out)", e.Group, e.JobID)
}

// Unwrap returns ErrGroupInUse, for errors.Is.
func (e *GroupInUseError) Unwrap() error { return ErrGroupInUse }
