package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/leaseapi/leaseapi"
)

// The file `leasectl apply` reads and `leasectl export` writes: the
// operating rules of the jobs in the caller's scopes, declared in git.
//
//	groups:   [{name: reports, limit: 3}]
//	policies: [{job: "team-a:report", consecutiveFailures: 3, recoveryThreshold: 2}]
//	pauses:   [{job: "team-a:old", reason: "replaced by report-v2"}]
//	webhooks: [{name: oncall, url: {env: ONCALL_URL}, secret: {env: ONCALL_SECRET},
//	            events: [job.alerting, job.ok], scopes: ["team-a:"], format: standard}]

// declaration is a parsed file. Every key is known: anything else is an
// error naming its line.
type declaration struct {
	Groups   []declaredGroup   `yaml:"groups,omitempty"`
	Policies []declaredPolicy  `yaml:"policies,omitempty"`
	Pauses   []declaredPause   `yaml:"pauses,omitempty"`
	Webhooks []declaredWebhook `yaml:"webhooks,omitempty"`
}

// declaredGroup is a concurrency group and its limit.
type declaredGroup struct {
	Name  string `yaml:"name"`
	Limit int64  `yaml:"limit"`
}

// declaredPolicy is a job's alert policy, in the API's field names.
type declaredPolicy struct {
	Job                 string               `yaml:"job"`
	ConsecutiveFailures *int64               `yaml:"consecutiveFailures,omitempty"`
	FailureRate         *declaredFailureRate `yaml:"failureRate,omitempty"`
	MaxRuntimeMs        *int64               `yaml:"maxRuntimeMs,omitempty"`
	MinRuntimeMs        *int64               `yaml:"minRuntimeMs,omitempty"`
	MissedTicks         *int64               `yaml:"missedTicks,omitempty"`
	// RecoveryThreshold is 1 when not given, as the API's.
	RecoveryThreshold *int64 `yaml:"recoveryThreshold,omitempty"`
	RealertAfterMs    *int64 `yaml:"realertAfterMs,omitempty"`
}

type declaredFailureRate struct {
	Threshold float64 `yaml:"threshold"`
	Runs      int64   `yaml:"runs"`
}

// declaredPause is a job kept paused, with the reason it shows.
type declaredPause struct {
	Job    string `yaml:"job"`
	Reason string `yaml:"reason,omitempty"`
}

// declaredWebhook is a webhook, found again by its name. Its URL and
// secret are references to the environment (or, for a URL that is no
// secret, the value itself): the file never holds a secret.
type declaredWebhook struct {
	Name   string   `yaml:"name"`
	URL    valueRef `yaml:"url"`
	Secret valueRef `yaml:"secret"`
	Events []string `yaml:"events,flow"`
	Scopes []string `yaml:"scopes,flow"`
	// Format is "standard" when not given.
	Format string `yaml:"format,omitempty"`
}

// valueRef is a value given in the file ("https://…") or read from an
// environment variable ({env: NAME}).
type valueRef struct {
	Env   string
	Value string
}

func (v *valueRef) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag != "!!str" {
			return fmt.Errorf("line %d: want a string or {env: NAME}", n.Line)
		}
		v.Value = n.Value
		return nil
	case yaml.MappingNode:
		if len(n.Content) != 2 || n.Content[0].Value != "env" || n.Content[1].Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: want {env: NAME}, the environment variable that holds the value", n.Line)
		}
		v.Env = n.Content[1].Value
		if v.Env == "" {
			return fmt.Errorf("line %d: env: want the name of an environment variable", n.Line)
		}
		return nil
	}
	return fmt.Errorf("line %d: want a string or {env: NAME}", n.Line)
}

func (v valueRef) MarshalYAML() (any, error) {
	if v.Env != "" {
		n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		n.Content = []*yaml.Node{{Kind: yaml.ScalarNode, Value: "env"}, {Kind: yaml.ScalarNode, Value: v.Env}}
		return n, nil
	}
	return v.Value, nil
}

// resolve is the value, read from the environment for {env: NAME}.
func (v valueRef) resolve(lookup func(string) (string, bool)) (string, error) {
	if v.Env == "" {
		return v.Value, nil
	}
	s, ok := lookup(v.Env)
	if !ok || s == "" {
		return "", fmt.Errorf("environment variable %s is not set", v.Env)
	}
	return s, nil
}

// maxDeclarationBytes bounds the file apply reads.
const maxDeclarationBytes = 4 << 20

// parseDeclaration reads a file strictly: an unknown key, a value of the
// wrong type, a value the API would refuse or an item declared twice is
// an error that names its line. It resolves nothing from the environment.
func parseDeclaration(r io.Reader) (*declaration, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxDeclarationBytes+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxDeclarationBytes {
		return nil, fmt.Errorf("the file is over %d MiB", maxDeclarationBytes>>20)
	}
	var d declaration
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("want one YAML document, found more")
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, yamlError(err)
	}
	if err := d.validate(func(section string, i int) int { return itemLine(&root, section, i) }); err != nil {
		return nil, err
	}
	return &d, nil
}

// yamlError is a decoding error without the library's "yaml: " prefix,
// its lines indented as one message.
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	return errors.New(strings.ReplaceAll(msg, "\n  ", "; "))
}

// itemLine is the line of the i-th item of a top-level list, 0 if none.
func itemLine(root *yaml.Node, section string, i int) int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return 0
	}
	m := root.Content[0]
	for k := 0; k+1 < len(m.Content); k += 2 {
		if m.Content[k].Value == section && i < len(m.Content[k+1].Content) {
			return m.Content[k+1].Content[i].Line
		}
	}
	return 0
}

