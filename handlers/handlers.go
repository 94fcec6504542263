// Package handlers is the HTTP API of leaseapi: a chi router that decodes
// and validates requests strictly, calls a leaseapi.Store within each
// request's deadline, and answers with the JSON of package api or an RFC 9457
// problem. api/openapi.yaml describes exactly what it serves; the tests hold
// every request and response to it.
package handlers

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/version"
	"github.com/leaseapi/leaseapi/ui"
	"github.com/leaseapi/leaseapi/webhook"
)

// Defaults for the zero values of Options.
const (
	DefaultTTL            = 30 * time.Second
	DefaultMinTTL         = time.Second
	DefaultMaxTTL         = time.Hour
	DefaultRequestTimeout = time.Second
	DefaultBatchTimeout   = 10 * time.Second
	DefaultMissedGrace    = time.Minute
	// DefaultRepairWindow and DefaultRepairRetention are the window and
	// the run retention a repair assumes, the service's defaults.
	DefaultRepairWindow    = 5 * time.Minute
	DefaultRepairRetention = 168 * time.Hour
)

// Options configure New. Zero durations take the Default* values.
type Options struct {
	// DefaultTTL is the TTL of an acquire without ttlMs. It must lie within
	// [MinTTL, MaxTTL].
	DefaultTTL time.Duration
	// MinTTL and MaxTTL bound the ttlMs of acquire and heartbeat.
	MinTTL, MaxTTL time.Duration
	// RequestTimeout bounds every /leases request and /readyz: when the store
	// has not answered by then, the request gets 503 unavailable.
	RequestTimeout time.Duration
	// BatchTimeout bounds a batch (POST /acquire, POST /heartbeat) as
	// RequestTimeout bounds a single call: a batch decides up to
	// leaseapi.MaxBatchItems calls, and the items not decided by then are
	// answered 503 unavailable.
	BatchTimeout time.Duration
	// APITokens and AdminTokens are bearer tokens: unscoped credentials of
	// role lease and admin, named api-token-N and admin-token-N by their
	// position. When either is non-empty the API is closed: every call
	// needs a token or a credential of the database.
	APITokens, AdminTokens []string
	// Credentials keeps the credentials; nil uses the store when it is a
	// leaseapi.CredentialStore (both stores are). While no credential was
	// ever created and no token is configured, the API is open.
	Credentials leaseapi.CredentialStore
	// RateLimit is the calls per second per instance of a credential
	// without a ratePerSecond of its own (heartbeats and releases are never
	// limited); 0 is no limit.
	RateLimit float64
	// CredentialRefresh is how often the credentials are reread;
	// DefaultCredentialRefresh when zero. At most 5s.
	CredentialRefresh time.Duration
	// Logger receives the access log and server errors; nil discards them.
	Logger *slog.Logger
	// Registry receives the HTTP and store metrics and is served at
	// /metrics; nil uses a new registry of the handler's own.
	Registry *prometheus.Registry
	// MetricsToken, when set, is the bearer token /metrics requires; empty
	// leaves /metrics open.
	MetricsToken string
	// GroupMetrics counts the group_full refusals by group and team
	// (leaseapi_group_full_total). Group names are named like job ids, so
	// it is set where the per-job series are, behind the metrics token.
	GroupMetrics bool
	// MissedGrace is the grace of a schedule whose acquire sends no graceMs.
	MissedGrace time.Duration
	// TriggerGrace is how long a manual tick stays claimable at least (the
	// job's grace when that is longer); zero means
	// leaseapi.DefaultTriggerGrace.
	TriggerGrace time.Duration
	// MaxTickAhead is how far past the store's clock a tick may lie: a
	// repair (POST /leases/{jobId}/repair) undoes the marks of ticks later
	// than that.
	MaxTickAhead time.Duration
	// HistoryRetention is how long finished runs are kept: a repair never
	// makes a tick older than that grantable again.
	HistoryRetention time.Duration
	// Now is the clock of the GET /stats cache; nil uses time.Now. The
	// answers themselves carry the store's clock.
	Now func() time.Time
	// Webhooks keeps the webhooks; nil uses the store when it is a
	// leaseapi.WebhookStore (both stores are).
	Webhooks leaseapi.WebhookStore
	// WebhookSealer encrypts the URL and secret of a webhook before they
	// are stored; nil stores them as given.
	WebhookSealer *webhook.Sealer
	// WebhookAllowPrivate accepts webhook URLs whose host is a loopback,
	// private, link-local or otherwise non-public IP address.
	WebhookAllowPrivate bool
	// Idempotency keeps the Idempotency-Keys; nil uses the store when it
	// is a leaseapi.IdempotencyStore (both stores are).
	Idempotency leaseapi.IdempotencyStore
	// Version is the version /healthz reports; empty reports the running
	// binary's (internal/version).
	Version string
	// Gate says which gated rules (leaseapi.Feature) the database is
	// finalized for: a request that asks for one that is off is refused
	// 400 feature_disabled. Nil turns every rule this build knows on (a
	// store that keeps no feature level).
	Gate *leaseapi.Gate
	// Open serves every peer while the API is open (LEASEAPI_OPEN). Without
	// it an open API answers only loopback peers whose Host is localhost,
	// *.localhost, 127.0.0.0/8 or [::1] (403 for others), except on
	// /healthz, /readyz, /metrics and /openapi.yaml.
	Open bool
}

