package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// healthz reports that the process is alive and which version it runs; it
// never calls the store.
func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, api.Health{Status: "ok", Version: h.version})
}

// readyz reports whether the store answers and its schema is current,
// within RequestTimeout.
func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.requestTimeout)
	defer cancel()
	_, err := call(ctx, h.metrics, "ready", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, h.store.Ready(ctx)
	})
	if err != nil {
		// Not ready is an expected state (starting, database down), so it is a
		// 503 unavailable whatever the cause; the cause goes to the log.
		writeProblem(w, r, fmt.Errorf("readiness: %w: %w", err, leaseapi.ErrUnavailable))
		return
	}
	writeJSON(w, r, api.Status{Status: "ok"})
}

// openAPI serves the document this server implements.
func (h *handler) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(api.Spec)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(api.Spec)
}
