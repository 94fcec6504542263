package handlers_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// TestContractRejectsNull: the answer validation of these tests reads the
// spec as strictly as OpenAPI 3.0.3 does. A real Lease answer with one field
// set to null passes exactly when the spec declares that field nullable, so
// neither a null the server starts sending nor a spec that forgets to allow
// it (as `nullable` beside an `allOf` did) goes unnoticed.
//
// The job is alerting, so that the answer has every field of the schema.
func TestContractRejectsNull(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	job := b.job("nulls")
	b.runOnce(t, job, leaseapi.OutcomeFailed)
	wantPolicy(t, b.putPolicy(t, job, `{"consecutiveFailures":1}`, nil))
	wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a"}))
	req := request{method: http.MethodGet, path: "/leases/" + job}
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

// TestContractPolicies: a JobPolicy answer with every field is held to its
// schema as strictly as the Lease (no field of it is nullable), and one
// that lacks a required field, or has one the schema does not name, fails.
func TestContractPolicies(t *testing.T) {
	t.Parallel()
	store := openSQLite(t)
	_, admin := mint(t, store, "admin", leaseapi.RoleAdmin, "*")
	b := setup(t, store, defaultOptions())
	job := b.job("policy")
	wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"a"}`, header: admin}))
	wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/release", body: `{"owner":"a","token":1,"outcome":"failed"}`, header: admin}))
	wantPolicy(t, b.putPolicy(t, job, `{"consecutiveFailures":1,"failureRate":{"threshold":0.5,"runs":2},"maxRuntimeMs":60000,`+
		`"minRuntimeMs":1,"missedTicks":3,"recoveryThreshold":2,"realertAfterMs":60000}`, admin))

	get := request{method: http.MethodGet, path: "/leases/" + job + "/policy", header: admin}
	resp := b.do(t, get)
	var policy map[string]any
	if err := json.Unmarshal(resp.body, &policy); err != nil {
		t.Fatal(err)
	}
	props := b.contract.doc.Components.Schemas["JobPolicy"].Value.Properties
	if len(policy) != len(props) {
		t.Fatalf("the answer has %d fields, the JobPolicy schema %d: %s", len(policy), len(props), resp.body)
	}
	check := func(name string, v map[string]any, valid bool) {
		t.Helper()
		body, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		err = b.contract.validateResponse(get.build(t, b.server.URL), response{status: resp.status, header: resp.header, body: body})
		if (err == nil) != valid {
			t.Errorf("%s: valid %v, validation error %v\n%s", name, valid, err, body)
		}
	}
	for field := range policy {
		withNull := maps.Clone(policy)
		withNull[field] = nil
		check(field+" null", withNull, props[field].Value.Nullable)
	}
	for _, field := range []string{"jobId", "recoveryThreshold", "status", "alertReasons", "statusSince", "updatedAt"} {
		without := maps.Clone(policy)
		delete(without, field)
		check("without "+field, without, false)
	}
	extra := maps.Clone(policy)
	extra["serverTime"] = policy["updatedAt"]
	check("with serverTime", extra, false)
	missing := b.do(t, request{method: http.MethodGet, path: "/leases/" + b.job("none") + "/policy", header: admin})
	wantProblem(t, missing, http.StatusNotFound, api.CodeNotFound)
}

// TestContractBatches: a batch's answer is held to its schema: a real
// answer with a lease and a problem passes, and one whose result lacks its
// jobId, has a status the single calls never answer, a field the schema
// does not name, or a problem without its code fails.
func TestContractBatches(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	held := b.job("held")
	wantLease(t, b.acquire(t, held, api.AcquireRequest{Owner: "other"}))
	req := request{method: http.MethodPost, path: "/acquire", body: jsonBody(t, api.AcquireBatchRequest{
		Owner: ptr("a"), Items: []api.AcquireBatchItem{{JobID: b.job("fresh")}, {JobID: held}},
	})}
	resp := b.do(t, req)
	var answer map[string]any
	if err := json.Unmarshal(resp.body, &answer); err != nil {
		t.Fatal(err)
	}
	results := answer["results"].([]any)
	if len(results) != 2 || results[0].(map[string]any)["lease"] == nil || results[1].(map[string]any)["problem"] == nil {
		t.Fatalf("want a lease and a problem: %s", resp.body)
	}
	for name, change := range map[string]func(granted, refused map[string]any){
		"WithoutJobID":       func(g, _ map[string]any) { delete(g, "jobId") },
		"Status201":          func(g, _ map[string]any) { g["status"] = 201 },
		"StatusAsString":     func(g, _ map[string]any) { g["status"] = "200" },
		"ExtraField":         func(g, _ map[string]any) { g["retryAfterMs"] = 1 },
		"ProblemWithoutCode": func(_, r map[string]any) { delete(r["problem"].(map[string]any), "code") },
	} {
		granted, refused := maps.Clone(results[0].(map[string]any)), maps.Clone(results[1].(map[string]any))
		refused["problem"] = maps.Clone(refused["problem"].(map[string]any))
		change(granted, refused)
		body, err := json.Marshal(map[string]any{"results": []any{granted, refused}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.contract.validateResponse(req.build(t, b.server.URL), response{status: resp.status, header: resp.header, body: body}); err == nil {
			t.Errorf("%s: the answer %s passed the spec", name, body)
		}
	}
}
