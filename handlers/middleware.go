package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// ctxKey is the type of this package's context keys; unexported, so no other
// package can collide with them.
type ctxKey int

const (
	stateKey ctxKey = iota
)

// discardLogger is used when a context carries no logger (only in tests that
// call writeProblem directly).
var discardLogger = slog.New(slog.DiscardHandler)

// requestState is what the middleware learns about one request and the
// handlers read back: its id, its logger, and its caller. requestID puts
// it into the context once; authorize fills in the caller instead of
// deriving a context of its own (every r.WithContext copies the whole
// request).
type requestState struct {
	base     *slog.Logger
	id       string
	idHeader [1]string // the X-Request-Id header's values
	once     sync.Once
	l        *slog.Logger // the logger with request_id, made on first use
	// principal is the caller, once authorize has authenticated it (and
	// not limited it); the access log line names its credential.
	principal *principal
	// writer is instrument's response writer.
	writer statusWriter
}

// logger returns the handler's logger with request_id, made on first use,
// since most requests log nothing.
func (s *requestState) logger() *slog.Logger {
	s.once.Do(func() { s.l = s.base.With("request_id", s.id) })
	return s.l
}

// stateFrom returns the request's state, or nil outside the middleware.
func stateFrom(ctx context.Context) *requestState {
	s, _ := ctx.Value(stateKey).(*requestState)
	return s
}

// loggerFrom returns the request's logger, which carries request_id.
func loggerFrom(ctx context.Context) *slog.Logger {
	if s := stateFrom(ctx); s != nil {
		return s.logger()
	}
	return discardLogger
}

// requestIDHeader carries the request id in both directions.
const requestIDHeader = "X-Request-Id"

// requestID takes the client's X-Request-Id when it is safe to log (1–128
// characters of the job id alphabet), else generates one, echoes it, and
// puts the request's state (with its logger) into the context.
func (h *handler) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(requestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		st := &requestState{base: h.logger, id: id}
		st.idHeader[0] = id
		w.Header()[requestIDHeader] = st.idHeader[:] // as Header.Set, without allocating
		ctx := context.WithValue(r.Context(), stateKey, st)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func validRequestID(id string) bool {
	return id != "" && leaseapi.ValidPrefix(id)
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// instrument writes the access log line and the HTTP metrics of every
// request, labelled by route pattern (never by raw path, whose values are
// unbounded). The expected answers (2xx, 3xx and the 409 conflicts that
// every losing replica of a tick gets) are logged at debug level, the
// others at info: at a tick herd one line per request would be most of the
// service's CPU and log volume, and the metrics count every request anyway.
func (h *handler) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var ww *statusWriter
		if st := stateFrom(r.Context()); st != nil {
			ww = &st.writer // no allocation of its own
		} else {
			ww = new(statusWriter)
		}
		ww.ResponseWriter = w
		next.ServeHTTP(ww, r)
		elapsed := time.Since(start)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK // the handler wrote nothing at all
		}
		route := routePattern(r)
		h.metrics.observeRequest(route, status, elapsed)
		level := slog.LevelInfo
		if status < http.StatusBadRequest || status == http.StatusConflict {
			level = slog.LevelDebug
		}
		if !h.logger.Enabled(r.Context(), level) {
			return // before loggerFrom, which would make the request's logger
		}
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			slog.Int("bytes", ww.BytesWritten()),
		}
		if s := stateFrom(r.Context()); s != nil && s.principal != nil && s.principal.name != "" {
			attrs = append(attrs, slog.String("credential", s.principal.audit())) // its name, never its token
		}
		loggerFrom(r.Context()).LogAttrs(r.Context(), level, "request", attrs...)
	})
}

// routePattern is the chi pattern the request matched, or "unmatched".
func routePattern(r *http.Request) string {
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		if p := rctx.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// recoverer turns a panic into a logged 500 internal problem, so one bad
// request never takes the process down.
func (h *handler) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww, ok := w.(*statusWriter) // instrument's, in the server's chain
		if !ok {
			ww = &statusWriter{ResponseWriter: w}
		}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
				panic(p) // the server aborts the response on purpose
			}
			loggerFrom(r.Context()).Error("panic", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if ww.Status() == 0 {
				writeProblem(ww, r, fmt.Errorf("panic: %v", p))
			}
		}()
		next.ServeHTTP(ww, r)
	})
}

// statusWriter records the status and the size of an answer, for the
// access log, the metrics and recoverer. Like chi's WrapResponseWriter,
// which it replaces, it drops a second WriteHeader (other than an
// informational 1xx), writes 200 on a Write without one, passes ReadFrom
// (sendfile) and Flush through, and reaches the rest of the server's
// writer (Hijack, deadlines) through Unwrap, for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status      int
	bytes       int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	var n int64
	var err error
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
	}
	w.bytes += int(n)
	return n, err
}

// FlushError is Flush for http.ResponseController, with the server
// writer's error (http.ErrNotSupported when it cannot flush).
func (w *statusWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Flush() { _ = w.FlushError() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Status is the status written, or 0 when nothing was.
func (w *statusWriter) Status() int { return w.status }

// BytesWritten is the size of the body written.
func (w *statusWriter) BytesWritten() int { return w.bytes }

// timeout bounds the request by RequestTimeout, a batch by BatchTimeout;
// store calls return by then.
func (h *handler) timeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := h.requestTimeout
		if h.perms[r.Method+" "+routePattern(r)].batch {
			d = h.batchTimeout
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// closeChunked closes the connection after answering a request whose body
// came with a Transfer-Encoding. net/http drops a Content-Length sent along
// with it, so the handlers cannot tell whether both were sent; RFC 9112
// §6.1 then requires closing the connection, because a proxy in front that
// framed the request by its Content-Length would disagree about where the
// next request starts (request smuggling). Clients of this API send
// Content-Length; the rare chunked one only loses keep-alive.
func closeChunked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, &requestError{
		status: http.StatusNotFound, code: api.CodeNotFound,
		detail: "no such path; see /openapi.yaml for the routes",
	})
}

// methodNotAllowed answers 405 with the Allow header. chi does not pass the
// allowed methods to a custom handler, so they are found by matching the
// path against the router with each method.
func (h *handler) methodNotAllowed(routes chi.Routes) http.HandlerFunc {
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions}
	return func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		var allowed []string
		for _, m := range methods {
			if routes.Match(chi.NewRouteContext(), m, path) {
				allowed = append(allowed, m)
			}
		}
		// chi also lands here for a method it does not know (BREW), on any
		// path; a path no method serves is not found.
		if len(allowed) == 0 {
			h.notFound(w, r)
			return
		}
		writeProblem(w, r, &requestError{
			status: http.StatusMethodNotAllowed, code: api.CodeMethodNotAllowed,
			detail: fmt.Sprintf("method %s is not allowed here; use %s", r.Method, strings.Join(allowed, ", ")),
			header: http.Header{"Allow": {strings.Join(allowed, ", ")}},
		})
	}
}
