package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/jobs"
)

// requestTimeout bounds each request of the read commands.
const requestTimeout = 30 * time.Second

// readCommand is `leasectl ls|get|runs|revoke|pause|resume|repair`; it returns the
// exit status.
func readCommand(ctx context.Context, name string, args []string, env environment) int {
	err := read(ctx, name, args, env)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintf(env.stderr, "leasectl %s: %v\n", name, err)
	return errorExit(err)
}

func read(ctx context.Context, name string, args []string, env environment) error {
	fs := newFlagSet(name, env.stderr)
	apiURL, caFile := apiFlags(fs, env)
	output := fs.String("o", "", "output format: json prints the API's JSON (default a table)")
	var params client.ListLeasesParams
	var state, owner, prefix, reason string
	if name == "pause" {
		fs.StringVar(&reason, "reason", "", "why the job is paused (at most 256 characters), shown as pausedReason")
	}
	if name == "repair" {
		fs.StringVar(&reason, "reason", "", "why the job is repaired (at most 256 characters), written to the server's log")
	}
	if name == "ls" {
		fs.StringVar(&state, "state", "", "only leases in this state: held, released, expired or revoked")
		fs.StringVar(&owner, "owner", "", "only leases whose current or last holder is this owner")
		fs.StringVar(&prefix, "prefix", "", "only leases whose job id starts with this prefix")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *output != "" && *output != "json" {
		return usagef("-o %q: want json (or nothing for a table)", *output)
	}
	var job string
	if name == "ls" {
		if fs.NArg() > 0 {
			return usagef("unexpected arguments %q", fs.Args())
		}
		if state != "" {
			if !leaseapi.State(state).Valid() {
				return usagef("--state %q: want held, released, expired or revoked", state)
			}
			s := client.State(state)
			params.State = &s
		}
		if owner != "" {
			params.Owner = &owner
		}
		if prefix != "" {
			params.Prefix = &prefix
		}
	} else {
		if fs.NArg() != 1 {
			return usagef("want exactly one JOB, got %q", fs.Args())
		}
		job = fs.Arg(0)
		if !leaseapi.ValidJobID(job) {
			return usagef("invalid JOB %q: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", job)
		}
	}
	c, err := newClient(*apiURL, *caFile, env.token)
	if err != nil {
		return err
	}
	asJSON := *output == "json"
	switch name {
	case "ls":
		return listLeases(ctx, c, params, asJSON, env.stdout)
	case "get", "revoke", "pause", "resume", "repair":
		body, err := do(ctx, func(ctx context.Context) (*http.Response, error) {
			switch name {
			case "revoke":
				return c.RevokeLease(ctx, job)
			case "pause":
				var p client.PauseRequest
				if reason != "" {
					p.Reason = &reason
				}
				return c.PauseJob(ctx, job, p)
			case "resume":
				return c.ResumeJob(ctx, job, client.ResumeRequest{})
			case "repair":
				var p client.RepairRequest
				if reason != "" {
					p.Reason = &reason
				}
				return c.RepairJob(ctx, job, p)
			}
			return c.GetLease(ctx, job)
		})
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(env.stdout, body)
		}
		var l client.Lease
		bad, err := decodeTolerant(body, &l)
		if err != nil {
			return fmt.Errorf("decode lease: %w", err)
		}
		switch name {
		case "revoke":
			_, err := fmt.Fprintf(env.stdout, "lease %q %s (token %d)\n", l.JobId, l.State, l.Token)
			return err
		case "repair":
			_, err := fmt.Fprintf(env.stdout, "job %q repaired (lease %s, token %d, last completed tick %s)\n",
				l.JobId, l.State, l.Token, timeOrNone(l.LastCompletedTick, time.Now()))
			return err
		case "pause", "resume":
			what := "resumed"
			if l.Paused {
				what = "paused"
			}
			_, err := fmt.Fprintf(env.stdout, "job %q %s (lease %s, token %d)\n", l.JobId, what, l.State, l.Token)
			return err
		}
		return printLease(env.stdout, leaseView{l, bad}, time.Now())
	case "runs":
		body, err := do(ctx, func(ctx context.Context) (*http.Response, error) {
			return c.ListRuns(ctx, job, nil)
		})
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(env.stdout, body)
		}
		var rl struct {
			Runs []json.RawMessage `json:"runs"`
		}
		if err := json.Unmarshal(body, &rl); err != nil {
			return fmt.Errorf("decode runs: %w", err)
		}
		runs := make([]runView, len(rl.Runs))
		for i, raw := range rl.Runs {
			if runs[i].bad, err = decodeTolerant(raw, &runs[i].Run); err != nil {
				return fmt.Errorf("decode run: %w", err)
			}
		}
		return printRuns(env.stdout, runs, time.Now())
	}
	return usagef("unknown command %q", name)
}

