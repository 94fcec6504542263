package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/jobs"
)

// `leasectl apply -f FILE` makes the groups, policies, pauses and webhooks
// within the caller's scopes what FILE declares; `leasectl export` writes
// the file of what there is (declare.go).

const applyUsage = `Usage:
  leasectl apply [flags] -f FILE   make the caller's groups, policies, pauses and webhooks what FILE declares (admin)
  leasectl export [flags]          write the YAML of what there is, for apply (admin: it lists webhooks)

apply reads what there is within the credential's scopes, prints the changes
('+' create, '~' change, '-' delete or resume) and makes them; a second apply
prints "no changes". Without --prune it only creates and changes; with
--prune it also deletes the groups, policies and webhooks FILE does not
declare and resumes the paused jobs it does not declare. Webhooks are found
by name; one whose URL, secret, events, scopes or format differ is replaced
(deleted, then created). --dry-run prints the changes and makes none.

Exit status: 0 done (or nothing to do); 1 a change failed (the ones before
it are made; apply again once fixed); 64 bad flags, a bad FILE (the line is
named) or a change leaseapi refused as invalid; 75 leaseapi unreachable or
unavailable; 77 token refused, role too weak or outside the scopes.
`

// applyCommand is `leasectl apply` and `leasectl export`; it returns the
// exit status.
func applyCommand(ctx context.Context, name string, args []string, env environment) int {
	err := applyOrExport(ctx, name, args, env)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintf(env.stderr, "leasectl %s: %v\n", name, err)
	return errorExit(err)
}

func applyOrExport(ctx context.Context, name string, args []string, env environment) error {
	fs := newFlagSet(name, env.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), applyUsage+"\nFlags:\n")
		fs.PrintDefaults()
	}
	apiURL, caFile := apiFlags(fs, env)
	var file string
	var dryRun, prune bool
	if name == "apply" {
		fs.StringVar(&file, "f", "", "the YAML file to apply (- for stdin; required)")
		fs.BoolVar(&dryRun, "dry-run", false, "print the changes and make none")
		fs.BoolVar(&prune, "prune", false, "also delete (or resume) what FILE no longer declares")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	lookup := env.lookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var want *declaration
	if name == "apply" {
		if file == "" {
			return usagef("-f FILE is required: the YAML file to apply")
		}
		var err error
		if want, err = readDeclaration(file, env); err != nil {
			return err
		}
	}
	c, err := newClient(*apiURL, *caFile, env.token)
	if err != nil {
		return err
	}
	if name == "export" {
		st, err := readState(ctx, c, nil, true)
		if err != nil {
			return err
		}
		for _, id := range st.unnamed {
			fmt.Fprintf(env.stderr, "leasectl export: webhook %s has no name and is left out; apply --prune would delete it\n", id)
		}
		return writeDeclaration(env.stdout, st.declaration())
	}
	st, err := readState(ctx, c, want, prune)
	if err != nil {
		return err
	}
	changes, err := diff(want, st, prune, lookup)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		_, err := fmt.Fprintln(env.stdout, "no changes")
		return err
	}
	for _, ch := range changes {
		fmt.Fprintln(env.stdout, ch.line)
	}
	if dryRun {
		_, err := fmt.Fprintf(env.stdout, "dry run: %d changes not made\n", len(changes))
		return err
	}
	for i, ch := range changes {
		if err := ch.apply(ctx, c); err != nil {
			return fmt.Errorf("%s: %w (%d of %d changes made)", strings.TrimSpace(ch.line[1:]), err, i, len(changes))
		}
	}
	_, err = fmt.Fprintf(env.stdout, "%d changes made\n", len(changes))
	return err
}

// readDeclaration parses the file at path (- for stdin); a bad file is a
// usage error naming it.
func readDeclaration(path string, env environment) (*declaration, error) {
	var r io.Reader = env.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, usagef("-f: %w", err)
		}
		defer f.Close()
		r = f
	} else if r == nil {
		r = os.Stdin
	}
	d, err := parseDeclaration(r)
	if err != nil {
		return nil, usagef("%s: %w", path, err)
	}
	return d, nil
}

// state is what there is within the caller's scopes.
type state struct {
	groups map[string]client.Group
	// leases are the jobs in scope, by id; paused those of them paused.
	leases map[string]client.Lease
	paused []string
	// policies are the jobs' policies read: the declared jobs', and with
	// all every job's.
	policies map[string]client.JobPolicy
	webhooks []client.Webhook
	// unnamed are the webhooks without a name, which no file declares.
	unnamed []string
}

