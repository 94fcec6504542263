package leaseapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Gated rules. A rule that an older release would not enforce (a new
// refusal, say) must not be enforced by some instances and ignored by
// others while a rolling upgrade runs both releases on one database. So it
// stays off until every live instance runs a build that knows it and an
// operator finalizes the upgrade (`leaseapi upgrade finalize`), the way
// CockroachDB finalizes a cluster version.
//
// Each build has a feature level: the level of the newest gated rule it
// knows. The database records the level it is finalized at; a rule is on
// when that level is at or above the rule's. A database created by a build
// starts at that build's level (nothing older ever served it).

// Feature is a gated rule.
type Feature struct {
	// Name is what a refusal names: the request field that asks for the
	// rule.
	Name string
	// Level is the feature level that brought it.
	Level int
	// Release is the first release that knows it.
	Release string
}

// FeatureLevel is this build's feature level. v1.0.0's is 0.
const FeatureLevel = 1

// FeatureMinInterval is an acquire's minimum interval between two grants
// of its job (AcquireParams.MinInterval, the too_soon refusal).
var FeatureMinInterval = Feature{Name: "minIntervalMs", Level: 1, Release: "1.1.0"}

// ErrFeatureDisabled: the request asks for a gated rule the database is
// not yet finalized for (feature_disabled, 400). Every
// *FeatureDisabledError unwraps to it.
var ErrFeatureDisabled = errors.New("feature disabled until the upgrade is finalized")

// FeatureDisabledError is the refusal of a request that asks for Feature
// while the database is finalized at Level, below the feature's.
type FeatureDisabledError struct {
	Feature Feature
	Level   int
}

func (e *FeatureDisabledError) Error() string {
	return fmt.Sprintf("%s is off until every instance runs leaseapi %s or later and `leaseapi upgrade finalize` has run "+
		"(the database is finalized at feature level %d, %s needs %d)",
		e.Feature.Name, e.Feature.Release, e.Level, e.Feature.Name, e.Feature.Level)
}

// Unwrap returns ErrFeatureDisabled, for errors.Is.
func (e *FeatureDisabledError) Unwrap() error { return ErrFeatureDisabled }

// Gate holds the feature level the database is finalized at, as this
// instance last read it. The zero Gate is at level 0: every gated rule off.
type Gate struct{ level atomic.Int64 }

// NewGate returns a Gate at level.
func NewGate(level int) *Gate {
	g := &Gate{}
	g.Set(level)
	return g
}

// Set records the level the database is finalized at.
func (g *Gate) Set(level int) { g.level.Store(int64(level)) }

// Level returns the level last set.
func (g *Gate) Level() int { return int(g.level.Load()) }

// Check returns nil when f is on, else a *FeatureDisabledError.
func (g *Gate) Check(f Feature) error {
	if level := g.Level(); level < f.Level {
		return &FeatureDisabledError{Feature: f, Level: level}
	}
	return nil
}

// Instance is one leaseapi process as it records itself in the database.
type Instance struct {
	// ID is chosen at random when the process starts.
	ID string
	// Host is the machine's host name (a Kubernetes pod's name).
	Host string
	// Version is the release it runs (version.Info.Version).
	Version string
	// Level is its build's FeatureLevel.
	Level int
	// StartedAt and SeenAt are by the database's clock: when the instance
	// first recorded itself, and when it last did.
	StartedAt time.Time
	SeenAt    time.Time
}

// Registry records the instances that serve a database and the feature
// level it is finalized at.
type Registry interface {
	// RecordInstance inserts in, or marks it seen now, and returns the
	// level the database is finalized at.
	RecordInstance(ctx context.Context, in Instance) (level int, err error)
	// ForgetInstance deletes the instance's record (a clean shutdown).
	ForgetInstance(ctx context.Context, id string) error
	// Instances returns the instances seen within live of the store's
	// clock, oldest first, and the level the database is finalized at.
	Instances(ctx context.Context, live time.Duration) ([]Instance, int, error)
	// Finalize raises the finalized level to level when every instance
	// seen within live runs a build of that level or above, and returns
	// a *FinalizeBlockedError naming the others otherwise. A level at or
	// below the finalized one changes nothing.
	Finalize(ctx context.Context, level int, live time.Duration) error
}

// ErrFinalizeBlocked: a live instance runs a build older than the level
// asked for. Every *FinalizeBlockedError unwraps to it.
var ErrFinalizeBlocked = errors.New("finalize blocked by older instances")

// FinalizeBlockedError names the live instances whose builds are older
// than Level.
type FinalizeBlockedError struct {
	Level int
	Older []Instance
}

func (e *FinalizeBlockedError) Error() string {
	names := make([]string, len(e.Older))
	for i, in := range e.Older {
		names[i] = fmt.Sprintf("%s on %s runs %s (feature level %d)", in.ID, in.Host, in.Version, in.Level)
	}
	return fmt.Sprintf("cannot finalize feature level %d: %s; replace them, then finalize again",
		e.Level, strings.Join(names, ", "))
}

// Unwrap returns ErrFinalizeBlocked, for errors.Is.
func (e *FinalizeBlockedError) Unwrap() error { return ErrFinalizeBlocked }

// CheckFinalize decides a finalize to level given the live instances: a
// *FinalizeBlockedError naming those whose builds are older, or nil.
func CheckFinalize(level int, live []Instance) error {
	var older []Instance
	for _, in := range live {
		if in.Level < level {
			older = append(older, in)
		}
	}
	if len(older) > 0 {
		return &FinalizeBlockedError{Level: level, Older: older}
	}
	return nil
}
