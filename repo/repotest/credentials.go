package repotest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
)

// testCredentials: created credentials are read back as stored (the hash of
// the secret, never the secret), names are unique within the same scopes
// only, a delete is final, and
// the API stays closed once a credential was created, also after every
// credential is deleted.
func testCredentials(t *testing.T, b *bundle) {
	cs, ok := b.store.(leaseapi.CredentialStore)
	if !ok {
		// A wrapper of a store (repo.CoalesceAcquires, repo.LimitCalls)
		// keeps no credentials; both stores assert that they do.
		t.Skipf("%T keeps no credentials", b.store)
	}
	ctx := t.Context()
	name := strings.ReplaceAll(strings.ToLower(b.prefix), "_", "-")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	rate := 2.5
	c, token := leaseapi.NewCredential("c-"+name, leaseapi.RoleLease, []string{"team-b:", "team-a:", "team-a:x."}, &rate)
	if err := cs.CreateCredential(ctx, &c); err != nil {
		t.Fatalf("CreateCredential: %v", err)
	}
	find := func(id string) (leaseapi.Credential, bool, bool) {
		t.Helper()
		set, err := cs.Credentials(ctx)
		if err != nil {
			t.Fatalf("Credentials: %v", err)
		}
		i := slices.IndexFunc(set.Credentials, func(c leaseapi.Credential) bool { return c.ID == id })
		if i < 0 {
			return leaseapi.Credential{}, false, set.Closed
		}
		return set.Credentials[i], true, set.Closed
	}
	got, ok, closed := find(c.ID)
	if !ok || !closed {
		t.Fatalf("Credentials after create: found %v, closed %v; want both", ok, closed)
	}
	if got.CreatedAt.IsZero() {
		t.Errorf("CreatedAt: zero")
	}
	got.CreatedAt = c.CreatedAt
	if got.Name != c.Name || got.Role != c.Role || !slices.Equal(got.Scopes, []string{"team-a:", "team-b:"}) ||
		got.RatePerSecond == nil || *got.RatePerSecond != rate || got.SecretHash != c.SecretHash {
		t.Errorf("Credentials: got %+v, want %+v", got, c)
	}
	_, secret, _ := leaseapi.ParseToken(token)
	if got.SecretHash != leaseapi.HashSecret(secret) {
		t.Errorf("SecretHash is not the SHA-256 of the token's secret")
	}

	t.Run("NameTaken", func(t *testing.T) {
		// The same name with the same scopes, in any order and spelling.
		dup, _ := leaseapi.NewCredential(c.Name, leaseapi.RoleRead, []string{"team-a:x.", "team-a:", "team-b:"}, nil)
		if err := cs.CreateCredential(ctx, &dup); !errors.Is(err, leaseapi.ErrCredentialExists) {
			t.Errorf("CreateCredential with a taken name and the same scopes: got %v, want ErrCredentialExists", err)
		}
	})
	t.Run("NameUniqueWithinScopes", func(t *testing.T) {
		// Names are unique within the same scopes only: another team (or
		// a narrower or wider scope) may use the name.
		for _, scopes := range [][]string{{"team-c:"}, {"*"}, {"team-a:"}} {
			other, _ := leaseapi.NewCredential(c.Name, leaseapi.RoleRead, scopes, nil)
			if err := cs.CreateCredential(ctx, &other); err != nil {
				t.Errorf("CreateCredential %s with scopes %v, the name taken in other scopes: %v", c.Name, scopes, err)
				continue
			}
			if err := cs.DeleteCredential(ctx, other.ID); err != nil {
				t.Fatalf("DeleteCredential: %v", err)
			}
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		for _, scopes := range [][]string{nil, {"team-a"}, {"team a:"}, {""}} {
			bad, _ := leaseapi.NewCredential("bad-"+name, leaseapi.RoleRead, scopes, nil)
			if err := cs.CreateCredential(ctx, &bad); !errors.Is(err, leaseapi.ErrInvalid) {
				t.Errorf("CreateCredential with scopes %q: got %v, want ErrInvalid", scopes, err)
			}
		}
	})
	t.Run("NoRate", func(t *testing.T) {
		nr, _ := leaseapi.NewCredential("nr-"+name, leaseapi.RoleAdmin, []string{"*"}, nil)
		if err := cs.CreateCredential(ctx, &nr); err != nil {
			t.Fatalf("CreateCredential: %v", err)
		}
		if got, _, _ := find(nr.ID); got.RatePerSecond != nil || got.Role != leaseapi.RoleAdmin {
			t.Errorf("Credentials: got %+v, want role admin and no rate", got)
		}
		if err := cs.DeleteCredential(ctx, nr.ID); err != nil {
			t.Fatalf("DeleteCredential: %v", err)
		}
	})

	if err := cs.DeleteCredential(ctx, c.ID); err != nil {
		t.Fatalf("DeleteCredential: %v", err)
	}
	if _, ok, closed := find(c.ID); ok || !closed {
		t.Errorf("Credentials after delete: found %v, closed %v; want not found and closed", ok, closed)
	}
	for _, id := range []string{c.ID, "lk_000000000000", "nonsense"} {
		if err := cs.DeleteCredential(ctx, id); !errors.Is(err, leaseapi.ErrCredentialNotFound) || !errors.Is(err, leaseapi.ErrNotFound) {
			t.Errorf("DeleteCredential(%q): got %v, want ErrCredentialNotFound", id, err)
		}
	}
}
