package apitest_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/apitest"
)

// TestClosedFormCloses: the answers a later release may send (a field this
// one does not know, at the top or nested; a problem code it does not
// know) pass the published spec and fail its closed form, in both
// validators the tests use: the strict one of this package and
// kin-openapi. This release's own answers pass both.
func TestClosedFormCloses(t *testing.T) {
	t.Parallel()
	published, err := apitest.New(api.Spec)
	if err != nil {
		t.Fatal(err)
	}
	closed, err := apitest.Strict()
	if err != nil {
		t.Fatal(err)
	}
	kinPublished, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatal(err)
	}
	closedSpec, err := apitest.ClosedSpec()
	if err != nil {
		t.Fatal(err)
	}
	kinClosed, err := openapi3.NewLoader().LoadFromData(closedSpec)
	if err != nil {
		t.Fatal(err)
	}

	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	lease := api.FromLease(leaseapi.Lease{
		JobID: "a", Owner: "o", Token: 1, State: leaseapi.StateHeld,
		AcquiredAt: now, RenewedAt: now, ExpiresAt: now.Add(time.Minute), TTL: time.Minute,
	})
	leaseJSON := apitest.JSONObject(t, lease)
	problem := func(code string, lease map[string]any) map[string]any {
		return map[string]any{
			"type": api.ProblemTypePrefix + code, "title": "Refused", "status": http.StatusConflict,
			"detail": "d", "code": code, "lease": lease,
		}
	}
	withField := func(m map[string]any) map[string]any {
		out := map[string]any{"someNewField": map[string]any{"x": 1}}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	// The schema of an acquire's 409, through components/responses.
	pointer, ok := closed.ResponseSchemaPointer("/leases/{jobId}/acquire", http.MethodPost, http.StatusConflict, api.ProblemContentType)
	if !ok {
		t.Fatal("the spec has no 409 problem schema for POST /leases/{jobId}/acquire")
	}
	kinConflict := func(doc *openapi3.T) *openapi3.Schema {
		return doc.Components.Responses["AcquireConflict"].Value.Content.Get(api.ProblemContentType).Schema.Value
	}

	for _, tt := range []struct {
		name        string
		pointer     string
		kinSchema   func(*openapi3.T) *openapi3.Schema
		body        map[string]any
		closedValid bool
	}{
		{"lease", apitest.SchemaPointer("Lease"), kinSchema("Lease"), leaseJSON, true},
		{"lease with a new field", apitest.SchemaPointer("Lease"), kinSchema("Lease"), withField(leaseJSON), false},
		{"lease_held", pointer, kinConflict, problem(api.CodeLeaseHeld, leaseJSON), true},
		{"a new refusal", pointer, kinConflict, problem("some_new_refusal", leaseJSON), false},
		{"lease_held with a new field", pointer, kinConflict, withField(problem(api.CodeLeaseHeld, leaseJSON)), false},
		{"lease_held whose lease has a new field", pointer, kinConflict, problem(api.CodeLeaseHeld, withField(leaseJSON)), false},
	} {
		body, err := json.Marshal(tt.body)
		if err != nil {
			t.Fatal(err)
		}
		if err := published.ValidateJSON(tt.pointer, body); err != nil {
			t.Errorf("%s: the published spec refuses it: %v", tt.name, err)
		}
		if err := closed.ValidateJSON(tt.pointer, body); (err == nil) != tt.closedValid {
			t.Errorf("%s: closed form: got error %v, want valid=%v", tt.name, err, tt.closedValid)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		if err := tt.kinSchema(kinPublished).VisitJSON(v); err != nil {
			t.Errorf("%s: kin-openapi with the published spec refuses it: %v", tt.name, err)
		}
		if err := tt.kinSchema(kinClosed).VisitJSON(v); (err == nil) != tt.closedValid {
			t.Errorf("%s: kin-openapi with the closed form: got error %v, want valid=%v", tt.name, err, tt.closedValid)
		}
	}
}

// kinSchema is the component schema name of a kin-openapi document.
func kinSchema(name string) func(*openapi3.T) *openapi3.Schema {
	return func(doc *openapi3.T) *openapi3.Schema { return doc.Components.Schemas[name].Value }
}
