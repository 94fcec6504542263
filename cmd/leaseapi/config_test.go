package main

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// validConfig is the configuration of an unset environment.
func validConfig() Config {
	return Config{
		Addr:             ":8080",
		SQLitePath:       "leaseapi.db",
		DefaultTTL:       30 * time.Second,
		MinTTL:           time.Second,
		MaxTTL:           time.Hour,
		RequestTimeout:   time.Second,
		BatchTimeout:     10 * time.Second,
		HistoryRetention: 168 * time.Hour,
		PruneInterval:    time.Minute,
		LogLevel:         "info",
		LogFormat:        "json",
		ShutdownTimeout:  10 * time.Second,
		MaxInFlight:      256,
		MissedGrace:      time.Minute,
		TriggerGrace:     5 * time.Minute,
		MaxTickAhead:     5 * time.Minute,
		MissedSweep:      10 * time.Second,
		Durability:       "local",
		StartTimeout:     50 * time.Second,
		StatsInterval:    15 * time.Second,
		JobMetricsLimit:  10000,
		WebhookTimeout:   10 * time.Second,
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(c *Config)
		// want are substrings of the error; none means valid.
		want []string
	}{
		{name: "Defaults", modify: func(*Config) {}},
		{name: "UnknownDurability", modify: func(c *Config) { c.Durability = "quorum" },
			want: []string{"LEASEAPI_DURABILITY", `unknown durability "quorum"`}},
		{name: "ReplicatedWithoutPostgres", modify: func(c *Config) { c.Durability = "replicated" },
			want: []string{"LEASEAPI_DURABILITY=replicated needs Postgres"}},
		{name: "ReplicatedPostgres", modify: func(c *Config) {
			c.Durability = "replicated"
			c.DatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres"
		}},
		{name: "MaxTickAheadBelowAMinute", modify: func(c *Config) { c.MaxTickAhead = 59 * time.Second },
			want: []string{"LEASEAPI_MAX_TICK_AHEAD (59s) must be from 1m to 24h"}},
		{name: "MaxTickAheadAboveADay", modify: func(c *Config) { c.MaxTickAhead = 25 * time.Hour },
			want: []string{"LEASEAPI_MAX_TICK_AHEAD (25h0m0s) must be from 1m to 24h"}},
		{name: "MaxTickAheadZero", modify: func(c *Config) { c.MaxTickAhead = 0 },
			want: []string{"LEASEAPI_MAX_TICK_AHEAD (0s) must be greater than zero"}},
		{name: "MaxTickAheadEdges", modify: func(c *Config) { c.MaxTickAhead = time.Minute }},
		{name: "MaxTickAheadADay", modify: func(c *Config) { c.MaxTickAhead = 24 * time.Hour }},
		{name: "ZeroStartTimeout", modify: func(c *Config) { c.StartTimeout = 0 },
			want: []string{"LEASEAPI_START_TIMEOUT (0s) must be greater than zero"}},
		{name: "PostgresWithoutSQLitePath", modify: func(c *Config) {
			c.DatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres"
			c.SQLitePath = ""
		}},
		{name: "EqualTTLs", modify: func(c *Config) { c.MinTTL, c.DefaultTTL, c.MaxTTL = time.Second, time.Second, time.Second }},
		{name: "Tokens", modify: func(c *Config) { c.APITokens, c.AdminTokens = []string{"a", "b"}, []string{"c"} }},
		{name: "UpperCaseLevelAndFormat", modify: func(c *Config) { c.LogLevel, c.LogFormat = "WARN", "Text" }},
		{name: "JobMetricsWithToken", modify: func(c *Config) { c.JobMetrics, c.MetricsToken = true, "scrape" }},
		{
			name:   "JobMetricsWithoutToken",
			modify: func(c *Config) { c.JobMetrics = true },
			want:   []string{"LEASEAPI_JOB_METRICS=true requires LEASEAPI_METRICS_TOKEN"},
		},
		{
			name:   "JobMetricsLimitOutOfRange",
			modify: func(c *Config) { c.JobMetricsLimit = 0 },
			want:   []string{"LEASEAPI_JOB_METRICS_LIMIT (0) must be from 1 to 1000000"},
		},
		{name: "WebhookKey", modify: func(c *Config) { c.WebhookKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" }},
		{
			// The message never shows the key, which is a secret.
			name:   "WebhookKeyShort",
			modify: func(c *Config) { c.WebhookKey = "c2VjcmV0LWtleQ==" },
			want:   []string{"LEASEAPI_WEBHOOK_KEY must be the base64 of 32 random bytes (openssl rand -base64 32)"},
		},
		{
			name:   "WebhookKeyNotBase64",
			modify: func(c *Config) { c.WebhookKey = "not base64!" },
			want:   []string{"LEASEAPI_WEBHOOK_KEY must be the base64 of 32 random bytes"},
		},
		{name: "WebhookTimeoutEdges", modify: func(c *Config) { c.WebhookTimeout = time.Second }},
		{name: "WebhookTimeoutAMinute", modify: func(c *Config) { c.WebhookTimeout = time.Minute }},
		{
			name:   "WebhookTimeoutBelowASecond",
			modify: func(c *Config) { c.WebhookTimeout = 999 * time.Millisecond },
			want:   []string{"LEASEAPI_WEBHOOK_TIMEOUT (999ms) must be from 1s to 60s"},
		},
		{
			name:   "WebhookTimeoutAboveAMinute",
			modify: func(c *Config) { c.WebhookTimeout = 61 * time.Second },
			want:   []string{"LEASEAPI_WEBHOOK_TIMEOUT (1m1s) must be from 1s to 60s"},
		},
		{name: "PublicURL", modify: func(c *Config) { c.PublicURL = "https://leaseapi.example.com/base" }},
		{
			name:   "PublicURLRelative",
			modify: func(c *Config) { c.PublicURL = "leaseapi.example.com" },
			want:   []string{`LEASEAPI_PUBLIC_URL ("leaseapi.example.com") must be an absolute http or https URL`},
		},
		{
			name:   "MetricsTokenWithSpace",
			modify: func(c *Config) { c.MetricsToken = "a b" },
			want:   []string{"LEASEAPI_METRICS_TOKEN contains a space or control character"},
		},
		{
			name:   "MinAboveDefault",
			modify: func(c *Config) { c.MinTTL, c.DefaultTTL = 5*time.Second, time.Second },
			want:   []string{"LEASEAPI_MIN_TTL (5s) must not exceed LEASEAPI_DEFAULT_TTL (1s)"},
		},
		{
			name:   "DefaultAboveMax",
			modify: func(c *Config) { c.DefaultTTL, c.MaxTTL = 2*time.Hour, time.Hour },
			want:   []string{"LEASEAPI_DEFAULT_TTL (2h0m0s) must not exceed LEASEAPI_MAX_TTL (1h0m0s)"},
		},
		{
			name:   "ZeroDuration",
			modify: func(c *Config) { c.RequestTimeout = 0 },
			want:   []string{"LEASEAPI_REQUEST_TIMEOUT (0s) must be greater than zero"},
		},
		{
			name: "NegativeDurations",
			modify: func(c *Config) {
				c.HistoryRetention, c.PruneInterval, c.ShutdownTimeout = -time.Hour, -time.Second, -time.Second
			},
			want: []string{
				"LEASEAPI_HISTORY_RETENTION (-1h0m0s) must be greater than zero",
				"LEASEAPI_PRUNE_INTERVAL (-1s) must be greater than zero",
				"LEASEAPI_SHUTDOWN_TIMEOUT (-1s) must be greater than zero",
			},
		},
		{
			name:   "ZeroMinTTL",
			modify: func(c *Config) { c.MinTTL = 0 },
			want:   []string{"LEASEAPI_MIN_TTL (0s) must be greater than zero"},
		},
		{
			name:   "SubMillisecondTTL",
			modify: func(c *Config) { c.MinTTL = 1500 * time.Microsecond },
			want:   []string{"LEASEAPI_MIN_TTL (1.5ms) must be a whole number of milliseconds"},
		},
		{
			name:   "LogLevel",
			modify: func(c *Config) { c.LogLevel = "verbose" },
			want:   []string{`LEASEAPI_LOG_LEVEL: "verbose" must be debug, info, warn or error`},
		},
		{
			name:   "LogFormat",
			modify: func(c *Config) { c.LogFormat = "logfmt" },
			want:   []string{`LEASEAPI_LOG_FORMAT ("logfmt") must be json or text`},
		},
		{
			name:   "EmptyAPIToken",
			modify: func(c *Config) { c.APITokens = []string{"a", ""} },
			want:   []string{"LEASEAPI_API_TOKENS: entry 2 of 2 is empty"},
		},
		{
			name:   "AdminTokenWithSpace",
			modify: func(c *Config) { c.AdminTokens = []string{" secret"} },
			want:   []string{"LEASEAPI_ADMIN_TOKENS: entry 1 of 1 contains a space"},
		},
		{
			name:   "MaxInFlight",
			modify: func(c *Config) { c.MaxInFlight = 0 },
			want:   []string{"LEASEAPI_MAX_IN_FLIGHT (0) must be at least 1"},
		},
		{
			name:   "EmptyAddr",
			modify: func(c *Config) { c.Addr = "" },
			want:   []string{"LEASEAPI_ADDR must not be empty"},
		},
		{
			name:   "EmptySQLitePath",
			modify: func(c *Config) { c.SQLitePath = "" },
			want:   []string{"LEASEAPI_SQLITE_PATH must not be empty when LEASEAPI_DATABASE_URL is empty"},
		},
		{name: "TLS", modify: func(c *Config) { c.TLSCertFile, c.TLSKeyFile = "tls.crt", "tls.key" }},
		{
			name:   "TLSCertWithoutKey",
			modify: func(c *Config) { c.TLSCertFile = "tls.crt" },
			want:   []string{"LEASEAPI_TLS_KEY_FILE must be set when LEASEAPI_TLS_CERT_FILE is set"},
		},
		{
			name:   "TLSKeyWithoutCert",
			modify: func(c *Config) { c.TLSKeyFile = "tls.key" },
			want:   []string{"LEASEAPI_TLS_CERT_FILE must be set when LEASEAPI_TLS_KEY_FILE is set"},
		},
		{
			name: "EveryProblemInOneLine",
			modify: func(c *Config) {
				c.LogLevel, c.LogFormat, c.MaxTTL = "loud", "xml", time.Second
			},
			want: []string{"LEASEAPI_LOG_LEVEL", "LEASEAPI_LOG_FORMAT", "LEASEAPI_DEFAULT_TTL (30s) must not exceed LEASEAPI_MAX_TTL (1s)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := validConfig()
			tt.modify(&cfg)
			err := cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tt.want)
			}
			got := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("Validate() = %q, want it to contain %q", got, w)
				}
			}
			if strings.Contains(got, "\n") {
				t.Errorf("Validate() = %q, want one line", got)
			}
		})
	}
}

