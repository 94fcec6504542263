package handlers

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leaseapi/leaseapi"
	leasemetrics "github.com/leaseapi/leaseapi/internal/metrics"
)

// metrics are the handler's Prometheus collectors.
type metrics struct {
	requests        *prometheus.CounterVec   // by route and status code
	requestDuration *prometheus.HistogramVec // by route
	acquires        *prometheus.CounterVec   // by result
	heartbeats      *prometheus.CounterVec
	releases        *prometheus.CounterVec
	storeDuration   *prometheus.HistogramVec // by operation
	tickStartDelay  prometheus.Histogram
	ticksLate       prometheus.Counter
	// groupFull counts the group_full refusals by group and team; nil
	// unless Options.GroupMetrics.
	groupFull *prometheus.CounterVec
}

// Results of lease operations, the values of the result label.
const (
	resultGranted   = "granted"
	resultRenewed   = "renewed"
	resultHeld      = "held"
	resultTickDone  = "tick_done"
	resultPaused    = "job_paused"
	resultAhead     = "tick_ahead"
	resultGroupFull = "group_full"
	resultTooSoon   = "too_soon"
	resultOK        = "ok"
	resultLost      = "lost"
	resultNotFound  = "not_found"
	resultError     = "error"
)

// newMetrics registers the collectors on reg, with the group_full counter
// when groupSeries is set. A collector that is already registered (a
// second handler on the same registry) is shared.
func newMetrics(reg *prometheus.Registry, groupSeries bool) *metrics {
	latency := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	m := &metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"})),
		requestDuration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leaseapi_http_request_duration_seconds",
			Help:    "HTTP request duration by route pattern.",
			Buckets: latency,
		}, []string{"route"})),
		acquires: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_acquire_total",
			Help: "Acquire results: granted, renewed, held, tick_done, job_paused, tick_ahead, group_full, too_soon or error.",
		}, []string{"result"})),
		heartbeats: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_heartbeat_total",
			Help: "Heartbeat results: ok, lost, not_found or error.",
		}, []string{"result"})),
		releases: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_release_total",
			Help: "Release results: ok, lost, not_found or error.",
		}, []string{"result"})),
		tickStartDelay: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leaseapi_tick_start_delay_seconds",
			Help:    "How long after its tick a grant for the tick was made (grant time minus tick).",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		})),
		ticksLate: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leaseapi_ticks_late_total",
			Help: "Grants made for a tick after its grace had passed (the tick may have been recorded missed; it still runs).",
		})),
		storeDuration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leaseapi_store_duration_seconds",
			Help:    "Store call duration (the database's latency) by operation, including calls the request stopped waiting for.",
			Buckets: latency,
		}, []string{"operation"})),
	}
	if groupSeries {
		m.groupFull = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_group_full_total",
			Help: "Acquires answered group_full (every slot of the job's concurrency group in use), by group and team.",
		}, []string{"group", "team"}))
	}
	return m
}

// countGroupFull counts err when it is a group_full refusal and the
// group series are on.
func (m *metrics) countGroupFull(err error) {
	if m.groupFull == nil {
		return
	}
	if full, ok := errors.AsType[*leaseapi.GroupFullError](err); ok {
		m.groupFull.WithLabelValues(full.Group.Name, leasemetrics.Team(full.Group.Name)).Inc()
	}
}

func register[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("handlers: register metric: " + err.Error())
	}
	return c
}

func (m *metrics) observeRequest(route string, status int, elapsed time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.requestDuration.WithLabelValues(route).Observe(elapsed.Seconds())
}

// metricsErrorLog adapts slog to promhttp.Logger.
type metricsErrorLog struct{ logger *slog.Logger }

func (l metricsErrorLog) Println(v ...any) {
	l.logger.Error("serve metrics", "error", fmt.Sprint(v...))
}

func (h *handler) metricsHandler() http.HandlerFunc {
	return promhttp.HandlerFor(h.registry, promhttp.HandlerOpts{
		ErrorLog:      metricsErrorLog{h.logger},
		ErrorHandling: promhttp.ContinueOnError,
	}).ServeHTTP
}