// validate checks every item as the API would, and that no group, job or
// webhook is declared twice; line names an item's line.
func (d *declaration) validate(line func(section string, i int) int) error {
	at := func(section string, i int, err error) error {
		return fmt.Errorf("line %d: %s[%d]: %w", line(section, i), section, i, err)
	}
	seen := map[string]int{}
	once := func(section string, i int, key string) error {
		k := section + "\x00" + key
		if j, ok := seen[k]; ok {
			return at(section, i, fmt.Errorf("%q is declared again (first at line %d)", key, line(section, j)))
		}
		seen[k] = i
		return nil
	}
	for i, g := range d.Groups {
		if err := leaseapi.ValidateGroupName("name", g.Name); err != nil {
			return at("groups", i, err)
		}
		if g.Limit < leaseapi.MinGroupLimit || g.Limit > leaseapi.MaxGroupLimit {
			return at("groups", i, fmt.Errorf("limit must be %d to %d", leaseapi.MinGroupLimit, leaseapi.MaxGroupLimit))
		}
		if err := once("groups", i, g.Name); err != nil {
			return err
		}
	}
	for i, p := range d.Policies {
		if err := leaseapi.ValidateJobID(p.Job); err != nil {
			return at("policies", i, fmt.Errorf("job: %w", err))
		}
		ap := p.alertPolicy()
		if err := ap.Validate(); err != nil {
			return at("policies", i, err)
		}
		if err := once("policies", i, p.Job); err != nil {
			return err
		}
	}
	for i, p := range d.Pauses {
		pp := leaseapi.PauseParams{JobID: p.Job, Reason: p.Reason}
		if err := pp.Validate(); err != nil {
			return at("pauses", i, err)
		}
		if err := once("pauses", i, p.Job); err != nil {
			return err
		}
	}
	for i := range d.Webhooks {
		w := &d.Webhooks[i]
		if w.Format == "" {
			w.Format = leaseapi.WebhookFormatStandard
		}
		switch {
		case !leaseapi.ValidWebhookName(w.Name):
			return at("webhooks", i, fmt.Errorf("name %s", leaseapi.WebhookNameRule))
		case w.URL == valueRef{}:
			return at("webhooks", i, errors.New("url must be given, as {env: NAME} or the URL itself"))
		case w.Secret == valueRef{}:
			return at("webhooks", i, errors.New("secret must be given, as {env: NAME}: the whsec_ secret deliveries are signed with"))
		case w.Secret.Env == "":
			return at("webhooks", i, errors.New("secret must be {env: NAME}: keep secrets out of the file"))
		case len(w.Events) == 0:
			return at("webhooks", i, fmt.Errorf("events must list some of %s", strings.Join(leaseapi.WebhookEvents, ", ")))
		case len(w.Scopes) == 0:
			return at("webhooks", i, errors.New("scopes must list the job id prefixes (or *) whose events it gets"))
		}
		// The rest as the server checks it (the URL and secret on apply).
		hook := leaseapi.Webhook{ID: "wh_000000000000", Name: w.Name, URL: "-", URLRedacted: "-", Secret: "-",
			Events: w.Events, Scopes: w.Scopes, Format: w.Format}
		if err := hook.Validate(); err != nil {
			return at("webhooks", i, err)
		}
		if err := once("webhooks", i, w.Name); err != nil {
			return err
		}
	}
	return nil
}

// alertPolicy is p as the domain checks it. A field given out of range
// (0 included: the domain reads 0 as absent) becomes -1, which Validate
// refuses with the field's rule.
func (p *declaredPolicy) alertPolicy() leaseapi.AlertPolicy {
	n := func(v *int64) int {
		switch {
		case v == nil:
			return 0
		case *v < 1 || *v > math.MaxInt32:
			return -1
		}
		return int(*v)
	}
	ms := func(v *int64) time.Duration {
		switch {
		case v == nil:
			return 0
		case *v < 1 || *v > math.MaxInt64/int64(time.Millisecond):
			return -1
		}
		return time.Duration(*v) * time.Millisecond
	}
	ap := leaseapi.AlertPolicy{ConsecutiveFailures: n(p.ConsecutiveFailures), MaxRuntime: ms(p.MaxRuntimeMs),
		MinRuntime: ms(p.MinRuntimeMs), MissedTicks: n(p.MissedTicks), RecoveryThreshold: n(p.RecoveryThreshold),
		RealertAfter: ms(p.RealertAfterMs)}
	if r := p.FailureRate; r != nil {
		runs := &r.Runs
		ap.FailureRate = &leaseapi.FailureRate{Threshold: r.Threshold, Runs: max(n(runs), 0)}
	}
	return ap
}

// envName is the environment variable export names for a webhook's
// field: ONCALL_URL for the url of webhook "oncall".
func envName(webhook, field string) string {
	up := strings.Map(func(r rune) rune {
		if r == '.' || r == '-' {
			return '_'
		}
		return r
	}, strings.ToUpper(webhook))
	return up + "_" + field
}

// writeDeclaration writes d as YAML, its lists sorted so that the same
// state is the same file.
func writeDeclaration(w io.Writer, d *declaration) error {
	slices.SortFunc(d.Groups, func(a, b declaredGroup) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(d.Policies, func(a, b declaredPolicy) int { return strings.Compare(a.Job, b.Job) })
	slices.SortFunc(d.Pauses, func(a, b declaredPause) int { return strings.Compare(a.Job, b.Job) })
	slices.SortFunc(d.Webhooks, func(a, b declaredWebhook) int { return strings.Compare(a.Name, b.Name) })
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(d); err != nil {
		return err
	}
	return enc.Close()
}
