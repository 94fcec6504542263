package handlers_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"testing"

	"github.com/leaseapi/leaseapi/api"
)

// TestContractRejectsNull: the answer validation of these tests reads the
// spec as strictly as OpenAPI 3.0.3 does. A real Lease answer with one field
// set to null passes exactly when the spec declares that field nullable, so
// neither a null the server starts sending nor a spec that forgets to allow
// it (as `nullable` beside an `allOf` did) goes unnoticed.
func TestContractRejectsNull(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	req := request{method: http.MethodPost, path: "/leases/" + b.job("nulls") + "/acquire", body: jsonBody(t, api.AcquireRequest{Owner: "a"})}
	resp := b.do(t, req)
	var lease map[string]any
	if err := json.Unmarshal(resp.body, &lease); err != nil {
		t.Fatal(err)
	}
	props := b.contract.doc.Components.Schemas["Lease"].Value.Properties
	if len(lease) != len(props) {
		t.Fatalf("the answer has %d fields, the Lease schema %d", len(lease), len(props))
	}
	for field := range lease {
		withNull := maps.Clone(lease)
		withNull[field] = nil
		body, err := json.Marshal(withNull)
		if err != nil {
			t.Fatal(err)
		}
		err = b.contract.validateResponse(req.build(t, b.server.URL), response{status: resp.status, header: resp.header, body: body})
		if nullable := props[field].Value.Nullable; (err == nil) != nullable {
			t.Errorf("%s: null, declared nullable %v: validation error %v", field, nullable, err)
		}
	}
}

// TestContractGroups: the Group answer is held to its schema as strictly
// as the Lease (a field set to null passes exactly when it is declared
// nullable), and a group_full answer without its group, or with a group
// that lacks a holder's field, fails: the spec requires what the server
// sends.
func TestContractGroups(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	g := b.job("g")
	wantGroup(t, b.putGroup(t, g, 1, nil))
	wantLease(t, b.acquire(t, b.job("one"), api.AcquireRequest{Owner: "a", Group: &g}))

	get := request{method: http.MethodGet, path: "/groups/" + g}
	resp := b.do(t, get)
	var group map[string]any
	if err := json.Unmarshal(resp.body, &group); err != nil {
		t.Fatal(err)
	}
	props := b.contract.doc.Components.Schemas["Group"].Value.Properties
	if len(group) != len(props) {
		t.Fatalf("the answer has %d fields, the Group schema %d", len(group), len(props))
	}
	for field := range group {
		withNull := maps.Clone(group)
		withNull[field] = nil
		body, err := json.Marshal(withNull)
		if err != nil {
			t.Fatal(err)
		}
		err = b.contract.validateResponse(get.build(t, b.server.URL), response{status: resp.status, header: resp.header, body: body})
		if nullable := props[field].Value.Nullable; (err == nil) != nullable {
			t.Errorf("%s: null, declared nullable %v: validation error %v", field, nullable, err)
		}
	}

	acquire := request{method: http.MethodPost, path: "/leases/" + b.job("two") + "/acquire", body: jsonBody(t, api.AcquireRequest{Owner: "b", Group: &g})}
	full := b.do(t, acquire)
	wantProblem(t, full, http.StatusConflict, api.CodeGroupFull)
	var problem map[string]any
	if err := json.Unmarshal(full.body, &problem); err != nil {
		t.Fatal(err)
	}
	noGroup := maps.Clone(problem)
	delete(noGroup, "group")
	badHolder := maps.Clone(problem)
	badGroup := maps.Clone(problem["group"].(map[string]any))
	holder := maps.Clone(badGroup["holders"].([]any)[0].(map[string]any))
	delete(holder, "slotToken")
	badGroup["holders"] = []any{holder}
	badHolder["group"] = badGroup
	for name, v := range map[string]map[string]any{"WithoutGroup": noGroup, "HolderWithoutSlotToken": badHolder} {
		body, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.contract.validateResponse(acquire.build(t, b.server.URL), response{status: full.status, header: full.header, body: body}); err == nil {
			t.Errorf("%s: a group_full answer %s passed the spec", name, body)
		}
	}
}