// do sends one request with a timeout and returns the body of a 200 or
// 201 (or the empty one of a 204), or the error: a *jobs.APIError for any other
// status, leaseapi.ErrUnavailable when leaseapi did not answer.
func do(ctx context.Context, send func(context.Context) (*http.Response, error)) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := send(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", leaseapi.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: read the answer: %w", leaseapi.ErrUnavailable, err)
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusNoContent {
		return body, nil
	}
	e := &jobs.APIError{StatusCode: resp.StatusCode}
	var p client.Problem
	if json.Unmarshal(body, &p) == nil {
		e.Code, e.Detail = string(p.Code), p.Detail
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return nil, e
}

// allPages follows every page of a list route (fetch asks for the page
// after cursor, nil for the first) and returns the items under key, each
// as the API sent it, and the last page's serverTime (nil when it has
// none).
func allPages(ctx context.Context, key string, fetch func(ctx context.Context, cursor *string) (*http.Response, error)) ([]json.RawMessage, json.RawMessage, error) {
	items := []json.RawMessage{}
	var cursor *string
	for {
		body, err := do(ctx, func(ctx context.Context) (*http.Response, error) { return fetch(ctx, cursor) })
		if err != nil {
			return nil, nil, err
		}
		var p map[string]json.RawMessage
		var page []json.RawMessage
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, nil, fmt.Errorf("decode %s: %w", key, err)
		}
		if err := json.Unmarshal(p[key], &page); err != nil && p[key] != nil {
			return nil, nil, fmt.Errorf("decode %s: %w", key, err)
		}
		items = append(items, page...)
		cursor = nil
		if next := p["nextCursor"]; next != nil {
			if err := json.Unmarshal(next, &cursor); err != nil {
				return nil, nil, fmt.Errorf("decode %s: nextCursor: %w", key, err)
			}
		}
		if cursor == nil {
			return items, p["serverTime"], nil
		}
	}
}

// listLeases follows every page of GET /leases and prints the leases.
func listLeases(ctx context.Context, c *client.ClientWithResponses, params client.ListLeasesParams, asJSON bool, w io.Writer) error {
	// A page as the API sent it: each lease is kept as its JSON.
	type page struct {
		Leases     []json.RawMessage `json:"leases"`
		NextCursor *string           `json:"nextCursor"`
		ServerTime json.RawMessage   `json:"serverTime"`
	}
	var all page
	var err error
	all.Leases, all.ServerTime, err = allPages(ctx, "leases", func(ctx context.Context, cursor *string) (*http.Response, error) {
		params.Cursor = cursor
		return c.ListLeases(ctx, &params)
	})
	if err != nil {
		return err
	}
	if all.Leases == nil {
		all.Leases = []json.RawMessage{}
	}
	if asJSON {
		// All pages as one LeaseList: the leases as the API sent them, the
		// last page's serverTime, and no next page.
		b, err := json.Marshal(all)
		if err != nil {
			return err
		}
		return printJSON(w, b)
	}
	var serverTime time.Time
	if err := json.Unmarshal(all.ServerTime, &serverTime); err != nil {
		return fmt.Errorf("decode serverTime: %w", err)
	}
	leases := make([]leaseView, len(all.Leases))
	for i, raw := range all.Leases {
		var err error
		if leases[i].bad, err = decodeTolerant(raw, &leases[i].Lease); err != nil {
			return fmt.Errorf("decode lease: %w", err)
		}
	}
	return printLeases(w, leases, serverTime)
}

// printJSON prints the API's JSON, indented.
func printJSON(w io.Writer, body []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, body, "", "  "); err != nil {
		return fmt.Errorf("leaseapi answered invalid JSON: %w", err)
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// newTable is a kubectl-like table writer: columns two spaces apart.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0) }

// leaseView is a lease as decodeTolerant read it: the times it could not
// read are in bad, by JSON name.
type leaseView struct {
	client.Lease
	bad unreadable
}

// runView is a run as decodeTolerant read it.
type runView struct {
	client.Run
	bad unreadable
}

// printLeases prints leases as a table, times relative to now (the
// server's clock of the list).
func printLeases(w io.Writer, leases []leaseView, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "JOB\tSTATE\tOWNER\tTOKEN\tTICK\tEXPIRES\tLAST OUTCOME")
	for _, l := range leases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l.JobId, l.State, l.Owner, l.Token,
			l.bad.at("tick", l.Tick, now), l.bad.at("expiresAt", &l.ExpiresAt, now), outcomeOrNone(l.LastOutcome))
	}
	return tw.Flush()
}