func TestValidateNeverPrintsTokens(t *testing.T) {
	t.Parallel()
	cfg := validConfig()
	cfg.APITokens = []string{"s3cr3t value", ""}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want an error")
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("Validate() = %q, leaks a token", err)
	}
}

// clearEnv unsets every LEASEAPI_ setting for the test, so that the
// environment the tests run in cannot change their result.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range settingKeys(t) {
		t.Setenv(k, "") // restores the old value after the test
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
}

// settingKeys are the variables of Config, from its envconfig tags.
func settingKeys(t *testing.T) []string {
	t.Helper()
	var keys []string
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		keys = append(keys, key(typ.Field(i).Tag.Get("envconfig")))
	}
	return keys
}

// Tests with t.Setenv cannot be parallel.

func TestLoadConfigDefaults(t *testing.T) {
	clearEnv(t)
	got, err := loadConfig()
	if err != nil {
		t.Fatalf("loadConfig() error = %v", err)
	}
	want := validConfig()
	// envconfig leaves unset lists nil.
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loadConfig() = %+v, want %+v", got, want)
	}
}

func TestLoadConfigFromEnv(t *testing.T) {
	clearEnv(t)
	env := map[string]string{
		"LEASEAPI_ADDR":                  "127.0.0.1:9999",
		"LEASEAPI_DATABASE_URL":          "postgres://postgres@127.0.0.1:5432/leases?sslmode=disable",
		"LEASEAPI_SQLITE_PATH":           "/var/lib/leaseapi/leases.db",
		"LEASEAPI_DEFAULT_TTL":           "45s",
		"LEASEAPI_MIN_TTL":               "500ms",
		"LEASEAPI_MAX_TTL":               "2h",
		"LEASEAPI_REQUEST_TIMEOUT":       "3s",
		"LEASEAPI_BATCH_TIMEOUT":         "20s",
		"LEASEAPI_HISTORY_RETENTION":     "24h",
		"LEASEAPI_PRUNE_INTERVAL":        "30s",
		"LEASEAPI_API_TOKENS":            "tok-a,tok-b",
		"LEASEAPI_ADMIN_TOKENS":          "adm",
		"LEASEAPI_LOG_LEVEL":             "debug",
		"LEASEAPI_LOG_FORMAT":            "text",
		"LEASEAPI_SHUTDOWN_TIMEOUT":      "20s",
		"LEASEAPI_MAX_IN_FLIGHT":         "64",
		"LEASEAPI_MISSED_GRACE":          "90s",
		"LEASEAPI_TRIGGER_GRACE":         "10m",
		"LEASEAPI_MAX_TICK_AHEAD":        "2h",
		"LEASEAPI_MISSED_SWEEP":          "5s",
		"LEASEAPI_RATE_LIMIT":            "2.5",
		"LEASEAPI_TLS_CERT_FILE":         "/etc/leaseapi/tls/tls.crt",
		"LEASEAPI_TLS_KEY_FILE":          "/etc/leaseapi/tls/tls.key",
		"LEASEAPI_DURABILITY":            "replicated",
		"LEASEAPI_START_TIMEOUT":         "2m",
		"LEASEAPI_STATS_INTERVAL":        "1s",
		"LEASEAPI_METRICS_TOKEN":         "scrape",
		"LEASEAPI_JOB_METRICS":           "true",
		"LEASEAPI_JOB_METRICS_LIMIT":     "500",
		"LEASEAPI_WEBHOOK_KEY":           "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"LEASEAPI_WEBHOOK_TIMEOUT":       "3s",
		"LEASEAPI_WEBHOOK_ALLOW_PRIVATE": "true",
		"LEASEAPI_OPEN":                  "true",
		"LEASEAPI_PUBLIC_URL":            "https://leaseapi.example.com",
	}
	keys := settingKeys(t)
	for k, v := range env {
		if !slices.Contains(keys, k) {
			t.Fatalf("%s is not a setting of Config", k)
		}
		t.Setenv(k, v)
	}
	if len(env) != len(keys) {
		t.Fatalf("the test sets %d variables, Config has %d: cover every setting", len(env), len(keys))
	}
	got, err := loadConfig()
	if err != nil {
		t.Fatalf("loadConfig() error = %v", err)
	}
	want := Config{
		Addr:                "127.0.0.1:9999",
		DatabaseURL:         "postgres://postgres@127.0.0.1:5432/leases?sslmode=disable",
		SQLitePath:          "/var/lib/leaseapi/leases.db",
		DefaultTTL:          45 * time.Second,
		MinTTL:              500 * time.Millisecond,
		MaxTTL:              2 * time.Hour,
		RequestTimeout:      3 * time.Second,
		BatchTimeout:        20 * time.Second,
		HistoryRetention:    24 * time.Hour,
		PruneInterval:       30 * time.Second,
		APITokens:           []string{"tok-a", "tok-b"},
		AdminTokens:         []string{"adm"},
		LogLevel:            "debug",
		LogFormat:           "text",
		ShutdownTimeout:     20 * time.Second,
		MaxInFlight:         64,
		MissedGrace:         90 * time.Second,
		TriggerGrace:        10 * time.Minute,
		MaxTickAhead:        2 * time.Hour,
		MissedSweep:         5 * time.Second,
		RateLimit:           2.5,
		TLSCertFile:         "/etc/leaseapi/tls/tls.crt",
		TLSKeyFile:          "/etc/leaseapi/tls/tls.key",
		Durability:          "replicated",
		StartTimeout:        2 * time.Minute,
		StatsInterval:       time.Second,
		MetricsToken:        "scrape",
		JobMetrics:          true,
		JobMetricsLimit:     500,
		WebhookKey:          "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		WebhookTimeout:      3 * time.Second,
		WebhookAllowPrivate: true,
		Open:                true,
		PublicURL:           "https://leaseapi.example.com",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loadConfig() = %+v, want %+v", got, want)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{
			name: "UnparsableDuration",
			env:  map[string]string{"LEASEAPI_MIN_TTL": "5 seconds"},
			want: `invalid configuration: LEASEAPI_MIN_TTL: cannot parse "5 seconds" as a duration`,
		},
		{
			name: "DurationWithoutUnit",
			env:  map[string]string{"LEASEAPI_DEFAULT_TTL": "30"},
			want: `LEASEAPI_DEFAULT_TTL: cannot parse "30" as a duration`,
		},
		{
			name: "SetButEmptyDuration",
			env:  map[string]string{"LEASEAPI_SHUTDOWN_TIMEOUT": ""},
			want: `LEASEAPI_SHUTDOWN_TIMEOUT: cannot parse "" as a duration`,
		},
		{
			name: "CrossField",
			env:  map[string]string{"LEASEAPI_MIN_TTL": "5s", "LEASEAPI_DEFAULT_TTL": "1s"},
			want: "invalid configuration: LEASEAPI_MIN_TTL (5s) must not exceed LEASEAPI_DEFAULT_TTL (1s)",
		},
		{
			name: "TrailingCommaInTokens",
			env:  map[string]string{"LEASEAPI_API_TOKENS": "a,b,"},
			want: "LEASEAPI_API_TOKENS: entry 3 of 3 is empty",
		},
		{
			name: "JobMetricsWithoutToken",
			env:  map[string]string{"LEASEAPI_JOB_METRICS": "true"},
			want: "invalid configuration: LEASEAPI_JOB_METRICS=true requires LEASEAPI_METRICS_TOKEN",
		},
		{
			name: "SetButEmptyLogLevel",
			env:  map[string]string{"LEASEAPI_LOG_LEVEL": ""},
			want: `LEASEAPI_LOG_LEVEL: "" must be debug, info, warn or error`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := loadConfig()
			if err == nil {
				t.Fatalf("loadConfig() = nil error, want %q", tt.want)
			}
			if got := err.Error(); !strings.Contains(got, tt.want) || strings.Contains(got, "\n") {
				t.Errorf("loadConfig() error = %q, want one line containing %q", got, tt.want)
			}
		})
	}
}

