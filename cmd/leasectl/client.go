package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/leaseapi/leaseapi/api/client"
)

// newClient returns the generated client for apiURL, sending token as the
// bearer token and trusting the CA certificates in caFile (if not empty).
// The URL and the file are checked here, so that a typo is exit 64 and not
// --wait worth of retries.
func newClient(apiURL, caFile, token string) (*client.ClientWithResponses, error) {
	u, err := url.Parse(apiURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--api %q: want an http or https URL such as %s", apiURL, defaultAPI)
	}
	if u.User != nil {
		// Credentials go in LEASEAPI_TOKEN; a URL is printed in errors.
		return nil, usagef("--api: want no user information in the URL; set LEASEAPI_TOKEN instead")
	}
	c, err := client.NewClientWithResponses(apiURL, client.WithBearerToken(token), client.WithCAFile(caFile))
	if err != nil {
		// Only WithCAFile can fail.
		return nil, usagef("--cacert: %w", err)
	}
	return c, nil
}

// stderrHandler prints the runner's warnings and errors as one line each on
// stderr, "leasectl: JOB: <message>: <error>", and drops the rest: a
// successful run is quiet.
type stderrHandler struct {
	w   io.Writer
	job string
	ttl time.Duration
}

func (h *stderrHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *stderrHandler) Handle(_ context.Context, r slog.Record) error {
	// The runner's giving up on the job function is not leasectl's, which
	// waits until COMMAND is gone; a failed release is told from the
	// report (Report.ReleaseErr), with what it means; a tick ahead of the
	// server's clock by the line that says why COMMAND did not start.
	if r.Message == "job abandoned: it did not return after cancellation" || r.Message == "release failed" ||
		r.Message == "tick skipped: this host's clock is fast; fix it (NTP)" {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leasectl: %s: %s", h.job, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			b.WriteString(": " + a.Value.String())
		}
		return true
	})
	b.WriteByte('\n')
	_, err := io.WriteString(h.w, b.String())
	return err
}

// WithAttrs drops the attributes: the line names the job already.
func (h *stderrHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *stderrHandler) WithGroup(string) slog.Handler { return h }
