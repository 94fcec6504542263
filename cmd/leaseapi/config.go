package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/webhook"
)

// envPrefix is the prefix of every setting: LEASEAPI_ADDR, LEASEAPI_MIN_TTL, ...
const envPrefix = "leaseapi"

// Config is leaseapi's whole configuration. It is read once from the
// environment by loadConfig and passed by value to the constructors; nothing
// else reads the environment.
//
// Every field has a desc tag for `leaseapi -h` and a default tag, except the
// ones whose default is empty on purpose (DATABASE_URL: the embedded store;
// API_TOKENS and ADMIN_TOKENS: an open API; METRICS_TOKEN: an open /metrics;
// TLS_CERT_FILE and TLS_KEY_FILE: plain HTTP; WEBHOOK_KEY: webhook secrets
// stored as given; PUBLIC_URL: no console link in slack messages). The configuration table of
// docs/operating.md is checked against these tags by TestDocsConfigTable.
type Config struct {
	Addr                string        `envconfig:"ADDR" default:":8080" desc:"TCP address to listen on"`
	DatabaseURL         string        `envconfig:"DATABASE_URL" desc:"Postgres DSN, e.g. postgres://user:pass@host:5432/db?sslmode=disable; empty = the embedded SQLite store"`
	SQLitePath          string        `envconfig:"SQLITE_PATH" default:"leaseapi.db" desc:"file of the embedded store, used when LEASEAPI_DATABASE_URL is empty; it serves one leaseapi instance"`
	DefaultTTL          time.Duration `envconfig:"DEFAULT_TTL" default:"30s" desc:"lease TTL of a request without ttlMs"`
	MinTTL              time.Duration `envconfig:"MIN_TTL" default:"1s" desc:"smallest ttlMs a request may ask for"`
	MaxTTL              time.Duration `envconfig:"MAX_TTL" default:"1h" desc:"largest ttlMs a request may ask for"`
	RequestTimeout      time.Duration `envconfig:"REQUEST_TIMEOUT" default:"1s" desc:"deadline of one request; past it the answer is 503 unavailable"`
	BatchTimeout        time.Duration `envconfig:"BATCH_TIMEOUT" default:"10s" desc:"deadline of a batch (POST /acquire, POST /heartbeat: up to 1,000 calls); the items not decided by then are answered 503 unavailable"`
	HistoryRetention    time.Duration `envconfig:"HISTORY_RETENTION" default:"168h" desc:"how long finished runs are kept"`
	PruneInterval       time.Duration `envconfig:"PRUNE_INTERVAL" default:"1m" desc:"how often finished runs older than the retention are deleted"`
	APITokens           []string      `envconfig:"API_TOKENS" desc:"comma-separated bearer tokens required on /leases; with no API or admin tokens the API is open"`
	AdminTokens         []string      `envconfig:"ADMIN_TOKENS" desc:"comma-separated bearer tokens of unscoped admin credentials: everything an API token may do, plus revoke, pause, resume, forget schedules and manage credentials"`
	LogLevel            string        `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error; info logs an access line for the unexpected answers (4xx other than 409, 5xx), debug one for every request"`
	LogFormat           string        `envconfig:"LOG_FORMAT" default:"json" desc:"json or text"`
	ShutdownTimeout     time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"10s" desc:"how long shutdown waits for requests in flight"`
	MaxInFlight         int           `envconfig:"MAX_IN_FLIGHT" default:"256" desc:"lease calls one instance runs at once; a call beyond the limit is answered 503 overloaded at once, without touching the database (load shedding)"`
	MissedGrace         time.Duration `envconfig:"MISSED_GRACE" default:"60s" desc:"grace of a schedule whose acquires send no graceMs: how long after a tick a replica may still start it before it counts as missed (capped at the schedule's shortest gap)"`
	TriggerGrace        time.Duration `envconfig:"TRIGGER_GRACE" default:"5m" desc:"how long a manual tick (POST /leases/{jobId}/trigger) stays claimable at least; the job's grace when that is longer"`
	MaxTickAhead        time.Duration `envconfig:"MAX_TICK_AHEAD" default:"5m" desc:"how far past the database clock a tick may lie; a later tick is refused 409 tick_ahead (1m to 24h)"`
	MissedSweep         time.Duration `envconfig:"MISSED_SWEEP" default:"10s" desc:"how often the fate of due ticks is decided (missed, skipped) and grants past their expiry are counted"`
	RateLimit           float64       `envconfig:"RATE_LIMIT" default:"0" desc:"calls per second per instance of a credential without a ratePerSecond of its own (heartbeats and releases are never limited); 0 = no limit"`
	TLSCertFile         string        `envconfig:"TLS_CERT_FILE" desc:"PEM file of the certificate (and chain) to serve HTTPS with, TLS 1.2 or later and HTTP/2; read again when it changes (a cert-manager renewal), without a restart; empty = plain HTTP"`
	TLSKeyFile          string        `envconfig:"TLS_KEY_FILE" desc:"PEM file of the private key of LEASEAPI_TLS_CERT_FILE; set both or neither"`
	Durability          string        `envconfig:"DURABILITY" default:"local" desc:"local or replicated (Postgres): replicated acknowledges a write only while the primary has a synchronous standby and synchronous_commit is on or remote_apply, else answers 503 unavailable; see docs/high-availability.md"`
	StartTimeout        time.Duration `envconfig:"START_TIMEOUT" default:"50s" desc:"how long a start keeps retrying a Postgres that is unreachable or read-only (a failover in progress) before it exits"`
	StatsInterval       time.Duration `envconfig:"STATS_INTERVAL" default:"15s" desc:"how often the gauges of /metrics (leases by state, paused and overdue jobs, and the per-job series) are computed"`
	MetricsToken        string        `envconfig:"METRICS_TOKEN" desc:"bearer token /metrics requires; empty = /metrics is open (it then carries no job id)"`
	JobMetrics          bool          `envconfig:"JOB_METRICS" default:"false" desc:"serve per-job and per-group series on /metrics (leaseapi_job_*, labels job_id and team; leaseapi_group_*, labels group and team); requires LEASEAPI_METRICS_TOKEN"`
	JobMetricsLimit     int           `envconfig:"JOB_METRICS_LIMIT" default:"10000" desc:"how many jobs, the first in job id order, have per-job series; leaseapi_job_metrics_truncated counts the others"`
	WebhookKey          string        `envconfig:"WEBHOOK_KEY" desc:"base64 of 32 random bytes (openssl rand -base64 32): webhook secrets and URLs are stored encrypted with it (AES-256-GCM); empty = stored as given, and leaseapi warns at start"`
	WebhookTimeout      time.Duration `envconfig:"WEBHOOK_TIMEOUT" default:"10s" desc:"how long one webhook delivery attempt may take, from dialling to the end of the answer (1s to 60s); an attempt without an answer by then is retried later, and its webhook holds at most one delivery slot across the instances until an attempt ends in time"`
	WebhookAllowPrivate bool          `envconfig:"WEBHOOK_ALLOW_PRIVATE" default:"false" desc:"let webhooks reach loopback, private, link-local and other non-public addresses (refused by default, at creation for an IP literal and whenever a delivery connects)"`
	Open                bool          `envconfig:"OPEN" default:"false" desc:"while no credential exists and no token is configured (the API is open), serve every peer; unset, an open API answers only loopback peers that name a loopback Host (localhost, *.localhost, 127.0.0.0/8, [::1]), and 403 to others"`
	PublicURL           string        `envconfig:"PUBLIC_URL" desc:"leaseapi's base URL as its users reach it (e.g. https://leaseapi.example.com), for the console link of slack webhook messages; empty = no link"`
}

// loadConfig reads the configuration from the environment and validates it.
// Both kinds of error are one line that names the variable.
func loadConfig() (Config, error) {
	var cfg Config
	if err := envconfig.Process(envPrefix, &cfg); err != nil {
		return Config{}, fmt.Errorf("invalid configuration: %w", parseError(err))
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, nil
}

// parseError rewrites envconfig's "envconfig.Process: assigning X to Field:
// converting 'v' to type T. details: ..." into "X: cannot parse "v": ...".
func parseError(err error) error {
	var pe *envconfig.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("%s: cannot parse %q as %s: %w", pe.KeyName, pe.Value, typeName(pe.TypeName), pe.Err)
}

func typeName(goType string) string {
	if goType == "time.Duration" {
		return "a duration (e.g. 30s, 5m, 1h)"
	}
	return goType
}

// Validate checks what envconfig cannot: values inside their range and the
// rules between settings. It reports every problem it finds, in one line.
func (c *Config) Validate() error {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}

	if c.Addr == "" {
		add("%s must not be empty", key("ADDR"))
	}
	if c.DatabaseURL == "" && c.SQLitePath == "" {
		add("%s must not be empty when %s is empty", key("SQLITE_PATH"), key("DATABASE_URL"))
	}
	durations := []struct {
		name string
		d    time.Duration
	}{
		{"DEFAULT_TTL", c.DefaultTTL},
		{"MIN_TTL", c.MinTTL},
		{"MAX_TTL", c.MaxTTL},
		{"REQUEST_TIMEOUT", c.RequestTimeout},
		{"BATCH_TIMEOUT", c.BatchTimeout},
		{"HISTORY_RETENTION", c.HistoryRetention},
		{"PRUNE_INTERVAL", c.PruneInterval},
		{"SHUTDOWN_TIMEOUT", c.ShutdownTimeout},
		{"MISSED_SWEEP", c.MissedSweep},
		{"MISSED_GRACE", c.MissedGrace},
		{"TRIGGER_GRACE", c.TriggerGrace},
		{"MAX_TICK_AHEAD", c.MaxTickAhead},
		{"START_TIMEOUT", c.StartTimeout},
		{"STATS_INTERVAL", c.StatsInterval},
	}
	positive := true
	for _, d := range durations {
		if d.d <= 0 {
			add("%s (%s) must be greater than zero", key(d.name), d.d)
			positive = false
		}
	}
	// The wire carries TTLs in whole milliseconds.
	for _, d := range durations[:3] {
		if d.d > 0 && d.d%time.Millisecond != 0 {
			add("%s (%s) must be a whole number of milliseconds", key(d.name), d.d)
		}
	}
	if positive {
		if c.MinTTL > c.DefaultTTL {
			add("%s (%s) must not exceed %s (%s)", key("MIN_TTL"), c.MinTTL, key("DEFAULT_TTL"), c.DefaultTTL)
		}
		if c.DefaultTTL > c.MaxTTL {
			add("%s (%s) must not exceed %s (%s)", key("DEFAULT_TTL"), c.DefaultTTL, key("MAX_TTL"), c.MaxTTL)
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		add("%s: %v", key("LOG_LEVEL"), err)
	}
	if f := strings.ToLower(c.LogFormat); f != "json" && f != "text" {
		add("%s (%q) must be json or text", key("LOG_FORMAT"), c.LogFormat)
	}
	if c.RateLimit < 0 || math.IsNaN(c.RateLimit) || math.IsInf(c.RateLimit, 0) {
		add("%s (%v) must be 0 (no limit) or a positive number of calls per second", key("RATE_LIMIT"), c.RateLimit)
	}
	if _, err := postgres.ParseDurability(c.Durability); err != nil {
		add("%s: %v", key("DURABILITY"), err)
	} else if c.Durability == string(postgres.DurabilityReplicated) && c.DatabaseURL == "" {
		add("%s=replicated needs Postgres (%s): the embedded store has no standby", key("DURABILITY"), key("DATABASE_URL"))
	}
	if c.MaxInFlight < 1 {
		add("%s (%d) must be at least 1", key("MAX_IN_FLIGHT"), c.MaxInFlight)
	}
	if c.MissedGrace > 0 && (c.MissedGrace%time.Millisecond != 0 || c.MissedGrace > leaseapi.MaxGrace) {
		add("%s (%s) must be a whole number of milliseconds up to 24h", key("MISSED_GRACE"), c.MissedGrace)
	}
	if c.TriggerGrace > 0 && (c.TriggerGrace%time.Millisecond != 0 || c.TriggerGrace > leaseapi.MaxGrace) {
		add("%s (%s) must be a whole number of milliseconds up to 24h", key("TRIGGER_GRACE"), c.TriggerGrace)
	}
	// Below a minute a nearestTick acquire, which picks up to a minute
	// ahead, could be refused its own pick.
	if c.WebhookTimeout < time.Second || c.WebhookTimeout > time.Minute {
		add("%s (%s) must be from 1s to 60s", key("WEBHOOK_TIMEOUT"), c.WebhookTimeout)
	}
	if c.MaxTickAhead > 0 && (c.MaxTickAhead < time.Minute || c.MaxTickAhead > 24*time.Hour) {
		add("%s (%s) must be from 1m to 24h", key("MAX_TICK_AHEAD"), c.MaxTickAhead)
	}
	// The files themselves are read when the server starts (newTLSConfig).
	switch {
	case c.TLSCertFile != "" && c.TLSKeyFile == "":
		add("%s must be set when %s is set", key("TLS_KEY_FILE"), key("TLS_CERT_FILE"))
	case c.TLSCertFile == "" && c.TLSKeyFile != "":
		add("%s must be set when %s is set", key("TLS_CERT_FILE"), key("TLS_KEY_FILE"))
	}
	// Job ids are data a credential's scopes protect: they are served only
	// behind a token.
	if c.JobMetrics && c.MetricsToken == "" {
		add("%s=true requires %s: per-job series carry job ids, which must not be served to anyone who can reach /metrics", key("JOB_METRICS"), key("METRICS_TOKEN"))
	}
	if c.JobMetricsLimit < 1 || c.JobMetricsLimit > leaseapi.MaxJobHealthLimit {
		add("%s (%d) must be from 1 to %d", key("JOB_METRICS_LIMIT"), c.JobMetricsLimit, leaseapi.MaxJobHealthLimit)
	}
	// The key is a secret: a problem never shows it.
	if _, err := webhook.NewSealer(c.WebhookKey); err != nil {
		add("%s must be the base64 of 32 random bytes (openssl rand -base64 32)", key("WEBHOOK_KEY"))
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.RawQuery != "" || u.Fragment != "" {
			add("%s (%q) must be an absolute http or https URL without query, such as https://leaseapi.example.com", key("PUBLIC_URL"), c.PublicURL)
		}
	}
	if strings.ContainsFunc(c.MetricsToken, func(r rune) bool { return r <= ' ' || r == 0x7F }) {
		add("%s contains a space or control character", key("METRICS_TOKEN"))
	}
	// Token values are secrets: a problem names the position, never the token.
	for _, list := range []struct {
		name   string
		tokens []string
	}{{"API_TOKENS", c.APITokens}, {"ADMIN_TOKENS", c.AdminTokens}} {
		for i, tok := range list.tokens {
			switch {
			case tok == "":
				add("%s: entry %d of %d is empty (stray comma?)", key(list.name), i+1, len(list.tokens))
			case strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7F }):
				add("%s: entry %d of %d contains a space or control character", key(list.name), i+1, len(list.tokens))
			}
		}
	}

	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// key is the environment variable of a setting.
func key(name string) string {
	return strings.ToUpper(envPrefix) + "_" + name
}

// parseLevel accepts the four level names of LOG_LEVEL, in any case.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%q must be debug, info, warn or error", s)
}

// usageFormat is envconfig's table without its TYPE column (the defaults
// show the formats) and its always-empty REQUIRED column.
const usageFormat = `{{range .}}{{usage_key .}}	{{usage_default .}}	{{usage_description .}}
{{end}}`

// writeSettings writes the table of settings (envconfig.Usagef) to w.
func writeSettings(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 1, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tDESCRIPTION")
	if err := envconfig.Usagef(envPrefix, &Config{}, tw, usageFormat); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	return tw.Flush()
}