// TestConfigTags keeps `leaseapi -h` complete: every setting is described
// and has a default, except those whose empty default has a meaning.
func TestConfigTags(t *testing.T) {
	t.Parallel()
	emptyDefault := []string{"DATABASE_URL", "API_TOKENS", "ADMIN_TOKENS", "METRICS_TOKEN", "TLS_CERT_FILE", "TLS_KEY_FILE",
		"WEBHOOK_KEY", "PUBLIC_URL"}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := f.Tag.Get("envconfig")
		if name == "" {
			t.Errorf("field %s has no envconfig tag", f.Name)
			continue
		}
		if f.Tag.Get("desc") == "" {
			t.Errorf("%s has no desc tag", key(name))
		}
		_, hasDefault := f.Tag.Lookup("default")
		_, hasRequired := f.Tag.Lookup("required")
		if !hasDefault && !hasRequired && !slices.Contains(emptyDefault, name) {
			t.Errorf("%s has neither a default nor required tag", key(name))
		}
	}
}

// configTable is the configuration table of docs/operating.md, from
// Config's tags.
func configTable() []string {
	rows := []string{
		"| Variable | Default | Description |",
		"|---|---|---|",
	}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		def := "(empty)"
		if d := f.Tag.Get("default"); d != "" {
			def = "`" + d + "`"
		}
		rows = append(rows, fmt.Sprintf("| `%s` | %s | %s |", key(f.Tag.Get("envconfig")), def, f.Tag.Get("desc")))
	}
	return rows
}

