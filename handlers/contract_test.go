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
