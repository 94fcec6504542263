package handlers

import (
	"context"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// whoami answers who the caller is: its credential's name, role and
// scopes, or open mode.
func (h *handler) whoami(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeProblem(w, r, err)
		return
	}
	p := principalFrom(r.Context())
	if p.open {
		writeJSON(w, r, api.Whoami{Open: true})
		return
	}
	writeJSON(w, r, api.Whoami{Name: p.name, Role: p.role, Scopes: p.scopes})
}

// credentialStore is the store of /credentials; without one (a store that
// keeps no credentials) the routes answer 404.
func (h *handler) credentialStore() (leaseapi.CredentialStore, error) {
	if h.auth.store == nil {
		return nil, &requestError{status: http.StatusNotFound, code: api.CodeNotFound,
			detail: "this server keeps no credentials; use its configured tokens"}
	}
	return h.auth.store, nil
}

// createCredential makes a credential and answers its token, the only time
// it is shown. A caller may only create credentials within its own scopes
// and of a role no stronger than its own.
func (h *handler) createCredential(w http.ResponseWriter, r *http.Request) {
	cs, err := h.credentialStore()
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	if _, err := query(r); err != nil {
		writeProblem(w, r, err)
		return
	}
	var req api.CreateCredentialRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	c, token := leaseapi.NewCredential(req.Name, req.Role, req.Scopes, req.RatePerSecond)
	c.Scopes = req.Scopes // validated as sent, normalized below
	if err := c.Validate(); err != nil {
		writeProblem(w, r, err)
		return
	}
	c.Scopes = leaseapi.NormalizeScopes(c.Scopes)
	p := principalFrom(r.Context())
	if !leaseapi.ScopesWithin(c.Scopes, p.scopes) || !p.role.Allows(c.Role) {
		writeProblem(w, r, &requestError{status: http.StatusForbidden, code: api.CodeForbidden,
			detail: "a credential can only create credentials within its own scopes and role"})
		return
	}
	if err := h.limitRate(p, &c); err != nil {
		writeProblem(w, r, err)
		return
	}
	_, err = call(r.Context(), h.metrics, "create_credential", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, cs.CreateCredential(ctx, &c)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	h.auth.invalidate() // the new credential works at once on this instance
	loggerFrom(r.Context()).Info("credential created", "credential_id", c.ID, "name", c.Name, "role", string(c.Role), "scopes", c.Scopes)
	w.Header().Set("Location", "/credentials/"+c.ID)
	writeJSONStatus(w, r, http.StatusCreated, api.CreatedCredential{Credential: api.FromCredential(c), Token: token})
}

// limitRate keeps c's rate at or below its creator's: under a limited
// creator an omitted ratePerSecond is the creator's own (a creator on the
// server's default leaves it at the default, which it shares), and a
// higher one, or 0 (no limit), is 403.
func (h *handler) limitRate(creator *principal, c *leaseapi.Credential) error {
	own := h.limits.def
	if creator.rate != nil {
		own = *creator.rate
	}
	switch {
	case own <= 0: // the creator is not limited
		return nil
	case c.RatePerSecond == nil:
		if creator.rate != nil {
			c.RatePerSecond = new(own)
		}
		return nil
	case *c.RatePerSecond == 0 || *c.RatePerSecond > own:
		asked := strconv.FormatFloat(*c.RatePerSecond, 'f', -1, 64)
		if *c.RatePerSecond == 0 {
			asked = "0 (no limit)"
		}
		ownText := strconv.FormatFloat(own, 'f', -1, 64)
		return &requestError{status: http.StatusForbidden, code: api.CodeForbidden,
			detail: "ratePerSecond " + asked + " is above this credential's own rate of " + ownText +
				" calls per second; ask for at most " + ownText + ", or leave ratePerSecond out to get " + ownText}
	}
	return nil
}

// visibleCredentials are the credentials the caller of r (which takes no
// query parameters) may see: those whose scopes lie within its own.
func (h *handler) visibleCredentials(r *http.Request) (leaseapi.CredentialStore, []leaseapi.Credential, error) {
	cs, err := h.credentialStore()
	if err != nil {
		return nil, nil, err
	}
	if _, err := query(r); err != nil {
		return nil, nil, err
	}
	set, err := call(r.Context(), h.metrics, "list_credentials", cs.Credentials)
	if err != nil {
		return nil, nil, err
	}
	return cs, visibleTo(r, set.Credentials, func(c leaseapi.Credential) []string { return c.Scopes }), nil
}

// visibleTo keeps the items (credentials, webhooks) that the caller of r
// may see: those whose scopes lie within its own.
func visibleTo[T any](r *http.Request, items []T, scopes func(T) []string) []T {
	p := principalFrom(r.Context())
	out := make([]T, 0, len(items))
	for _, it := range items {
		if leaseapi.ScopesWithin(scopes(it), p.scopes) {
			out = append(out, it)
		}
	}
	return out
}

// listCredentials lists the credentials within the caller's scopes, never
// a secret or its hash.
func (h *handler) listCredentials(w http.ResponseWriter, r *http.Request) {
	_, creds, err := h.visibleCredentials(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	out := api.CredentialList{Credentials: make([]api.Credential, 0, len(creds))}
	for _, c := range creds {
		out.Credentials = append(out.Credentials, api.FromCredential(c))
	}
	writeJSON(w, r, out)
}

// deleteCredential revokes a credential within the caller's scopes; one
// outside them is not found, exactly as one that does not exist.
func (h *handler) deleteCredential(w http.ResponseWriter, r *http.Request) {
	cs, creds, err := h.visibleCredentials(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	id := chi.URLParam(r, "id")
	var found *leaseapi.Credential
	for i := range creds {
		if creds[i].ID == id {
			found = &creds[i]
		}
	}
	if found == nil {
		writeProblem(w, r, leaseapi.ErrCredentialNotFound)
		return
	}
	_, err = call(r.Context(), h.metrics, "delete_credential", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, cs.DeleteCredential(ctx, id)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	h.auth.invalidate() // revoked at once on this instance
	loggerFrom(r.Context()).Info("credential revoked", "credential_id", found.ID, "name", found.Name)
	w.WriteHeader(http.StatusNoContent)
}
