package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/webhook"
)

// The webhooks: a team's subscription to the events of the jobs in its
// scopes. Managed like credentials: an admin sees, creates and deletes
// only the webhooks whose scopes lie within its own (wider is 403, another
// team's is 404).

// webhookStore is the store of /webhooks; without one (a store that keeps
// no webhooks) the routes answer 404.
func (h *handler) webhookStore() (leaseapi.WebhookStore, error) {
	if h.webhooks == nil {
		return nil, &requestError{status: http.StatusNotFound, code: api.CodeNotFound,
			detail: "this server keeps no webhooks"}
	}
	return h.webhooks, nil
}

// checkWebhookURL says what is wrong with a webhook's URL, if anything:
// an absolute http or https URL with a host and no user information, of
// at most leaseapi.MaxWebhookURLLen characters, with a port of 1–65535,
// whose host is not an IPv4 address in a form other than a dotted quad
// and, when it is an IP literal, is globally reachable unless private
// targets are allowed (webhook.CheckURL). A host name is checked on every address it resolves to when a delivery
// dials it (webhook.Control), since a name can resolve elsewhere later.
func (h *handler) checkWebhookURL(raw string) error {
	if len(raw) > leaseapi.MaxWebhookURLLen {
		return invalidf("url must be at most %d characters, got %d", leaseapi.MaxWebhookURLLen, len(raw))
	}
	u, err := url.Parse(raw)
	switch {
	case raw == "" || err != nil || !u.IsAbs() || u.Opaque != "":
		return invalidf("url must be an absolute http or https URL, such as https://hooks.example.com/leaseapi")
	case u.Scheme != "http" && u.Scheme != "https":
		return invalidf("url must use http or https, not %q", clip(u.Scheme))
	case u.Hostname() == "":
		return invalidf("url must name a host")
	case u.User != nil:
		return invalidf("url must not carry a user name or password; authenticate deliveries by their signature")
	}
	err = webhook.CheckURL(raw, h.webhookAllowPrivate)
	var (
		forbidden *webhook.ForbiddenError
		form      *webhook.IPv4FormError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &forbidden):
		return invalidf("url's host %s is not a public address: %s; this server delivers only to globally reachable addresses",
			clip(u.Hostname()), forbidden.Reason())
	case errors.As(err, &form):
		return invalidf("url's %s", form.Reason())
	case errors.Is(err, webhook.ErrBadPort):
		return invalidf("url's port must be 1 to 65535, not %q", clip(u.Port()))
	}
	return invalidf("url must be an absolute http or https URL, such as https://hooks.example.com/leaseapi")
}

// webhookSecret is the secret a creator chose, if valid, else a new one.
func webhookSecret(chosen *string) (string, error) {
	if chosen == nil {
		return webhook.NewSecret()
	}
	if webhook.CheckSecret(*chosen) != nil {
		return "", &leaseapi.InvalidError{Field: "secret", Rule: webhook.SecretRule}
	}
	return *chosen, nil
}