// readState reads the groups, the leases, the webhooks and the policies
// of the jobs want declares, or of every job in scope with all (a GET per
// job, as many as the pages of the lease list hold).
func readState(ctx context.Context, c *client.ClientWithResponses, want *declaration, all bool) (*state, error) {
	st := &state{groups: map[string]client.Group{}, leases: map[string]client.Lease{}, policies: map[string]client.JobPolicy{}}
	groups, _, err := allPages(ctx, "groups", func(ctx context.Context, cursor *string) (*http.Response, error) {
		return c.ListGroups(ctx, &client.ListGroupsParams{Cursor: cursor})
	})
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	for _, raw := range groups {
		var g client.Group
		if err := json.Unmarshal(raw, &g); err != nil {
			return nil, fmt.Errorf("decode group: %w", err)
		}
		st.groups[g.Name] = g
	}
	leases, _, err := allPages(ctx, "leases", func(ctx context.Context, cursor *string) (*http.Response, error) {
		return c.ListLeases(ctx, &client.ListLeasesParams{Cursor: cursor})
	})
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	for _, raw := range leases {
		var l client.Lease
		if _, err := decodeTolerant(raw, &l); err != nil {
			return nil, fmt.Errorf("decode lease: %w", err)
		}
		st.leases[l.JobId] = l
		if l.Paused {
			st.paused = append(st.paused, l.JobId)
		}
	}
	var ids []string
	if all {
		ids = sortedKeys(st.leases)
	} else if want != nil {
		for _, p := range want.Policies {
			ids = append(ids, p.Job)
		}
	}
	for _, job := range ids {
		body, err := do(ctx, func(ctx context.Context) (*http.Response, error) { return c.GetPolicy(ctx, job) })
		if e, ok := errors.AsType[*jobs.APIError](err); ok && e.StatusCode == http.StatusNotFound {
			continue // no policy, or (a declared job) no lease yet: PUT says which
		}
		if err != nil {
			return nil, fmt.Errorf("read the policy of %s: %w", job, err)
		}
		var p client.JobPolicy
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("decode the policy of %s: %w", job, err)
		}
		st.policies[job] = p
	}
	body, err := do(ctx, func(ctx context.Context) (*http.Response, error) { return c.ListWebhooks(ctx) })
	var apiErr *jobs.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound && apiErr.Code == api.CodeNotFound:
		// A server that keeps no webhooks.
	case err != nil:
		return nil, fmt.Errorf("list webhooks: %w", err)
	default:
		var wl client.WebhookList
		if err := json.Unmarshal(body, &wl); err != nil {
			return nil, fmt.Errorf("decode webhooks: %w", err)
		}
		for _, w := range wl.Webhooks {
			if w.Name == nil {
				st.unnamed = append(st.unnamed, w.Id)
			}
			st.webhooks = append(st.webhooks, w)
		}
	}
	return st, nil
}

// declaration is st as a file: webhooks' URLs and secrets as references to
// environment variables named after them, since they cannot be read back.
func (st *state) declaration() *declaration {
	d := &declaration{}
	for _, g := range st.groups {
		d.Groups = append(d.Groups, declaredGroup{Name: g.Name, Limit: g.Limit})
	}
	for job, p := range st.policies {
		d.Policies = append(d.Policies, policyOf(job, p))
	}
	for _, job := range st.paused {
		d.Pauses = append(d.Pauses, declaredPause{Job: job, Reason: deref(st.leases[job].PausedReason)})
	}
	for _, w := range st.webhooks {
		if w.Name == nil {
			continue
		}
		d.Webhooks = append(d.Webhooks, declaredWebhook{Name: *w.Name,
			URL: valueRef{Env: envName(*w.Name, "URL")}, Secret: valueRef{Env: envName(*w.Name, "SECRET")},
			Events: eventsOf(w), Scopes: w.Scopes, Format: string(w.Format)})
	}
	return d
}

// policyOf is a job's policy as a file declares it.
func policyOf(job string, p client.JobPolicy) declaredPolicy {
	d := declaredPolicy{Job: job, ConsecutiveFailures: p.ConsecutiveFailures, MaxRuntimeMs: p.MaxRuntimeMs,
		MinRuntimeMs: p.MinRuntimeMs, MissedTicks: p.MissedTicks, RealertAfterMs: p.RealertAfterMs}
	if p.FailureRate != nil {
		d.FailureRate = &declaredFailureRate{Threshold: p.FailureRate.Threshold, Runs: p.FailureRate.Runs}
	}
	if p.RecoveryThreshold != 1 {
		d.RecoveryThreshold = &p.RecoveryThreshold
	}
	return d
}

func eventsOf(w client.Webhook) []string {
	out := make([]string, len(w.Events))
	for i, e := range w.Events {
		out[i] = string(e)
	}
	return out
}

// change is one line of the plan and the call that makes it.
type change struct {
	line  string
	apply func(context.Context, *client.ClientWithResponses) error
}

