package handlers

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the handler's Prometheus collectors. The labelled ones are
// reached through a cache of their series.
type metrics struct {
	requests        *series[requestLabels, prometheus.Counter]
	requestDuration *series[string, prometheus.Observer] // by route
	acquires        *series[string, prometheus.Counter]  // by result
	heartbeats      *series[string, prometheus.Counter]
	releases        *series[string, prometheus.Counter]
	storeDuration   *series[string, prometheus.Observer] // by operation
	tickStartDelay  prometheus.Histogram
	ticksLate       prometheus.Counter
}

// requestLabels are the labels of leaseapi_http_requests_total.
type requestLabels struct {
	route  string
	status int
}

// series holds the series of one labelled collector by their labels, each
// made by with on first use (so /metrics shows only the series used, as
// with WithLabelValues). WithLabelValues hashes the label values and
// looks them up under a lock on every call; a request makes four such
// calls. There are few series (routes × statuses, operations, results),
// so the map is copied when one is added and read without a lock.
type series[K comparable, M any] struct {
	with func(K) M
	mu   sync.Mutex // held while adding
	m    atomic.Pointer[map[K]M]
}

func newSeries[K comparable, M any](with func(K) M) *series[K, M] {
	s := &series[K, M]{with: with}
	s.m.Store(&map[K]M{})
	return s
}

// get returns the series of labels k.
func (s *series[K, M]) get(k K) M {
	if m, ok := (*s.m.Load())[k]; ok {
		return m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.m.Load()
	if m, ok := old[k]; ok {
		return m
	}
	next := maps.Clone(old)
	next[k] = s.with(k)
	s.m.Store(&next)
	return next[k]
}

// byCounter and byObserver are the series of a vector with one label.
func byCounter(v *prometheus.CounterVec) *series[string, prometheus.Counter] {
	return newSeries(func(label string) prometheus.Counter { return v.WithLabelValues(label) })
}

func byObserver(v *prometheus.HistogramVec) *series[string, prometheus.Observer] {
	return newSeries(func(label string) prometheus.Observer { return v.WithLabelValues(label) })
}

// Results of lease operations, the values of the result label.
const (
	resultGranted  = "granted"
	resultRenewed  = "renewed"
	resultHeld     = "held"
	resultTickDone = "tick_done"
	resultPaused   = "job_paused"
	resultOK       = "ok"
	resultLost     = "lost"
	resultNotFound = "not_found"
	resultError    = "error"
)

// newMetrics registers the collectors on reg. A collector that is already
// registered (a second handler on the same registry) is shared.
func newMetrics(reg *prometheus.Registry) *metrics {
	latency := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	requests := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leaseapi_http_requests_total",
		Help: "HTTP requests by route pattern and status code.",
	}, []string{"route", "code"}))
	return &metrics{
		requests: newSeries(func(l requestLabels) prometheus.Counter {
			return requests.WithLabelValues(l.route, strconv.Itoa(l.status))
		}),
		requestDuration: byObserver(register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leaseapi_http_request_duration_seconds",
			Help:    "HTTP request duration by route pattern.",
			Buckets: latency,
		}, []string{"route"}))),
		acquires: byCounter(register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_acquire_total",
			Help: "Acquire results: granted, renewed, held, tick_done, job_paused or error.",
		}, []string{"result"}))),
		heartbeats: byCounter(register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_heartbeat_total",
			Help: "Heartbeat results: ok, lost, not_found or error.",
		}, []string{"result"}))),
		releases: byCounter(register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_release_total",
			Help: "Release results: ok, lost, not_found or error.",
		}, []string{"result"}))),
		tickStartDelay: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leaseapi_tick_start_delay_seconds",
			Help:    "How long after its tick a grant for the tick was made (grant time minus tick).",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		})),
		ticksLate: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leaseapi_ticks_late_total",
			Help: "Grants made for a tick after its grace had passed (the tick may have been recorded missed; it still runs).",
		})),
		storeDuration: byObserver(register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leaseapi_store_duration_seconds",
			Help:    "Store call duration (the database's latency) by operation, including calls the request stopped waiting for.",
			Buckets: latency,
		}, []string{"operation"}))),
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
	m.requests.get(requestLabels{route, status}).Inc()
	m.requestDuration.get(route).Observe(elapsed.Seconds())
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
