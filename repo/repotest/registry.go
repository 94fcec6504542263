package repotest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// testRegistry: a store made from nothing starts finalized at this build's
// level; live instances are listed; a finalize is refused while a live
// instance is older and names it, goes through once it is forgotten or no
// longer live, never lowers the level; and every record returns the level.
// It raises the store's level above this build's, so it runs on a store of
// its own data or last.
func testRegistry(t *testing.T, b *bundle) {
	r, ok := b.store.(leaseapi.Registry)
	if !ok {
		t.Skipf("%T keeps no registry", b.store)
	}
	ctx := t.Context()
	const live = time.Hour
	list, level, err := r.Instances(ctx, live)
	if err != nil {
		t.Fatalf("Instances: %v", err)
	}
	if level != leaseapi.FeatureLevel {
		t.Fatalf("a store made from nothing is finalized at %d, want this build's %d", level, leaseapi.FeatureLevel)
	}
	if len(list) != 0 {
		t.Fatalf("Instances of a new store = %+v, want none", list)
	}
	next := leaseapi.FeatureLevel + 1
	older := leaseapi.Instance{ID: instanceID(t), Host: "pod-a", Version: "1.1.0", Level: leaseapi.FeatureLevel}
	newer := leaseapi.Instance{ID: instanceID(t), Host: "pod-b", Version: "1.2.0", Level: next}
	for _, in := range []leaseapi.Instance{older, newer, older} { // recording again only marks it seen
		got, err := r.RecordInstance(ctx, in)
		if err != nil {
			t.Fatalf("RecordInstance(%s): %v", in.Host, err)
		}
		if got != leaseapi.FeatureLevel {
			t.Errorf("RecordInstance(%s) = level %d, want %d", in.Host, got, leaseapi.FeatureLevel)
		}
	}
	list, _, err = r.Instances(ctx, live)
	if err != nil {
		t.Fatalf("Instances: %v", err)
	}
	if len(list) != 2 || list[0].ID != older.ID || list[1].ID != newer.ID {
		t.Fatalf("Instances = %+v, want pod-a then pod-b", list)
	}
	if in := list[0]; in.Host != older.Host || in.Version != older.Version || in.Level != older.Level ||
		in.StartedAt.IsZero() || in.SeenAt.Before(in.StartedAt) {
		t.Errorf("Instances[0] = %+v, want %+v with its times", in, older)
	}

	err = r.Finalize(ctx, next, live)
	var blocked *leaseapi.FinalizeBlockedError
	if !errors.As(err, &blocked) || len(blocked.Older) != 1 || blocked.Older[0].ID != older.ID {
		t.Fatalf("Finalize(%d) with pod-a at %d = %v, want a *FinalizeBlockedError naming pod-a only", next, older.Level, err)
	}
	if _, level, _ := r.Instances(ctx, live); level != leaseapi.FeatureLevel {
		t.Fatalf("a refused finalize changed the level to %d", level)
	}
	// An instance not seen within live does not hold a finalize up.
	if err := r.Finalize(ctx, next, time.Nanosecond); err != nil {
		t.Fatalf("Finalize(%d) with no live instance: %v", next, err)
	}
	if err := r.ForgetInstance(ctx, older.ID); err != nil {
		t.Fatalf("ForgetInstance: %v", err)
	}
	if err := r.Finalize(ctx, next+1, live); !errors.As(err, &blocked) || len(blocked.Older) != 1 || blocked.Older[0].ID != newer.ID {
		t.Fatalf("Finalize(%d) with pod-b at %d = %v, want it refused naming pod-b", next+1, next, err)
	}
	for _, lower := range []int{next, leaseapi.FeatureLevel} {
		if err := r.Finalize(ctx, lower, live); err != nil {
			t.Fatalf("Finalize(%d) at level %d: %v, want nothing done", lower, next, err)
		}
	}
	if got, err := r.RecordInstance(ctx, newer); err != nil || got != next {
		t.Fatalf("RecordInstance after finalize = %d, %v; want level %d", got, err, next)
	}
	if list, _, _ := r.Instances(ctx, live); len(list) != 1 || list[0].ID != newer.ID {
		t.Errorf("Instances after pod-a was forgotten = %+v, want pod-b only", list)
	}
}

func instanceID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
