package repotest

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// testIdempotencyKeys: a key is claimed once per credential; the same
// request again while it is in flight is ErrIdempotencyKeyInFlight and
// once answered gets that answer; another request with the key is
// ErrIdempotencyKeyReused; a released claim is forgotten; a claim past its
// hold is taken over by the same request; of concurrent claims exactly
// one wins.
func testIdempotencyKeys(t *testing.T, b *bundle) {
	is, ok := b.store.(leaseapi.IdempotencyStore)
	if !ok {
		t.Skipf("%T keeps no idempotency keys", b.store)
	}
	ctx := t.Context()
	cred := b.prefix
	params := func(key, request string) *leaseapi.IdempotencyParams {
		return &leaseapi.IdempotencyParams{Credential: cred, Key: b.prefix + key,
			Fingerprint: leaseapi.IdempotencyFingerprint("POST /x", request), Hold: time.Minute}
	}
	claim := func(p *leaseapi.IdempotencyParams) (*leaseapi.IdempotentAnswer, error) {
		t.Helper()
		return is.ClaimIdempotencyKey(ctx, p)
	}

	first := params("k1", "a")
	if a, err := claim(first); a != nil || err != nil {
		t.Fatalf("first claim: got %v, %v; want it claimed", a, err)
	}
	if _, err := claim(params("k1", "a")); !errors.Is(err, leaseapi.ErrIdempotencyKeyInFlight) {
		t.Errorf("the same request in flight: got %v, want ErrIdempotencyKeyInFlight", err)
	}
	if _, err := claim(params("k1", "b")); !errors.Is(err, leaseapi.ErrIdempotencyKeyReused) {
		t.Errorf("another request in flight: got %v, want ErrIdempotencyKeyReused", err)
	}
	other := params("k1", "b")
	other.Credential = cred + "-other"
	if a, err := claim(other); a != nil || err != nil {
		t.Errorf("another credential's key of the same name: got %v, %v; want it claimed", a, err)
	}
	answer := leaseapi.IdempotentAnswer{Status: 200, Body: []byte(`{"ok":true}`)}
	if err := is.FinishIdempotencyKey(ctx, first, answer); err != nil {
		t.Fatalf("FinishIdempotencyKey: %v", err)
	}
	if a, err := claim(params("k1", "a")); err != nil || a == nil || a.Status != answer.Status || !bytes.Equal(a.Body, answer.Body) {
		t.Errorf("the same request answered: got %+v, %v; want %+v", a, err, answer)
	}
	if _, err := claim(params("k1", "b")); !errors.Is(err, leaseapi.ErrIdempotencyKeyReused) {
		t.Errorf("another request after the answer: got %v, want ErrIdempotencyKeyReused", err)
	}

	released := params("k2", "a")
	if _, err := claim(released); err != nil {
		t.Fatalf("claim k2: %v", err)
	}
	if err := is.ReleaseIdempotencyKey(ctx, released); err != nil {
		t.Fatalf("ReleaseIdempotencyKey: %v", err)
	}
	if a, err := claim(params("k2", "b")); a != nil || err != nil {
		t.Errorf("a claim after a release: got %v, %v; want it claimed", a, err)
	}

	// A claim whose request died is taken over once its hold passed.
	abandoned := params("k3", "a")
	abandoned.Hold = time.Millisecond
	if _, err := claim(abandoned); err != nil {
		t.Fatalf("claim k3: %v", err)
	}
	if _, err := claim(params("k3", "b")); !errors.Is(err, leaseapi.ErrIdempotencyKeyReused) {
		t.Errorf("another request of an abandoned claim: got %v, want ErrIdempotencyKeyReused", err)
	}
	took := false
	for range 10_000 { // bounded: the hold is a millisecond of the database's clock
		a, err := claim(params("k3", "a"))
		if a == nil && err == nil {
			took = true
			break
		}
		if !errors.Is(err, leaseapi.ErrIdempotencyKeyInFlight) {
			t.Fatalf("claim of an abandoned key: got %v, %v", a, err)
		}
	}
	if !took {
		t.Errorf("a claim past its hold was never taken over")
	}

	// Concurrent claims of one request: exactly one holds the key.
	const n = 8
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			var a *leaseapi.IdempotentAnswer
			a, errs[i] = is.ClaimIdempotencyKey(ctx, params("k4", "a"))
			if a != nil {
				errs[i] = errors.New("an answer before any was recorded")
			}
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, leaseapi.ErrIdempotencyKeyInFlight):
			t.Errorf("concurrent claim: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("concurrent claims: %d held the key, want 1", won)
	}

	// Pruning deletes only keys older than the TTL.
	if _, err := is.PruneIdempotencyKeys(ctx, 1000); err != nil {
		t.Fatalf("PruneIdempotencyKeys: %v", err)
	}
	if a, err := claim(params("k1", "a")); err != nil || a == nil {
		t.Errorf("a fresh key after pruning: got %v, %v; want its answer", a, err)
	}
	for _, bad := range []*leaseapi.IdempotencyParams{
		{Credential: cred, Key: "", Hold: time.Minute},
		{Credential: cred, Key: string(bytes.Repeat([]byte("k"), 257)), Hold: time.Minute},
		{Credential: cred, Key: "clé", Hold: time.Minute},
		{Credential: cred, Key: "k", Hold: 0},
	} {
		if _, err := is.ClaimIdempotencyKey(ctx, bad); !errors.Is(err, leaseapi.ErrInvalid) {
			t.Errorf("ClaimIdempotencyKey(key %q, hold %s): got %v, want ErrInvalid", bad.Key, bad.Hold, err)
		}
	}
}