// createWebhook makes a webhook and answers its secret (the caller's
// choice or a new one), the only time it is shown, and its digest. Its
// scopes must lie within the caller's; its name, if any, is unique within
// them.
func (h *handler) createWebhook(w http.ResponseWriter, r *http.Request) {
	ws, err := h.webhookStore()
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	if _, err := query(r); err != nil {
		writeProblem(w, r, err)
		return
	}
	var req api.CreateWebhookRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.checkWebhookURL(req.URL); err != nil {
		writeProblem(w, r, err)
		return
	}
	format := leaseapi.WebhookFormatStandard
	if req.Format != nil {
		format = *req.Format
	}
	id, err := webhook.NewID()
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	secret, err := webhookSecret(req.Secret)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	p := principalFrom(r.Context())
	hook := leaseapi.Webhook{ID: id, URL: req.URL, URLRedacted: webhook.Redact(req.URL), Secret: secret,
		Digest: webhook.Digest(req.URL, secret), Events: req.Events, Scopes: req.Scopes, Format: format}
	if req.Name != nil {
		if !leaseapi.ValidWebhookName(*req.Name) {
			writeProblem(w, r, &leaseapi.InvalidError{Field: "name", Rule: leaseapi.WebhookNameRule})
			return
		}
		hook.Name = *req.Name
	}
	if !p.open {
		hook.CreatedBy = p.audit()
	}
	if err := hook.Validate(); err != nil {
		writeProblem(w, r, err)
		return
	}
	hook.Scopes = leaseapi.NormalizeScopes(hook.Scopes)
	if !leaseapi.ScopesWithin(hook.Scopes, p.scopes) {
		writeProblem(w, r, &requestError{status: http.StatusForbidden, code: api.CodeForbidden,
			detail: "a credential can only create webhooks within its own scopes"})
		return
	}
	// Stored sealed when the server has a key: a dump of the database
	// alone then holds neither a secret to sign with nor a Slack URL.
	if hook.URL, err = h.webhookSealer.Seal(req.URL, webhook.AAD(id, webhook.FieldURL)); err != nil {
		writeProblem(w, r, err)
		return
	}
	if hook.Secret, err = h.webhookSealer.Seal(secret, webhook.AAD(id, webhook.FieldSecret)); err != nil {
		writeProblem(w, r, err)
		return
	}
	_, err = call(r.Context(), h.metrics, "create_webhook", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, ws.CreateWebhook(ctx, &hook)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	// Never the URL (a Slack URL is a secret) nor the secret.
	loggerFrom(r.Context()).Info("webhook created", "webhook_id", hook.ID, "name", hook.Name, "events", hook.Events,
		"scopes", hook.Scopes, "format", hook.Format)
	w.Header().Set("Location", "/webhooks/"+hook.ID)
	writeJSONStatus(w, r, http.StatusCreated, api.CreatedWebhook{Webhook: api.FromWebhook(hook), Secret: secret})
}

// visibleWebhooks are the webhooks the caller of r (which takes no query
// parameters) may see: those whose scopes lie within its own.
func (h *handler) visibleWebhooks(r *http.Request) (leaseapi.WebhookStore, []leaseapi.Webhook, error) {
	ws, err := h.webhookStore()
	if err != nil {
		return nil, nil, err
	}
	if _, err := query(r); err != nil {
		return nil, nil, err
	}
	all, err := call(r.Context(), h.metrics, "list_webhooks", ws.Webhooks)
	if err != nil {
		return nil, nil, err
	}
	return ws, visibleTo(r, all, func(w leaseapi.Webhook) []string { return w.Scopes }), nil
}

// visibleWebhook is the webhook {id} of r if the caller may see it, else
// ErrWebhookNotFound, exactly as for one that does not exist.
func (h *handler) visibleWebhook(r *http.Request) (leaseapi.WebhookStore, leaseapi.Webhook, error) {
	ws, hooks, err := h.visibleWebhooks(r)
	if err != nil {
		return nil, leaseapi.Webhook{}, err
	}
	id := chi.URLParam(r, "id")
	for _, hook := range hooks {
		if hook.ID == id {
			return ws, hook, nil
		}
	}
	return nil, leaseapi.Webhook{}, fmt.Errorf("webhook %q: %w", clip(id), leaseapi.ErrWebhookNotFound)
}

// listWebhooks lists the webhooks within the caller's scopes, their URLs
// redacted, never a secret.
func (h *handler) listWebhooks(w http.ResponseWriter, r *http.Request) {
	_, hooks, err := h.visibleWebhooks(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	out := api.WebhookList{Webhooks: make([]api.Webhook, 0, len(hooks))}
	for _, hook := range hooks {
		out.Webhooks = append(out.Webhooks, api.FromWebhook(hook))
	}
	writeJSON(w, r, out)
}

// deleteWebhook deletes a webhook within the caller's scopes, with the
// events still waiting for it and its log.
func (h *handler) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	ws, hook, err := h.visibleWebhook(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	_, err = call(r.Context(), h.metrics, "delete_webhook", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, ws.DeleteWebhook(ctx, hook.ID)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	loggerFrom(r.Context()).Info("webhook deleted", "webhook_id", hook.ID)
	w.WriteHeader(http.StatusNoContent)
}

// webhookDeliveries lists the last attempts of a webhook within the
// caller's scopes, newest first.
func (h *handler) webhookDeliveries(w http.ResponseWriter, r *http.Request) {
	ws, hook, err := h.visibleWebhook(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	log, err := call(r.Context(), h.metrics, "webhook_deliveries", func(ctx context.Context) ([]leaseapi.WebhookDelivery, error) {
		return ws.WebhookDeliveries(ctx, hook.ID)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	out := api.WebhookDeliveryList{Deliveries: make([]api.WebhookDelivery, 0, len(log))}
	for _, d := range log {
		out.Deliveries = append(out.Deliveries, api.FromWebhookDelivery(d))
	}
	writeJSON(w, r, out)
}