// TestDocsConfigTable keeps the docs' one configuration table (the table
// under configTable's header, in whichever page it lives) equal to Config:
// same variables, defaults and descriptions, in the same order.
func TestDocsConfigTable(t *testing.T) {
	t.Parallel()
	want := configTable()
	var found []string
	for _, path := range docFiles(t) {
		var got []string
		inTable := false
		for line := range strings.Lines(readDoc(t, path)) {
			line = strings.TrimRight(line, "\n")
			switch {
			case line == want[0]:
				if inTable || got != nil {
					t.Errorf("%s has more than one configuration table", path)
				}
				inTable, got = true, []string{line}
			case inTable && strings.HasPrefix(line, "|"):
				got = append(got, line)
			default:
				inTable = false
			}
		}
		if got == nil {
			continue
		}
		found = append(found, path)
		if !slices.Equal(got, want) {
			t.Errorf("%s's configuration table differs from Config; it should read:\n\n%s", path, strings.Join(want, "\n"))
		}
	}
	if len(found) != 1 {
		t.Errorf("configuration tables in %v, want exactly one (docs/operating.md)", found)
	}
}

// TestValidateHidesTheWebhookKey: a bad key is named, never shown.
func TestValidateHidesTheWebhookKey(t *testing.T) {
	t.Parallel()
	cfg := validConfig()
	cfg.WebhookKey = "c2VjcmV0LWtleQ=="
	if err := cfg.Validate(); err == nil || strings.Contains(err.Error(), cfg.WebhookKey) {
		t.Errorf("Validate() = %v, want an error that does not show the key", err)
	}
}