// diff is the plan that makes st what want declares: groups first (a
// job's group must exist), then policies, pauses and webhooks; with prune
// also the deletions and resumes of what want does not declare.
func diff(want *declaration, st *state, prune bool, lookup func(string) (string, bool)) ([]change, error) {
	var out []change
	add := func(line string, call func(ctx context.Context, c *client.ClientWithResponses) (*http.Response, error)) {
		out = append(out, change{line: line, apply: func(ctx context.Context, c *client.ClientWithResponses) error {
			_, err := do(ctx, func(ctx context.Context) (*http.Response, error) { return call(ctx, c) })
			return err
		}})
	}

	declared := map[string]bool{}
	for _, g := range want.Groups {
		declared[g.Name] = true
		body := client.PutGroupRequest{Limit: g.Limit}
		put := func(ctx context.Context, c *client.ClientWithResponses) (*http.Response, error) {
			return c.PutGroup(ctx, g.Name, body)
		}
		switch have, ok := st.groups[g.Name]; {
		case !ok:
			add(fmt.Sprintf("+ group %s: limit %d", g.Name, g.Limit), put)
		case have.Limit != g.Limit:
			add(fmt.Sprintf("~ group %s: limit %d -> %d", g.Name, have.Limit, g.Limit), put)
		}
	}
	if prune {
		for _, name := range sortedKeys(st.groups) {
			if !declared[name] {
				add("- group "+name, func(ctx context.Context, c *client.ClientWithResponses) (*http.Response, error) {
					return c.DeleteGroup(ctx, name)
				})
			}
		}
	}

	clear(declared)
	for _, p := range want.Policies {
		declared[p.Job] = true
		body := p.body()
		put := func(ctx context.Context, c *client.ClientWithResponses) (*http.Response, error) {
			return c.PutPolicy(ctx, p.Job, body)
		}
		have, ok := st.policies[p.Job]
		switch {
		case !ok:
			add(fmt.Sprintf("+ policy %s: %s", p.Job, p.describe()), put)
		default:
			if old := policyOf(p.Job, have); old.describe() != p.describe() {
				add(fmt.Sprintf("~ policy %s: %s -> %s", p.Job, old.describe(), p.describe()), put)
			}
		}
	}
	if prune {
		for _, job := range sortedKeys(st.policies) {
			if !declared[job] {
				add("- policy "+job, func(ctx context.Context, c *client.ClientWithResponses) (*http.Response, error) {
					return c.DeletePolicy(ctx, job)
				})
			}
		}
	}

	clear(declared)
	for _, p := range want.Pauses {
		declared[p.Job] = true
		pause := func(ctx context.Context, c *client.ClientWithResponses) (*http.Response, error) {
			var body client.PauseRequest
			if p.Reason != "" {
				body.Reason = &p.Reason
			}
			return c.PauseJob(ctx, p.Job, body)
		}
		l, ok := st.leases[p.Job]
		switch {
		case !ok || !l.Paused:
			add(fmt.Sprintf("+ pause %s: %q", p.Job, p.Reason), pause)
		case deref(l.PausedReason) != p.Reason:
			// Pausing a paused job changes nothing: resume, then pause.
			job := p.Job
			out = append(out, change{line: fmt.Sprintf("~ pause %s: %q -> %q", job, deref(l.PausedReason), p.Reason),
				apply: func(ctx context.Context, c *client.ClientWithResponses) error {
					if _, err := do(ctx, func(ctx context.Context) (*http.Response, error) {
						return c.ResumeJob(ctx, job, client.ResumeRequest{})
					}); err != nil {
						return err
					}
					_, err := do(ctx, func(ctx context.Context) (*http.Response, error) { return pause(ctx, c) })
					return err
				}})
		}
	}
	if prune {
		for _, job := range st.paused {
			if !declared[job] {
				add("- pause "+job+" (resume)", func(ctx context.Context, c *client.ClientWithResponses) (*http.Response, error) {
					return c.ResumeJob(ctx, job, client.ResumeRequest{})
				})
			}
		}
	}

	kept := map[string]bool{}
	var creates []change
	for _, w := range want.Webhooks {
		url, err := w.URL.resolve(lookup)
		if err != nil {
			return nil, usagef("webhook %s: url: %w", w.Name, err)
		}
		secret, err := w.Secret.resolve(lookup)
		if err != nil {
			return nil, usagef("webhook %s: secret: %w", w.Name, err)
		}
		digest := hmacHex(secret, url)
		have := matchWebhook(st.webhooks, w)
		create := change{line: fmt.Sprintf("+ webhook %s: %s to %s", w.Name, strings.Join(w.Events, ","), strings.Join(w.Scopes, ",")),
			apply: func(ctx context.Context, c *client.ClientWithResponses) error {
				body := client.CreateWebhookRequest{Url: url, Secret: &secret, Name: &w.Name, Scopes: w.Scopes,
					Format: (*client.WebhookFormat)(&w.Format)}
				for _, e := range w.Events {
					body.Events = append(body.Events, client.WebhookEventType(e))
				}
				_, err := do(ctx, func(ctx context.Context) (*http.Response, error) { return c.CreateWebhook(ctx, body) })
				return err
			}}
		if have == nil {
			creates = append(creates, create)
			continue
		}
		kept[have.Id] = true
		if why := webhookDiffers(*have, w, digest); why != "" {
			id := have.Id
			out = append(out, change{line: fmt.Sprintf("~ webhook %s: %s: replace %s", w.Name, why, id),
				apply: func(ctx context.Context, c *client.ClientWithResponses) error {
					if _, err := do(ctx, func(ctx context.Context) (*http.Response, error) { return c.DeleteWebhook(ctx, id) }); err != nil {
						return err
					}
					return create.apply(ctx, c)
				}})
		}
	}
	if prune {
		for _, w := range st.webhooks {
			if !kept[w.Id] {
				id, name := w.Id, w.Id
				if w.Name != nil {
					name = *w.Name + " (" + w.Id + ")"
				}
				add("- webhook "+name, func(ctx context.Context, c *client.ClientWithResponses) (*http.Response, error) {
					return c.DeleteWebhook(ctx, id)
				})
			}
		}
	}
	return append(out, creates...), nil
}