// handler holds the dependencies of every route; the routes are its methods.
type handler struct {
	store          leaseapi.Store
	defaultTTL     time.Duration
	minTTL, maxTTL time.Duration
	requestTimeout time.Duration
	batchTimeout   time.Duration
	// acquireTurns and heartbeatTurns are the batches of each kind
	// answered at once.
	acquireTurns, heartbeatTurns *turns
	version                      string
	missedGrace                  time.Duration
	triggerGrace                 time.Duration
	repairWindow                 time.Duration
	retention                    time.Duration
	auth                         *authenticator
	limits                       *rateLimiters
	perms                        map[string]permission // by "METHOD pattern"; see authorize
	logger                       *slog.Logger
	registry                     *prometheus.Registry
	metricsToken                 string
	metrics                      *metrics
	now                          func() time.Time
	statsCache                   statsCache

	webhooks            leaseapi.WebhookStore
	webhookSealer       *webhook.Sealer
	webhookAllowPrivate bool
	openToAll           bool // Options.Open
	idempotency         leaseapi.IdempotencyStore
	gate                *leaseapi.Gate // nil: every feature on
}

// New returns the HTTP handler of the API, serving store. It panics when the
// TTL options are inconsistent (MinTTL <= DefaultTTL <= MaxTTL, all positive
// whole milliseconds), which is a programming error: cmd validates its
// configuration before it calls New.
func New(store leaseapi.Store, opts Options) http.Handler {
	return newHandler(store, opts).routes()
}

