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
)

// Defaults for the zero values of Options.
const (
	DefaultTTL            = 30 * time.Second
	DefaultMinTTL         = time.Second
	DefaultMaxTTL         = time.Hour
	DefaultRequestTimeout = time.Second
	DefaultMissedGrace    = time.Minute
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
	// APITokens and AdminTokens are bearer tokens. When either is non-empty,
	// every /leases call needs one of them, and DELETE /leases/{jobId} needs
	// an admin token. Admin tokens are valid API tokens.
	APITokens, AdminTokens []string
	// Logger receives the access log and server errors; nil discards them.
	Logger *slog.Logger
	// Registry receives the HTTP and store metrics and is served at
	// /metrics; nil uses a new registry of the handler's own.
	Registry *prometheus.Registry
	// MissedGrace is the grace of a schedule whose acquire sends no graceMs.
	MissedGrace time.Duration
}

// handler holds the dependencies of every route; the routes are its methods.
type handler struct {
	store          leaseapi.Store
	defaultTTL     time.Duration
	minTTL, maxTTL time.Duration
	requestTimeout time.Duration
	missedGrace    time.Duration
	auth           authenticator
	logger         *slog.Logger
	registry       *prometheus.Registry
	metrics        *metrics
}

// New returns the HTTP handler of the API, serving store. It panics when the
// TTL options are inconsistent (MinTTL <= DefaultTTL <= MaxTTL, all positive
// whole milliseconds), which is a programming error: cmd validates its
// configuration before it calls New.
func New(store leaseapi.Store, opts Options) http.Handler {
	h := &handler{
		store:          store,
		defaultTTL:     orDefault(opts.DefaultTTL, DefaultTTL),
		minTTL:         orDefault(opts.MinTTL, DefaultMinTTL),
		maxTTL:         orDefault(opts.MaxTTL, DefaultMaxTTL),
		requestTimeout: orDefault(opts.RequestTimeout, DefaultRequestTimeout),
		missedGrace:    orDefault(opts.MissedGrace, DefaultMissedGrace),
		auth:           newAuthenticator(opts.APITokens, opts.AdminTokens),
		logger:         opts.Logger,
		registry:       opts.Registry,
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.registry == nil {
		h.registry = prometheus.NewRegistry()
	}
	if err := h.checkTTLs(); err != nil {
		panic("handlers.New: " + err.Error())
	}
	h.metrics = newMetrics(h.registry)
	return h.routes()
}

// routes is the route table.
func (h *handler) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(h.requestID, closeChunked, h.instrument, h.recoverer)
	r.NotFound(h.notFound)
	r.MethodNotAllowed(h.methodNotAllowed(r))

	r.Get("/healthz", h.healthz)
	r.Get("/readyz", h.readyz)
	r.Get("/metrics", h.metricsHandler())
	r.Get("/openapi.yaml", h.openAPI)

	r.Group(func(r chi.Router) {
		r.Use(h.authenticate, h.timeout)
		r.Get("/leases", h.listLeases)
		r.Get("/leases/{jobId}", h.getLease)
		r.With(h.requireAdmin).Delete("/leases/{jobId}", h.revokeLease)
		r.With(h.requireAdmin).Post("/leases/{jobId}/pause", h.pause)
		r.With(h.requireAdmin).Post("/leases/{jobId}/resume", h.resume)
		r.With(h.requireAdmin).Delete("/leases/{jobId}/schedule", h.forgetSchedule)
		r.Post("/leases/{jobId}/acquire", h.acquire)
		r.Post("/leases/{jobId}/heartbeat", h.heartbeat)
		r.Post("/leases/{jobId}/release", h.release)
		r.Get("/leases/{jobId}/runs", h.listRuns)
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
	if h.requestTimeout <= 0 {
		return fmt.Errorf("RequestTimeout must be positive, got %s", h.requestTimeout)
	}
	if h.missedGrace <= 0 || h.missedGrace%time.Millisecond != 0 || h.missedGrace > leaseapi.MaxGrace {
		return fmt.Errorf("MissedGrace must be a positive whole number of milliseconds up to 24h, got %s", h.missedGrace)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
