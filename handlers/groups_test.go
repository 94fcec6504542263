package handlers_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

func (b *testBundle) putGroup(t *testing.T, name string, limit int64, h http.Header) response {
	t.Helper()
	return b.do(t, request{method: http.MethodPut, path: "/groups/" + name, body: jsonBody(t, api.PutGroupRequest{Limit: limit}), header: h})
}

func wantGroup(t *testing.T, resp response) api.Group {
	t.Helper()
	if resp.status != http.StatusOK {
		t.Fatalf("status: got %d, want 200\n%s", resp.status, resp.body)
	}
	var g api.Group
	if err := json.Unmarshal(resp.body, &g); err != nil {
		t.Fatalf("decode group: %v\n%s", err, resp.body)
	}
	return g
}

func groupList(t *testing.T, resp response) api.GroupList {
	t.Helper()
	if resp.status != http.StatusOK {
		t.Fatalf("status: got %d, want 200\n%s", resp.status, resp.body)
	}
	var l api.GroupList
	if err := json.Unmarshal(resp.body, &l); err != nil {
		t.Fatalf("decode group list: %v\n%s", err, resp.body)
	}
	return l
}

// TestGroups: a group's life over HTTP: created, read, listed, changed,
// joined by acquires, full, left and deleted; every answer valid by the
// spec.
func TestGroups(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		opts := defaultOptions()
		opts.GroupMetrics = true
		b := setup(t, open(t), opts)
		g := b.job("g")

		created := wantGroup(t, b.putGroup(t, g, 2, nil))
		if created.Name != g || created.Limit != 2 || created.Held != 0 || len(created.Holders) != 0 {
			t.Errorf("PUT: got %+v, want %s with limit 2 and no holder", created, g)
		}
		if got := wantGroup(t, b.putGroup(t, g, 1, nil)); got.Limit != 1 || !got.CreatedAt.Equal(created.CreatedAt.Time) {
			t.Errorf("PUT again: got %+v, want limit 1 and the creation time unchanged", got)
		}
		if got := wantGroup(t, b.get(t, "/groups/"+g)); got.Limit != 1 {
			t.Errorf("GET: got %+v, want limit 1", got)
		}
		wantProblem(t, b.get(t, "/groups/"+b.job("none")), http.StatusNotFound, api.CodeNotFound)
		for _, limit := range []int64{0, -1, 10001, 1 << 40} {
			p := wantProblem(t, b.doInvalid(t, request{method: http.MethodPut, path: "/groups/" + g, body: jsonBody(t, api.PutGroupRequest{Limit: limit})}),
				http.StatusBadRequest, api.CodeInvalidRequest)
			if !strings.Contains(p.Detail, "limit") {
				t.Errorf("limit %d: detail %q does not name the limit", limit, p.Detail)
			}
		}
		wantProblem(t, b.doInvalid(t, request{method: http.MethodPut, path: "/groups/-bad", body: `{"limit":1}`}), http.StatusBadRequest, api.CodeInvalidRequest)
		wantProblem(t, b.doInvalid(t, request{method: http.MethodPut, path: "/groups/" + g, body: `{}`}), http.StatusBadRequest, api.CodeInvalidRequest)

		// Joining: the grant takes slot 1 and a slot token.
		one, two := b.job("one"), b.job("two")
		l1 := wantLease(t, b.acquire(t, one, api.AcquireRequest{Owner: "a", Group: &g}))
		if l1.Group == nil || *l1.Group != g || l1.Slot == nil || *l1.Slot != 1 || l1.SlotToken == nil {
			t.Fatalf("grant in the group: group %v slot %v slotToken %v, want %s, 1 and a token", l1.Group, l1.Slot, l1.SlotToken, g)
		}

		// Full: a job without a lease is refused with the group and no lease.
		resp := b.acquire(t, two, api.AcquireRequest{Owner: "b", Group: &g})
		p := wantProblem(t, resp, http.StatusConflict, api.CodeGroupFull)
		if p.Lease != nil {
			t.Errorf("group_full of a job without a lease carries a lease: %+v", p.Lease)
		}
		checkGroupFull(t, resp, g, one, *l1.SlotToken)

		// A job with a lease is refused with its lease.
		wantLease(t, b.acquire(t, two, api.AcquireRequest{Owner: "b"}))
		l2 := wantLease(t, b.get(t, "/leases/"+two))
		wantLease(t, b.release(t, two, api.ReleaseRequest{Owner: "b", Token: l2.Token}))
		resp = b.acquire(t, two, api.AcquireRequest{Owner: "b", Group: &g})
		if p := wantProblem(t, resp, http.StatusConflict, api.CodeGroupFull); p.Lease == nil || p.Lease.JobID != two || p.Lease.Group != nil {
			t.Errorf("group_full of a job with a lease: lease %+v, want %s's, in no group yet", p.Lease, two)
		}
		checkGroupFull(t, resp, g, one, *l1.SlotToken)
		if got := b.counter(t, "leaseapi_group_full_total", map[string]string{"group": g}); got != 2 {
			t.Errorf("leaseapi_group_full_total{group=%q}: got %v, want 2", g, got)
		}
		if got := b.counter(t, "leaseapi_acquire_total", map[string]string{"result": "group_full"}); got < 2 {
			t.Errorf("leaseapi_acquire_total{result=group_full}: got %v, want at least 2", got)
		}

		// The holder's renewal is never refused, and keeps its slot.
		if l := wantLease(t, b.acquire(t, one, api.AcquireRequest{Owner: "a", Group: &g})); l.Token != l1.Token || *l.SlotToken != *l1.SlotToken {
			t.Errorf("renewal: token %d slotToken %d, want %d and %d", l.Token, *l.SlotToken, l1.Token, *l1.SlotToken)
		}
		held := wantGroup(t, b.get(t, "/groups/"+g))
		if held.Held != 1 || len(held.Holders) != 1 || held.Holders[0].JobID != one || held.Holders[0].Owner != "a" || held.Holders[0].Token != l1.Token {
			t.Errorf("GET with a holder: %+v, want %s held by a", held, one)
		}

		// Released, the slot frees: the other job gets it with a larger
		// slot token, and its run names the group.
		wantLease(t, b.release(t, one, api.ReleaseRequest{Owner: "a", Token: l1.Token}))
		l2 = wantLease(t, b.acquire(t, two, api.AcquireRequest{Owner: "b", Group: &g}))
		if l2.SlotToken == nil || *l2.SlotToken <= *l1.SlotToken || *l2.Slot != 1 {
			t.Errorf("second grant: slot %v slotToken %v, want slot 1 and a slot token above %d", l2.Slot, l2.SlotToken, *l1.SlotToken)
		}
		var runs api.RunList
		if err := json.Unmarshal(b.get(t, "/leases/"+two+"/runs").body, &runs); err != nil {
			t.Fatal(err)
		}
		if r := runs.Runs[0]; r.Group == nil || *r.Group != g || r.SlotToken == nil || *r.SlotToken != *l2.SlotToken {
			t.Errorf("run of the grant in the group: %+v, want group %s slot token %d", r, g, *l2.SlotToken)
		}

		// The acquire's group: unknown is 400, "" leaves at the next grant.
		unknown := b.job("unknown")
		p = wantProblem(t, b.acquire(t, b.job("three"), api.AcquireRequest{Owner: "c", Group: &unknown}), http.StatusBadRequest, api.CodeInvalidRequest)
		if want := leaseapi.UnknownGroup(unknown); p.Detail != want.Field+" "+want.Rule {
			t.Errorf("unknown group: detail %q, want %q", p.Detail, want.Field+" "+want.Rule)
		}
		wantProblem(t, b.doInvalid(t, request{method: http.MethodPost, path: "/leases/" + one + "/acquire", body: `{"owner":"a","group":"-x"}`}),
			http.StatusBadRequest, api.CodeInvalidRequest)
		if l := wantLease(t, b.acquire(t, one, api.AcquireRequest{Owner: "a", Group: new("")})); l.Group != nil || l.Slot != nil {
			t.Errorf("a grant with group \"\": group %v slot %v, want none", l.Group, l.Slot)
		}

		// Deleting: refused while a job is in the group, then done.
		resp = b.do(t, request{method: http.MethodDelete, path: "/groups/" + g})
		if p := wantProblem(t, resp, http.StatusConflict, api.CodeGroupInUse); !strings.Contains(p.Detail, two) {
			t.Errorf("group_in_use: detail %q does not name %s", p.Detail, two)
		}
		if l := wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + two + "/group"})); l.Group != nil || l.JobID != two {
			t.Errorf("DELETE /leases/{jobId}/group: %+v, want %s in no group", l, two)
		}
		wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + b.job("none") + "/group"}), http.StatusNotFound, api.CodeNotFound)
		if resp := b.do(t, request{method: http.MethodDelete, path: "/groups/" + g}); resp.status != http.StatusNoContent {
			t.Fatalf("DELETE a group no job is in: %d %s", resp.status, resp.body)
		}
		wantProblem(t, b.get(t, "/groups/"+g), http.StatusNotFound, api.CodeNotFound)
		wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/groups/" + g}), http.StatusNotFound, api.CodeNotFound)
	})
}