// newHandler is New's handler, before its routes.
func newHandler(store leaseapi.Store, opts Options) *handler {
	h := &handler{
		store:          store,
		defaultTTL:     orDefault(opts.DefaultTTL, DefaultTTL),
		minTTL:         orDefault(opts.MinTTL, DefaultMinTTL),
		maxTTL:         orDefault(opts.MaxTTL, DefaultMaxTTL),
		requestTimeout: orDefault(opts.RequestTimeout, DefaultRequestTimeout),
		batchTimeout:   orDefault(opts.BatchTimeout, DefaultBatchTimeout),
		acquireTurns:   newTurns(batchTurns()),
		heartbeatTurns: newTurns(batchTurns()),
		version:        opts.Version,
		missedGrace:    orDefault(opts.MissedGrace, DefaultMissedGrace),
		triggerGrace:   orDefault(opts.TriggerGrace, leaseapi.DefaultTriggerGrace),
		repairWindow:   orDefault(opts.MaxTickAhead, DefaultRepairWindow),
		retention:      orDefault(opts.HistoryRetention, DefaultRepairRetention),
		logger:         opts.Logger,
		registry:       opts.Registry,
		metricsToken:   opts.MetricsToken,
		now:            opts.Now,

		webhooks:            opts.Webhooks,
		webhookSealer:       opts.WebhookSealer,
		webhookAllowPrivate: opts.WebhookAllowPrivate,
		openToAll:           opts.Open,
		idempotency:         opts.Idempotency,
		gate:                opts.Gate,
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.version == "" {
		h.version = version.Get().Version
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.registry == nil {
		h.registry = prometheus.NewRegistry()
	}
	if is, ok := store.(leaseapi.IdempotencyStore); ok && h.idempotency == nil {
		h.idempotency = is
	}
	if ws, ok := store.(leaseapi.WebhookStore); ok && h.webhooks == nil {
		h.webhooks = ws
	}
	credentials := opts.Credentials
	if cs, ok := store.(leaseapi.CredentialStore); ok && credentials == nil {
		credentials = cs
	}
	h.auth = newAuthenticator(opts.APITokens, opts.AdminTokens, credentials, orDefault(opts.CredentialRefresh, DefaultCredentialRefresh))
	h.limits = newRateLimiters(opts.RateLimit)
	if err := h.checkTTLs(); err != nil {
		panic("handlers.New: " + err.Error())
	}
	h.metrics = newMetrics(h.registry, opts.GroupMetrics)
	return h
}

// routes is the route table.
func (h *handler) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(h.requestID, closeChunked, h.instrument, h.recoverer, h.protect)
	r.NotFound(h.notFound)
	r.MethodNotAllowed(h.methodNotAllowed(r))

	r.Get("/healthz", h.healthz)
	r.Get("/readyz", h.readyz)
	r.Get("/metrics", h.metricsAuth(h.metricsHandler()))
	r.Get("/openapi.yaml", h.openAPI)

	// The operations console: static files, public like the routes above
	// (the console calls the API below with its user's token).
	r.Get("/", ui.Redirect)
	r.Get("/ui", ui.Redirect)
	r.Get(ui.Prefix+"*", ui.Handler(http.HandlerFunc(h.notFound)).ServeHTTP)

	// Every other route passes through authorize, which checks the
	// caller's role and scopes against the route's permission.
	read := permission{role: leaseapi.RoleRead}
	lease := permission{role: leaseapi.RoleLease}
	holder := permission{role: leaseapi.RoleLease, unlimited: true}
	leaseItems := permission{role: leaseapi.RoleLease, batch: true}
	holderItems := permission{role: leaseapi.RoleLease, unlimited: true, batch: true}
	admin := permission{role: leaseapi.RoleAdmin}
	manage := permission{role: leaseapi.RoleAdmin, always: true}
	h.perms = make(map[string]permission)
	r.Group(func(r chi.Router) {
		r.Use(h.timeout, h.authorize)
		for _, rt := range []apiRoute{
			{http.MethodGet, "/whoami", read, h.whoami},
			{http.MethodGet, "/leases", read, h.listLeases},
			{http.MethodGet, "/leases/{jobId}", read, h.getLease},
			{http.MethodDelete, "/leases/{jobId}", admin, h.revokeLease},
			{http.MethodPost, "/leases/{jobId}/pause", admin, h.pause},
			{http.MethodPost, "/leases/{jobId}/resume", admin, h.resume},
			{http.MethodPost, "/leases/{jobId}/repair", admin, h.repair},
			{http.MethodDelete, "/leases/{jobId}/schedule", admin, h.forgetSchedule},
			{http.MethodPost, "/leases/{jobId}/trigger", admin, h.trigger},
			{http.MethodDelete, "/leases/{jobId}/trigger", admin, h.cancelTrigger},
			{http.MethodDelete, "/leases/{jobId}/group", admin, h.leaveGroup},
			{http.MethodPut, "/leases/{jobId}/policy", admin, h.putPolicy},
			{http.MethodGet, "/leases/{jobId}/policy", read, h.getPolicy},
			{http.MethodDelete, "/leases/{jobId}/policy", admin, h.deletePolicy},
			{http.MethodPost, "/owed", read, h.owed},
			{http.MethodPost, "/leases/{jobId}/acquire", lease, h.acquire},
			{http.MethodPost, "/leases/{jobId}/heartbeat", holder, h.heartbeat},
			{http.MethodPost, "/leases/{jobId}/release", holder, h.release},
			{http.MethodPost, "/acquire", leaseItems, h.acquireBatch},
			{http.MethodPost, "/heartbeat", holderItems, h.heartbeatBatch},
			{http.MethodGet, "/leases/{jobId}/runs", read, h.listRuns},
			{http.MethodGet, "/runs", read, h.listRecentRuns},
			{http.MethodGet, "/stats", read, h.stats},
			{http.MethodPost, "/credentials", manage, h.createCredential},
			{http.MethodGet, "/credentials", manage, h.listCredentials},
			{http.MethodDelete, "/credentials/{id}", manage, h.deleteCredential},
			{http.MethodPost, "/webhooks", admin, h.createWebhook},
			{http.MethodGet, "/webhooks", admin, h.listWebhooks},
			{http.MethodDelete, "/webhooks/{id}", admin, h.deleteWebhook},
			{http.MethodGet, "/webhooks/{id}/deliveries", admin, h.webhookDeliveries},
			{http.MethodGet, "/groups", read, h.listGroups},
			{http.MethodPut, "/groups/{name}", admin, h.putGroup},
			{http.MethodGet, "/groups/{name}", read, h.getGroup},
			{http.MethodDelete, "/groups/{name}", admin, h.deleteGroup},
		} {
			h.perms[rt.method+" "+rt.pattern] = rt.perm
			r.Method(rt.method, rt.pattern, rt.handler)
		}
	})
	return r
}

func (h *handler) checkTTLs() error {
	for _, d := range []time.Duration{h.minTTL, h.defaultTTL, h.maxTTL} {
		if d <= 0 || d%time.Millisecond != 0 {
			return fmt.Errorf("TTLs must be positive whole milliseconds, got %s", d)
		}
	}
	if h.minTTL > h.defaultTTL || h.defaultTTL > h.maxTTL {
		return fmt.Errorf("want MinTTL <= DefaultTTL <= MaxTTL, got %s, %s, %s", h.minTTL, h.defaultTTL, h.maxTTL)
	}
	if h.requestTimeout <= 0 || h.batchTimeout <= 0 {
		return fmt.Errorf("RequestTimeout and BatchTimeout must be positive, got %s, %s", h.requestTimeout, h.batchTimeout)
	}
	if h.auth.refresh <= 0 || h.auth.refresh > 5*time.Second {
		return fmt.Errorf("CredentialRefresh must be positive and at most 5s, got %s", h.auth.refresh)
	}
	if h.missedGrace <= 0 || h.missedGrace%time.Millisecond != 0 || h.missedGrace > leaseapi.MaxGrace {
		return fmt.Errorf("MissedGrace must be a positive whole number of milliseconds up to 24h, got %s", h.missedGrace)
	}
	if h.triggerGrace < time.Millisecond || h.triggerGrace%time.Millisecond != 0 || h.triggerGrace > leaseapi.MaxGrace {
		return fmt.Errorf("TriggerGrace must be a positive whole number of milliseconds up to 24h, got %s", h.triggerGrace)
	}
	if h.repairWindow <= 0 || h.retention <= 0 {
		return fmt.Errorf("MaxTickAhead and HistoryRetention must be positive, got %s, %s", h.repairWindow, h.retention)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