// matchWebhook is the webhook named as w, preferring one of w's scopes
// when several share the name (names are unique per scopes); nil if none.
func matchWebhook(hooks []client.Webhook, w declaredWebhook) *client.Webhook {
	var found *client.Webhook
	scopes := leaseapi.NormalizeScopes(w.Scopes)
	for i := range hooks {
		h := &hooks[i]
		if h.Name == nil || *h.Name != w.Name {
			continue
		}
		if slices.Equal(h.Scopes, scopes) {
			return h
		}
		if found == nil {
			found = h
		}
	}
	return found
}

// webhookDiffers says how the stored webhook differs from the declared
// one, "" when it does not.
func webhookDiffers(have client.Webhook, w declaredWebhook, digest string) string {
	var why []string
	if have.Digest == nil || *have.Digest != digest {
		why = append(why, "url or secret")
	}
	if !slices.Equal(slices.Sorted(slices.Values(eventsOf(have))), slices.Sorted(slices.Values(w.Events))) {
		why = append(why, fmt.Sprintf("events %s -> %s", strings.Join(eventsOf(have), ","), strings.Join(w.Events, ",")))
	}
	if scopes := leaseapi.NormalizeScopes(w.Scopes); !slices.Equal(have.Scopes, scopes) {
		why = append(why, fmt.Sprintf("scopes %s -> %s", strings.Join(have.Scopes, ","), strings.Join(scopes, ",")))
	}
	if string(have.Format) != w.Format {
		why = append(why, fmt.Sprintf("format %s -> %s", have.Format, w.Format))
	}
	return strings.Join(why, ", ")
}

// hmacHex is a webhook's digest: the hex HMAC-SHA256 of url keyed by
// secret (package webhook's Digest, which the server computes).
func hmacHex(secret, url string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(url))
	return hex.EncodeToString(m.Sum(nil))
}

// body is p as PUT /leases/{jobId}/policy takes it.
func (p *declaredPolicy) body() client.PolicyBody {
	b := client.PolicyBody{ConsecutiveFailures: p.ConsecutiveFailures, MaxRuntimeMs: p.MaxRuntimeMs,
		MinRuntimeMs: p.MinRuntimeMs, MissedTicks: p.MissedTicks, RecoveryThreshold: p.RecoveryThreshold,
		RealertAfterMs: p.RealertAfterMs}
	if r := p.FailureRate; r != nil {
		b.FailureRate = &client.FailureRate{Threshold: r.Threshold, Runs: r.Runs}
	}
	return b
}

// describe is p's conditions in one line, recoveryThreshold always (1 when
// not given), so that two policies that mean the same read the same.
func (p declaredPolicy) describe() string {
	var parts []string
	num := func(name string, v *int64) {
		if v != nil {
			parts = append(parts, fmt.Sprintf("%s %d", name, *v))
		}
	}
	num("consecutiveFailures", p.ConsecutiveFailures)
	if r := p.FailureRate; r != nil {
		parts = append(parts, fmt.Sprintf("failureRate %g of %d", r.Threshold, r.Runs))
	}
	num("maxRuntimeMs", p.MaxRuntimeMs)
	num("minRuntimeMs", p.MinRuntimeMs)
	num("missedTicks", p.MissedTicks)
	recovery := int64(1)
	if p.RecoveryThreshold != nil {
		recovery = *p.RecoveryThreshold
	}
	num("recoveryThreshold", &recovery)
	num("realertAfterMs", p.RealertAfterMs)
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