// checkGroupFull checks a group_full answer: Retry-After in whole seconds
// no later than the holder's expiry, and the group with its holder.
func checkGroupFull(t *testing.T, resp response, group, holder string, slotToken int64) {
	t.Helper()
	secs, err := strconv.Atoi(resp.header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > 30 { // the holder's TTL is the default 30 s
		t.Errorf("Retry-After %q: want whole seconds from 1 to the holder's TTL", resp.header.Get("Retry-After"))
	}
	p := resp.problem(t)
	if p.Group == nil {
		t.Fatalf("group_full without its group: %s", resp.body)
	}
	if p.Group.Name != group || p.Group.Limit != 1 || p.Group.Held != 1 || len(p.Group.Holders) != 1 {
		t.Fatalf("group_full group: %+v, want %s with 1 of 1 held", p.Group, group)
	}
	if h := p.Group.Holders[0]; h.JobID != holder || h.Slot != 1 || h.SlotToken != slotToken {
		t.Errorf("group_full holder: %+v, want %s in slot 1 with slot token %d", h, holder, slotToken)
	}
}

// TestGroupsList: GET /groups pages by name within a prefix.
func TestGroupsList(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		names := []string{b.job("a"), b.job("b"), b.job("c")}
		for _, n := range names {
			wantGroup(t, b.putGroup(t, n, 3, nil))
		}
		var got []string
		query := "?limit=2&prefix=" + b.prefix
		for range 3 {
			l := groupList(t, b.get(t, "/groups"+query))
			for _, g := range l.Groups {
				got = append(got, g.Name)
			}
			if l.NextCursor == nil {
				break
			}
			query = "?limit=2&prefix=" + b.prefix + "&cursor=" + *l.NextCursor
		}
		if !slices.Equal(got, names) {
			t.Errorf("pages: got %q, want %q", got, names)
		}
		wantProblem(t, b.doInvalid(t, request{method: http.MethodGet, path: "/groups?cursor=***"}), http.StatusBadRequest, api.CodeInvalidRequest)
		wantProblem(t, b.doInvalid(t, request{method: http.MethodGet, path: "/groups?owner=x"}), http.StatusBadRequest, api.CodeInvalidRequest)
	})
}

