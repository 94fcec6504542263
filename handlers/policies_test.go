package handlers_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

func (b *testBundle) putPolicy(t *testing.T, job, body string, h http.Header) response {
	t.Helper()
	return b.do(t, request{method: http.MethodPut, path: "/leases/" + job + "/policy", body: body, header: h})
}

func wantPolicy(t *testing.T, resp response) api.JobPolicy {
	t.Helper()
	if resp.status != http.StatusOK {
		t.Fatalf("status: got %d, want 200\n%s", resp.status, resp.body)
	}
	var p api.JobPolicy
	if err := json.Unmarshal(resp.body, &p); err != nil {
		t.Fatalf("decode policy: %v\n%s", err, resp.body)
	}
	return p
}

// runOnce acquires job and releases it with outcome.
func (b *testBundle) runOnce(t *testing.T, job string, outcome leaseapi.Outcome) api.Lease {
	t.Helper()
	l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a"}))
	return wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "a", Token: l.Token, Outcome: &outcome}))
}

// TestPolicies: a policy's life over HTTP: refused for an unknown job,
// set on a job that failed (alerting at once), shown on the lease, back
// to ok after a success, removed; each status code, every answer valid by
// the spec.
func TestPolicies(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("p")

		wantProblem(t, b.putPolicy(t, job, `{"consecutiveFailures":1}`, nil), http.StatusNotFound, api.CodeNotFound)
		wantProblem(t, b.get(t, "/leases/"+job+"/policy"), http.StatusNotFound, api.CodeNotFound)

		b.runOnce(t, job, leaseapi.OutcomeFailed)
		wantProblem(t, b.get(t, "/leases/"+job+"/policy"), http.StatusNotFound, api.CodePolicyNotFound)
		wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job + "/policy"}), http.StatusNotFound, api.CodePolicyNotFound)
		if l := wantLease(t, b.get(t, "/leases/"+job)); l.Alerting || l.AlertReasons != nil {
			t.Errorf("lease without a policy: alerting %v, reasons %v; want false and none", l.Alerting, l.AlertReasons)
		}

		put := wantPolicy(t, b.putPolicy(t, job, `{"consecutiveFailures":1,"failureRate":{"threshold":0.5,"runs":4},"realertAfterMs":3600000}`, nil))
		if put.JobID != job || put.Status != leaseapi.AlertAlerting || !slices.Equal(put.AlertReasons, []leaseapi.AlertReason{leaseapi.ReasonFailures}) ||
			put.LastAlertAt == nil || put.RecoveryThreshold != 1 || put.ConsecutiveFailures == nil || *put.ConsecutiveFailures != 1 ||
			put.FailureRate == nil || *put.FailureRate != (api.FailureRate{Threshold: 0.5, Runs: 4}) || put.RealertAfterMs == nil ||
			*put.RealertAfterMs != 3600000 || put.MaxRuntimeMs != nil || put.MissedTicks != nil || put.UpdatedBy != nil {
			t.Errorf("PUT after a failure: got %s", jsonBody(t, put))
		}
		l := wantLease(t, b.get(t, "/leases/"+job))
		if !l.Alerting || !slices.Equal(l.AlertReasons, put.AlertReasons) {
			t.Errorf("lease of an alerting job: alerting %v, reasons %v; want true, %v", l.Alerting, l.AlertReasons, put.AlertReasons)
		}
		if got := wantPolicy(t, b.get(t, "/leases/"+job+"/policy")); jsonBody(t, got) != jsonBody(t, put) {
			t.Errorf("GET: got %s, want what PUT answered %s", jsonBody(t, got), jsonBody(t, put))
		}

		if l := b.runOnce(t, job, leaseapi.OutcomeSucceeded); l.Alerting || l.AlertReasons != nil {
			t.Errorf("the release of a success: alerting %v, reasons %v; want ok again", l.Alerting, l.AlertReasons)
		}
		ok := wantPolicy(t, b.get(t, "/leases/"+job+"/policy"))
		if ok.Status != leaseapi.AlertOK || ok.AlertReasons == nil || len(ok.AlertReasons) != 0 || ok.LastAlertAt != nil || !ok.StatusSince.After(put.StatusSince.Time) {
			t.Errorf("after a success: got %s, want ok, no reasons, a later statusSince", jsonBody(t, ok))
		}

		// Replacing keeps nothing of the old policy's conditions.
		if got := wantPolicy(t, b.putPolicy(t, job, `{"maxRuntimeMs":60000,"minRuntimeMs":1,"recoveryThreshold":3}`, nil)); got.ConsecutiveFailures != nil ||
			got.FailureRate != nil || got.RealertAfterMs != nil || *got.MaxRuntimeMs != 60000 || *got.MinRuntimeMs != 1 || got.RecoveryThreshold != 3 {
			t.Errorf("PUT replacing: got %s", jsonBody(t, got))
		}

		if resp := b.do(t, request{method: http.MethodDelete, path: "/leases/" + job + "/policy"}); resp.status != http.StatusNoContent || len(resp.body) != 0 {
			t.Errorf("DELETE: got %d %s, want 204 without a body", resp.status, resp.body)
		}
		wantProblem(t, b.get(t, "/leases/"+job+"/policy"), http.StatusNotFound, api.CodePolicyNotFound)
		wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job + "/policy"}), http.StatusNotFound, api.CodePolicyNotFound)
		if l := wantLease(t, b.get(t, "/leases/"+job)); l.Alerting {
			t.Error("lease after DELETE: alerting, want not")
		}

		wantProblem(t, b.doInvalid(t, request{method: http.MethodGet, path: "/leases/" + job + "/policy?x=1"}), http.StatusBadRequest, api.CodeInvalidRequest)
		wantProblem(t, b.doInvalid(t, request{method: http.MethodPut, path: "/leases/-bad/policy", body: `{"missedTicks":1}`}), http.StatusBadRequest, api.CodeInvalidRequest)
	})
}