// printLease prints one lease as "FIELD  value" lines.
func printLease(w io.Writer, v leaseView, now time.Time) error {
	l, bad := v.Lease, v.bad
	tw := newTable(w)
	fmt.Fprintf(tw, "JOB\t%s\n", l.JobId)
	fmt.Fprintf(tw, "STATE\t%s\n", l.State)
	fmt.Fprintf(tw, "OWNER\t%s\n", l.Owner)
	fmt.Fprintf(tw, "TOKEN\t%d\n", l.Token)
	fmt.Fprintf(tw, "TTL\t%s\n", time.Duration(l.TtlMs)*time.Millisecond)
	fmt.Fprintf(tw, "TICK\t%s\n", bad.at("tick", l.Tick, now))
	fmt.Fprintf(tw, "ACQUIRED\t%s\n", bad.at("acquiredAt", &l.AcquiredAt, now))
	fmt.Fprintf(tw, "RENEWED\t%s\n", bad.at("renewedAt", &l.RenewedAt, now))
	fmt.Fprintf(tw, "EXPIRES\t%s\n", bad.at("expiresAt", &l.ExpiresAt, now))
	fmt.Fprintf(tw, "RELEASED\t%s\n", bad.at("releasedAt", l.ReleasedAt, now))
	fmt.Fprintf(tw, "LAST OUTCOME\t%s\n", outcomeOrNone(l.LastOutcome))
	fmt.Fprintf(tw, "LAST COMPLETED TICK\t%s\n", bad.at("lastCompletedTick", l.LastCompletedTick, now))
	if l.Schedule != nil {
		fmt.Fprintf(tw, "SCHEDULE\t%s (grace %s)\n", *l.Schedule, time.Duration(*l.GraceMs)*time.Millisecond)
		fmt.Fprintf(tw, "NEXT TICK\t%s\n", bad.at("nextTick", l.NextTick, now))
	}
	fmt.Fprintf(tw, "MISSED TICKS\t%d\n", l.MissedTicks)
	fmt.Fprintf(tw, "SKIPPED TICKS\t%d\n", l.SkippedTicks)
	if l.Paused {
		fmt.Fprintf(tw, "PAUSED\t%s by %s: %s\n", bad.at("pausedAt", l.PausedAt, now), stringOrNone(l.PausedBy), stringOrNone(l.PausedReason))
	}
	if l.Alerting {
		fmt.Fprintf(tw, "ALERTING\t%s\n", alertReasons(l.AlertReasons))
	}
	return tw.Flush()
}

// printRuns prints runs as a table, newest first as the API lists them.
func printRuns(w io.Writer, runs []runView, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "TOKEN\tOWNER\tTICK\tSTARTED\tDURATION\tOUTCOME")
	for _, r := range runs {
		duration := "-"
		if r.DurationMs != nil {
			duration = (time.Duration(*r.DurationMs) * time.Millisecond).String()
		}
		token, owner := "-", "-" // a missed run has no holder
		if r.Token != nil {
			token = strconv.FormatInt(*r.Token, 10)
		}
		if r.Owner != nil {
			owner = *r.Owner
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", token, owner, r.bad.at("tick", r.Tick, now),
			r.bad.at("startedAt", r.StartedAt, now), duration, r.Outcome)
	}
	return tw.Flush()
}

func stringOrNone(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func outcomeOrNone(o *client.LeaseLastOutcome) string {
	if o == nil {
		return "-"
	}
	return string(*o)
}

func timeOrNone(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return when(*t, now)
}

// when is t as the API writes it, and relative to now: "2026-11-30T07:00:00.000Z (3m ago)".
func when(t, now time.Time) string {
	return api.FormatTime(t) + " (" + relative(t, now) + ")"
}

// relative is t relative to now in the largest fitting unit, as kubectl
// writes ages: "in 25s", "3m ago", "2h ago", "5d ago".
func relative(t, now time.Time) string {
	d := t.Sub(now)
	future := d > 0
	if !future {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		return "now"
	case d < 2*time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < 2*time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		s = fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}