// TestGroupScopes: group names are covered by scopes as job ids are. A
// route naming a group outside the caller's scopes is 403 before any
// lookup (the same answer whether it exists or not), the list shows only
// the groups in scope, a weaker role than admin may not change groups,
// and an acquire naming a group outside the caller's scopes is answered
// exactly as one naming a group that does not exist.
func TestGroupScopes(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, root := mint(t, store, "root", leaseapi.RoleAdmin, "*")
		_, aAdmin := mint(t, store, "a-admin", leaseapi.RoleAdmin, "team-a:")
		_, aLease := mint(t, store, "a-lease", leaseapi.RoleLease, "team-a:")
		_, aRead := mint(t, store, "a-read", leaseapi.RoleRead, "team-a:")
		_, abLease := mint(t, store, "ab-lease", leaseapi.RoleLease, "team-a:", "team-b.")
		b := setup(t, store, defaultOptions())
		for _, g := range []string{"team-a:g", "team-ab:g", "team-b.g"} {
			wantGroup(t, b.putGroup(t, g, 1, root))
		}

		// Out of scope: 403 naming the scopes, the same body for a group
		// that does not exist.
		for _, op := range []struct {
			method string
			body   string
			header http.Header
		}{
			{http.MethodGet, "", aRead},
			{http.MethodPut, `{"limit":2}`, aAdmin},
			{http.MethodDelete, "", aAdmin},
		} {
			for _, g := range []string{"team-ab:g", "team-b.g"} {
				resp := b.do(t, request{method: op.method, path: "/groups/" + g, body: op.body, header: op.header})
				p := wantProblem(t, resp, http.StatusForbidden, api.CodeForbidden)
				if !strings.Contains(p.Detail, "team-a:") {
					t.Errorf("%s %s: detail %q does not name the caller's scopes", op.method, g, p.Detail)
				}
				ghost := g + "-none"
				other := b.do(t, request{method: op.method, path: "/groups/" + ghost, body: op.body, header: op.header})
				if got, want := string(other.body), strings.ReplaceAll(string(resp.body), g, ghost); got != want {
					t.Errorf("%s: a missing group out of scope answered %s, an existing one %s", op.method, got, resp.body)
				}
			}
		}
		if g := wantGroup(t, b.do(t, request{method: http.MethodGet, path: "/groups/team-b.g", header: root})); g.Limit != 1 {
			t.Errorf("a group out of a-admin's scopes changed: %+v", g)
		}

		// Roles: read and lease may read but not change.
		for _, h := range []http.Header{aRead, aLease} {
			wantGroup(t, b.do(t, request{method: http.MethodGet, path: "/groups/team-a:g", header: h}))
			wantProblem(t, b.do(t, request{method: http.MethodPut, path: "/groups/team-a:g", body: `{"limit":2}`, header: h}), http.StatusForbidden, api.CodeForbidden)
			wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/groups/team-a:g", header: h}), http.StatusForbidden, api.CodeForbidden)
			wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/leases/team-a:job/group", header: h}), http.StatusForbidden, api.CodeForbidden)
		}
		if g := wantGroup(t, b.putGroup(t, "team-a:g", 2, aAdmin)); g.Limit != 2 || g.CreatedBy == nil || !strings.HasPrefix(*g.CreatedBy, "root") {
			t.Errorf("a-admin's PUT in scope: %+v, want limit 2, created by root", g)
		}

		// The list: only the groups in scope, and a cursor never leads out.
		cursor := func(name string) string { return base64.RawURLEncoding.EncodeToString([]byte(name)) }
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"", []string{"team-a:g"}},
			{"?prefix=team-", []string{"team-a:g"}},
			{"?prefix=team-ab", nil},
			{"?cursor=" + cursor("team-a:g"), nil},
			{"?cursor=" + cursor("team-ab:"), nil},
		} {
			var got []string
			for _, g := range groupList(t, b.do(t, request{method: http.MethodGet, path: "/groups" + tc.query, header: aRead})).Groups {
				got = append(got, g.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("a-read GET /groups%s: got %q, want %q", tc.query, got, tc.want)
			}
		}
		if n := len(groupList(t, b.do(t, request{method: http.MethodGet, path: "/groups", header: root})).Groups); n != 3 {
			t.Errorf("root lists %d groups, want 3", n)
		}

		// The acquire: a group out of scope is an unknown group, word for
		// word, and nothing is written.
		out := b.do(t, request{method: http.MethodPost, path: "/leases/team-a:job/acquire", body: `{"owner":"o","group":"team-b.g"}`, header: aLease})
		wantProblem(t, out, http.StatusBadRequest, api.CodeInvalidRequest)
		unknown := b.do(t, request{method: http.MethodPost, path: "/leases/team-a:job/acquire", body: `{"owner":"o","group":"team-a:nope"}`, header: aLease})
		if got, want := string(out.body), strings.ReplaceAll(string(unknown.body), "team-a:nope", "team-b.g"); got != want {
			t.Errorf("a group out of scope answered %s, an unknown one %s", out.body, unknown.body)
		}
		wantProblem(t, b.do(t, request{method: http.MethodGet, path: "/leases/team-a:job", header: aRead}), http.StatusNotFound, api.CodeNotFound)
		if l := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/team-a:job/acquire", body: `{"owner":"o","group":"team-a:g"}`, header: aLease})); l.Group == nil || *l.Group != "team-a:g" {
			t.Errorf("an acquire in scope: group %v, want team-a:g", l.Group)
		}
		if l := wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/team-a:job/group", header: aAdmin})); l.Group != nil {
			t.Errorf("a-admin took team-a:job out of its group: group %v", l.Group)
		}

		// A credential of two teams puts team b's job into team a's group:
		// team a sees the slot in use, not team b's job.
		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/team-b.job/acquire", body: `{"owner":"o","group":"team-a:g"}`, header: abLease}))
		holders := func(h http.Header) (held int64, jobs []string) {
			g := wantGroup(t, b.do(t, request{method: http.MethodGet, path: "/groups/team-a:g", header: h}))
			for _, x := range g.Holders {
				jobs = append(jobs, x.JobID)
			}
			return g.Held, jobs
		}
		if held, jobs := holders(aRead); held != 2 || !slices.Equal(jobs, []string{"team-a:job"}) {
			t.Errorf("a-read: held %d, holders %q; want 2 held, only team-a:job shown", held, jobs)
		}
		if held, jobs := holders(root); held != 2 || !slices.Equal(jobs, []string{"team-a:job", "team-b.job"}) {
			t.Errorf("root: held %d, holders %q; want both", held, jobs)
		}
		if l := groupList(t, b.do(t, request{method: http.MethodGet, path: "/groups", header: aRead})); len(l.Groups) != 1 || len(l.Groups[0].Holders) != 1 {
			t.Errorf("a-read's list: %+v, want team-a:g with its one visible holder", l.Groups)
		}
		full := b.do(t, request{method: http.MethodPost, path: "/leases/team-a:other/acquire", body: `{"owner":"o","group":"team-a:g"}`, header: aLease})
		if p := wantProblem(t, full, http.StatusConflict, api.CodeGroupFull); p.Group == nil || p.Group.Held != 2 || len(p.Group.Holders) != 1 || p.Group.Holders[0].JobID != "team-a:job" {
			t.Errorf("group_full to team a: %+v, want 2 held and only team-a:job shown", p.Group)
		}
	})
}

// TestGroupFullRetryAfter: Retry-After of group_full is the whole seconds,
// rounded up, until the first slot frees: with a holder of a 2.5 s lease,
// 3 at most.
func TestGroupFullRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	g := b.job("g")
	wantGroup(t, b.putGroup(t, g, 1, nil))
	wantLease(t, b.acquire(t, b.job("one"), api.AcquireRequest{Owner: "a", Group: &g, TTLMs: ptr(int64(2500))}))
	resp := b.acquire(t, b.job("two"), api.AcquireRequest{Owner: "b", Group: &g})
	wantProblem(t, resp, http.StatusConflict, api.CodeGroupFull)
	secs, err := strconv.Atoi(resp.header.Get("Retry-After"))
	if err != nil || secs < 1 || time.Duration(secs)*time.Second > 3*time.Second {
		t.Errorf("Retry-After %q: want 1 to 3 whole seconds", resp.header.Get("Retry-After"))
	}
	// Without Options.GroupMetrics no series names a group.
	families, err := b.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "leaseapi_group_full_total" {
			t.Error("leaseapi_group_full_total served without GroupMetrics")
		}
	}
}