// TestPolicyBadBodies: every body out of the contract is 400
// invalid_request naming what to change, and changes nothing.
func TestPolicyBadBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	job := b.job("bad")
	b.runOnce(t, job, leaseapi.OutcomeSucceeded)
	before := b.snapshot(t)
	for _, tt := range []struct{ body, detail string }{
		{`{}`, "policy must set at least one of"},
		{`{"recoveryThreshold":2,"realertAfterMs":60000}`, "policy must set at least one of"},
		{`{"consecutiveFailures":0}`, "consecutiveFailures must be an integer from 1 to 100"},
		{`{"consecutiveFailures":-5}`, "consecutiveFailures must be an integer from 1 to 100"},
		{`{"consecutiveFailures":101}`, "consecutiveFailures must be an integer from 1 to 100"},
		{`{"consecutiveFailures":4294967297}`, "consecutiveFailures must be an integer from 1 to 100"},
		{`{"consecutiveFailures":1.5}`, `"consecutiveFailures" must be an integer`},
		{`{"consecutiveFailures":"3"}`, `"consecutiveFailures" must be an integer`},
		{`{"consecutiveFailures":null}`, "consecutiveFailures"},
		{`{"missedTicks":1,"missedTicks":2}`, "missedTicks"},
		{`{"missedTicks":1,"extra":1}`, "extra"},
		{`{"MissedTicks":1}`, "MissedTicks"},
		{`{"missedTicks":1,"recoveryThreshold":0}`, "recoveryThreshold must be an integer from 1 to 100"},
		{`{"missedTicks":101}`, "missedTicks must be an integer from 1 to 100"},
		{`{"maxRuntimeMs":0}`, "maxRuntimeMs must be a whole number of milliseconds from 1 to 604800000"},
		{`{"maxRuntimeMs":604800001}`, "maxRuntimeMs must be a whole number of milliseconds from 1 to 604800000"},
		{`{"maxRuntimeMs":9223372036854775807}`, "maxRuntimeMs must be a whole number of milliseconds from 1 to 604800000"},
		{`{"minRuntimeMs":-9223372036854775808}`, "minRuntimeMs must be a whole number of milliseconds from 1 to 604800000"},
		{`{"maxRuntimeMs":1000,"minRuntimeMs":1000}`, "minRuntimeMs must be less than maxRuntimeMs"},
		{`{"missedTicks":1,"realertAfterMs":0}`, "realertAfterMs must be a whole number of milliseconds from 60000 to 2592000000"},
		{`{"missedTicks":1,"realertAfterMs":59999}`, "realertAfterMs must be a whole number of milliseconds from 60000 to 2592000000"},
		{`{"missedTicks":1,"realertAfterMs":2592000001}`, "realertAfterMs must be a whole number of milliseconds from 60000 to 2592000000"},
		{`{"failureRate":{"threshold":0,"runs":4}}`, "failureRate.threshold must be a number greater than 0 and at most 1"},
		{`{"failureRate":{"threshold":-0.5,"runs":4}}`, "failureRate.threshold must be a number greater than 0 and at most 1"},
		{`{"failureRate":{"threshold":1.01,"runs":4}}`, "failureRate.threshold must be a number greater than 0 and at most 1"},
		{`{"failureRate":{"runs":4}}`, "failureRate.threshold must be a number greater than 0 and at most 1"},
		{`{"failureRate":{"threshold":0.5,"runs":0}}`, "failureRate.runs must be an integer from 1 to 64"},
		{`{"failureRate":{"threshold":0.5,"runs":65}}`, "failureRate.runs must be an integer from 1 to 64"},
		{`{"failureRate":{"threshold":0.5}}`, "failureRate.runs must be an integer from 1 to 64"},
		{`{"failureRate":{"threshold":0.5,"runs":4,"x":1}}`, `failureRate: `},
		{`{"failureRate":{"threshold":0.5,"runs":4,"runs":5}}`, `failureRate: `},
		{`{"failureRate":{"threshold":"0.5","runs":4}}`, `failureRate: field "threshold" must be a number`},
		{`{"failureRate":{"threshold":0.5,"runs":null}}`, `failureRate: `},
		{`{"failureRate":[0.5,4]}`, `field "failureRate" must be an object`},
		{`{"failureRate":0.5}`, `field "failureRate" must be an object`},
		{`{"failureRate":{}}`, "failureRate.threshold"},
	} {
		p := wantProblem(t, b.doInvalid(t, request{method: http.MethodPut, path: "/leases/" + job + "/policy", body: tt.body}),
			http.StatusBadRequest, api.CodeInvalidRequest)
		if !strings.Contains(p.Detail, tt.detail) {
			t.Errorf("%s: detail %q, want it to say %q", tt.body, p.Detail, tt.detail)
		}
	}
	wantProblem(t, b.get(t, "/leases/"+job+"/policy"), http.StatusNotFound, api.CodePolicyNotFound)
	if after := b.snapshot(t); !after.equal(before) {
		t.Error("a refused body changed the store")
	}
	// The bounds themselves are valid.
	wantPolicy(t, b.putPolicy(t, job, `{"consecutiveFailures":100,"failureRate":{"threshold":1,"runs":64},"maxRuntimeMs":604800000,`+
		`"minRuntimeMs":604799999,"missedTicks":100,"recoveryThreshold":100,"realertAfterMs":2592000000}`, nil))
	wantPolicy(t, b.putPolicy(t, job, `{"failureRate":{"threshold":1e-9,"runs":1},"realertAfterMs":60000}`, nil))
}

