package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/apitest"
	"github.com/leaseapi/leaseapi/api/client"
)

// TestReadsALaterRelease: the generated client reads the answers a later
// leaseapi may give (docs/upgrading.md): a field it does not know is
// ignored, at the top of an answer and nested; a value of an extensible
// enum it does not know (a problem code, a catch-up policy) decodes as the
// string it is, and Valid reports it unknown, while the constants of the
// values it knows stay.
func TestReadsALaterRelease(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	lease := apitest.JSONObject(t, api.FromLease(leaseapi.Lease{
		JobID: "a", Owner: "o", Token: 3, State: leaseapi.StateHeld,
		AcquiredAt: now, RenewedAt: now, ExpiresAt: now.Add(time.Minute), TTL: time.Minute,
	}))
	lease["someNewField"] = map[string]any{"x": 1}
	lease["catchUp"] = "some_new_policy"
	refusal := map[string]any{
		"type": api.ProblemTypePrefix + "some_new_refusal", "title": "Some new refusal", "status": 409,
		"detail": "d", "code": "some_new_refusal", "lease": lease, "someNewField": true,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(lease)
			return
		}
		w.Header().Set("Content-Type", api.ProblemContentType)
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(refusal)
	}))
	t.Cleanup(srv.Close)
	c, err := client.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	got, err := c.GetLeaseWithResponse(context.Background(), "a")
	if err != nil || got.JSON200 == nil {
		t.Fatalf("get: %v, %s; want the lease", err, got.Body)
	}
	if l := got.JSON200; l.Owner != "o" || l.Token != 3 || !l.ExpiresAt.Equal(now.Add(time.Minute)) || l.State != client.StateHeld {
		t.Errorf("lease: got %+v, want o's token 3", l)
	}
	if l := got.JSON200; l.CatchUp != "some_new_policy" || l.CatchUp.Valid() || !client.LeaseCatchUpLatest.Valid() {
		t.Errorf("catchUp: got %q (valid %v), want some_new_policy, not valid", l.CatchUp, l.CatchUp.Valid())
	}

	acquired, err := c.AcquireLeaseWithResponse(context.Background(), "a", client.AcquireRequest{Owner: "o"})
	if err != nil || acquired.StatusCode() != http.StatusConflict || acquired.ApplicationproblemJSON409 == nil {
		t.Fatalf("acquire: %v, %d %s; want the 409 read", err, acquired.StatusCode(), acquired.Body)
	}
	p, err := acquired.ApplicationproblemJSON409.AsAcquireConflictProblem()
	if err != nil {
		t.Fatalf("the 409 as an AcquireConflictProblem: %v", err)
	}
	if p.Code != "some_new_refusal" || p.Code.Valid() || p.Lease.Owner != "o" || p.Status != client.AcquireConflictProblemStatusN409 {
		t.Errorf("the refusal: got %+v, want code some_new_refusal (not valid) with o's lease", p)
	}
	// The constants of the known codes, which an open enum must not cost.
	for _, known := range []interface{ Valid() bool }{
		client.ProblemCodeLeaseHeld, client.AcquireConflictProblemCodeTickDone, client.BadRequestProblemCodeInvalidRequest,
		client.JobAlerting, client.AlertReasonMissed, client.RunTriggerManual,
	} {
		if !known.Valid() {
			t.Errorf("%v: not Valid", known)
		}
	}
}