// TestPolicyScopes: PUT and DELETE need role admin, GET role read, each for
// a job within the caller's scopes; updatedBy names the credential.
func TestPolicyScopes(t *testing.T) {
	t.Parallel()
	store := openSQLite(t)
	cred, admin := mint(t, store, "a-admin", leaseapi.RoleAdmin, "team-a:")
	_, reader := mint(t, store, "a-read", leaseapi.RoleRead, "team-a:")
	_, other := mint(t, store, "b-admin", leaseapi.RoleAdmin, "team-b:")
	b := setup(t, store, defaultOptions())
	job := "team-a:" + b.job("scoped")
	wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"a"}`, header: admin}))
	path := "/leases/" + job + "/policy"
	body := `{"missedTicks":2}`

	wantProblem(t, b.putPolicy(t, job, body, reader), http.StatusForbidden, api.CodeForbidden)
	wantProblem(t, b.putPolicy(t, job, body, other), http.StatusForbidden, api.CodeForbidden)
	p := wantPolicy(t, b.putPolicy(t, job, body, admin))
	if want := "a-admin (" + cred.ID + ")"; p.UpdatedBy == nil || *p.UpdatedBy != want {
		t.Errorf("updatedBy: got %v, want %q", p.UpdatedBy, want)
	}
	wantPolicy(t, b.do(t, request{method: http.MethodGet, path: path, header: reader}))
	wantProblem(t, b.do(t, request{method: http.MethodGet, path: path, header: other}), http.StatusForbidden, api.CodeForbidden)
	wantProblem(t, b.do(t, request{method: http.MethodDelete, path: path, header: reader}), http.StatusForbidden, api.CodeForbidden)
	wantProblem(t, b.do(t, request{method: http.MethodDelete, path: path, header: other}), http.StatusForbidden, api.CodeForbidden)
	if resp := b.do(t, request{method: http.MethodDelete, path: path, header: admin}); resp.status != http.StatusNoContent {
		t.Errorf("DELETE by the admin in scope: got %d %s, want 204", resp.status, resp.body)
	}
}
