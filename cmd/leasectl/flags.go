package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/jobs"
	"github.com/leaseapi/leaseapi/schedule"
)

const defaultAPI = "http://localhost:8080"

// runConfig is a validated `leasectl run` command line.
type runConfig struct {
	apiURL string
	caFile string // empty: the system's roots only
	job    string
	// schedule is the parsed --schedule, nil without one; spec is its text
	// and sent the spec as the acquire sends it, with the host's zone named
	// unless the spec names one.
	schedule *schedule.Schedule
	spec     string
	sent     string
	// tick is the --tick, or zero: with a schedule the tick is computed at
	// acquire time (tickAt).
	tick  time.Time
	grace time.Duration // zero: not sent, the server's default applies
	// catchUp: register catch-up latest with the schedule, with the window
	// catchUpWindow (zero: the server's default).
	catchUp       bool
	catchUpWindow time.Duration
	// owed: the tick is the one the job owes (POST /owed), asked for at
	// start; nothing owed is a quiet skip.
	owed bool
	// group is the --group, nil without one: the job's concurrency group
	// ("" takes the job out of its group).
	group *string
	// minInterval is the --min-interval (zero: none sent).
	minInterval time.Duration
	ttl         time.Duration
	owner       string

	maxRunTime time.Duration // zero: no limit
	killGrace  time.Duration
	wait       time.Duration
	skipped    int
	command    []string
}

// tickAt is the tick the run acquires when started at now: with a schedule
// the newest tick at or before now, else the --tick (zero for none).
func (c runConfig) tickAt(now time.Time) time.Time {
	if c.schedule != nil {
		return c.schedule.Latest(now)
	}
	return c.tick
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("leasectl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// apiFlags adds --api, whose default is LEASEAPI_URL or
// http://localhost:8080, and --cacert, whose default is LEASEAPI_CA_FILE.
func apiFlags(fs *flag.FlagSet, env environment) (apiURL, caFile *string) {
	def := env.apiURL
	if def == "" {
		def = defaultAPI
	}
	apiURL = fs.String("api", def, "base URL of leaseapi (default $LEASEAPI_URL or "+defaultAPI+")")
	caFile = fs.String("cacert", env.caFile, "PEM file of CA certificates to trust for an https --api, besides the system's (default $LEASEAPI_CA_FILE)")
	return apiURL, caFile
}

// parseRun parses the arguments of `leasectl run`. A usageError is exit 64;
// flag.ErrHelp means -h was asked for and the usage printed.
func parseRun(args []string, env environment, hostname string, pid int) (runConfig, error) {
	fs := newFlagSet("run", env.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: leasectl run [flags] JOB -- COMMAND [ARG...]

Runs COMMAND under the lease of JOB: acquires it, runs COMMAND in its own
process group with LEASE_JOB, LEASE_TOKEN, LEASE_TICK and LEASE_OWNER (and
in a concurrency group LEASE_SLOT and LEASE_SLOT_TOKEN) in its environment,
heartbeats every TTL/3 while COMMAND lives, and releases the lease
succeeded when COMMAND exits 0, else failed. On a lost lease, at
--max-run-time, or on SIGTERM/SIGINT, COMMAND's process group gets SIGTERM,
then SIGKILL after --kill-grace. COMMAND does not inherit LEASEAPI_TOKEN.

With --owed, the tick is the one JOB owes, if any (a catch-up tick after
an outage, or an operator's 'leasectl trigger'): one more crontab line,
every minute, claims it on whichever host asks first:
  * * * * *  leasectl run --owed JOB -- COMMAND [ARG...]

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\n"+exitTable)
	}
	apiURL, caFile := apiFlags(fs, env)
	spec := fs.String("schedule", "", "cron spec: acquire its newest tick at or before now (host's zone unless the spec names one with CRON_TZ=)")
	tick := fs.String("tick", "", "acquire this tick (RFC 3339); without --schedule and --tick the lease is a plain mutex")
	owed := fs.Bool("owed", false, "claim the tick JOB owes (a catch-up tick or a trigger's), if any, instead of a tick of its own; nothing owed exits --skipped-exit-code quietly")
	grace := fs.Duration("grace", 0, "with --schedule: how long after a tick a host may still start it (default the server's)")
	var group optionalString
	fs.Var(&group, "group", "put JOB in this concurrency group (leasectl groups put NAME --limit K); a full group is retried after its Retry-After while the tick is within its grace, then not won; '' takes JOB out of its group (default: JOB stays in its group)")
	minInterval := fs.Duration("min-interval", 0, "refuse the lease sooner than this after JOB's previous run started, by leaseapi's clock (1ms to 744h): a host that starts late skips the run another host just did, not won with too_soon (default none)")
	catchUp := fs.Duration("catch-up", 0, "with --schedule: after an outage JOB owes its latest missed tick once, while it is at most this old (1m to 168h), for a 'run --owed' line to claim (default off; a policy registered before stays)")
	ttl := fs.Duration("ttl", jobs.DefaultTTL, "lease TTL; heartbeats every TTL/3")
	owner := fs.String("owner", fmt.Sprintf("%s/%d", hostname, pid), "owner of the lease; every invocation is its own by default")
	maxRunTime := fs.Duration("max-run-time", 0, "stop COMMAND after it ran this long (default no limit)")
	killGrace := fs.Duration("kill-grace", 0, "time between SIGTERM and SIGKILL when stopping COMMAND (default min(10s, TTL/2), at most TTL)")
	wait := fs.Duration("wait", 10*time.Second, "how long to retry while leaseapi is unreachable or unavailable")
	skippedCode := fs.Int("skipped-exit-code", 0, "exit status when the lease is not won (lease_held, tick_done, too_soon, job_paused, group_full)")
	if err := parseFlags(fs, args); err != nil {
		return runConfig{}, err
	}
	c := runConfig{
		apiURL: *apiURL, caFile: *caFile, spec: *spec, grace: *grace, owed: *owed, ttl: *ttl, owner: *owner,
		catchUp: *catchUp != 0, catchUpWindow: *catchUp, minInterval: *minInterval,
		maxRunTime: *maxRunTime, killGrace: *killGrace, wait: *wait, skipped: *skippedCode,
	}
	rest := fs.Args()
	switch {
	case len(rest) == 0:
		return runConfig{}, usagef("missing JOB: want leasectl run [flags] JOB -- COMMAND [ARG...]")
	case len(rest) < 3 || rest[1] != "--":
		return runConfig{}, usagef("want JOB -- COMMAND [ARG...] after the flags, got %q", rest)
	}
	c.job, c.command = rest[0], rest[2:]
	if group.set {
		if group.value != "" && !leaseapi.ValidJobID(group.value) {
			return runConfig{}, usagef("--group %q: want a group name, ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$, or '' to leave the group", group.value)
		}
		c.group = &group.value
	}
	if !leaseapi.ValidJobID(c.job) {
		return runConfig{}, usagef("invalid JOB %q: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", c.job)
	}
	if !leaseapi.ValidOwner(c.owner) {
		return runConfig{}, usagef("--owner %q: want 1-128 printable ASCII characters without spaces", c.owner)
	}
	if c.ttl < time.Millisecond || c.ttl%time.Millisecond != 0 {
		return runConfig{}, usagef("--ttl %s: want a positive whole number of milliseconds", c.ttl)
	}
	if *spec != "" && *tick != "" {
		return runConfig{}, usagef("--schedule and --tick exclude each other")
	}
	if *owed && *tick != "" {
		return runConfig{}, usagef("--owed and --tick exclude each other: --owed takes the tick leaseapi says JOB owes")
	}
	if *spec != "" {
		// The fields of a crontab line are read in the host's zone, as cron
		// reads them; leaseapi reads a spec without a zone in UTC, so the
		// acquire names the zone.
		host, err := schedule.HostZone()
		if err != nil {
			return runConfig{}, usagef("--schedule: %w", err)
		}
		s, err := schedule.ParseIn(*spec, host)
		if err != nil {
			return runConfig{}, usagef("--schedule %q: %w", *spec, err)
		}
		if c.sent, err = schedule.InZone(*spec, host); err != nil {
			return runConfig{}, usagef("--schedule %q: %w", *spec, err)
		}
		c.schedule = s
	}
	if *tick != "" {
		t, err := time.Parse(time.RFC3339Nano, *tick)
		if err != nil || !leaseapi.ValidTick(t) {
			return runConfig{}, usagef("--tick %q: want RFC 3339 such as 2026-11-30T07:00:00Z", *tick)
		}
		if t2, _ := api.ParseTime(*tick); !t2.Equal(t) {
			return runConfig{}, usagef("--tick %q: want whole milliseconds", *tick)
		}
		c.tick = t.UTC()
	}
	if err := c.validateDurations(); err != nil {
		return runConfig{}, err
	}
	if c.skipped < 0 || c.skipped > 255 {
		return runConfig{}, usagef("--skipped-exit-code %d: want 0-255", c.skipped)
	}
	return c, nil
}

// validateDurations checks --grace, --catch-up, --min-interval,
// --max-run-time, --kill-grace and --wait and fills in the default of
// --kill-grace.
func (c *runConfig) validateDurations() error {
	if c.grace != 0 {
		if c.schedule == nil {
			return usagef("--grace needs --schedule")
		}
		if c.grace < time.Millisecond || c.grace > leaseapi.MaxGrace || c.grace%time.Millisecond != 0 {
			return usagef("--grace %s: want whole milliseconds from 1ms to %s", c.grace, leaseapi.MaxGrace)
		}
	}
	if c.catchUp {
		if c.schedule == nil {
			return usagef("--catch-up needs --schedule")
		}
		if err := leaseapi.ValidateCatchUp(leaseapi.CatchUpLatest, c.catchUpWindow); err != nil {
			return usagef("--catch-up %s: want a window from %s to %s", c.catchUpWindow, leaseapi.MinCatchUpWindow, leaseapi.MaxCatchUpWindow)
		}
	}
	if c.minInterval != 0 && !leaseapi.ValidMinInterval(c.minInterval) {
		return usagef("--min-interval %s: want whole milliseconds from 1ms to %s", c.minInterval, leaseapi.MaxMinInterval)
	}
	if c.maxRunTime < 0 {
		return usagef("--max-run-time %s: want a positive duration (0: no limit)", c.maxRunTime)
	}
	switch {
	case c.killGrace == 0:
		c.killGrace = min(10*time.Second, c.ttl/2)
	case c.killGrace < 0:
		return usagef("--kill-grace %s: want a positive duration", c.killGrace)
	case c.killGrace > c.ttl:
		// SIGKILL must come while the lease can still be ours: a COMMAND
		// that outlives the TTL may overlap with the next holder's.
		return usagef("--kill-grace %s: want at most the TTL (%s)", c.killGrace, c.ttl)
	}
	if c.wait <= 0 {
		return usagef("--wait %s: want a positive duration", c.wait)
	}
	return nil
}

// childEnv is COMMAND's environment: leasectl's, less the bearer token
// (COMMAND needs the lease, not the credential), plus the lease: in a
// concurrency group also its slot and slot token (empty outside one).
func childEnv(environ []string, job, owner string, token int64, tick time.Time, slot int, slotToken int64) []string {
	env := make([]string, 0, len(environ)+6)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "LEASEAPI_TOKEN", "LEASE_JOB", "LEASE_TOKEN", "LEASE_TICK", "LEASE_OWNER", "LEASE_SLOT", "LEASE_SLOT_TOKEN":
			continue
		}
		env = append(env, kv)
	}
	tickText := ""
	if !tick.IsZero() {
		tickText = api.FormatTime(tick)
	}
	slotText, slotTokenText := "", ""
	if slotToken != 0 {
		slotText, slotTokenText = strconv.Itoa(slot), strconv.FormatInt(slotToken, 10)
	}
	return append(env,
		"LEASE_JOB="+job,
		fmt.Sprintf("LEASE_TOKEN=%d", token),
		"LEASE_TICK="+tickText,
		"LEASE_OWNER="+owner,
		"LEASE_SLOT="+slotText,
		"LEASE_SLOT_TOKEN="+slotTokenText)
}

// hostname is the host's name for the default owner.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// optionalString is a string flag that tells "not given" from "given
// empty".
type optionalString struct {
	value string
	set   bool
}

func (o *optionalString) String() string { return o.value }

func (o *optionalString) Set(v string) error {
	o.value, o.set = v, true
	return nil
}

// parseFlags parses args into fs: flag.ErrHelp as it is (-h asked for
// help), any other error as a usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return usageError{err}
	}
	return err
}

// acquireWait is how long the acquire may take when started at now:
// --wait, or with --group and --schedule until the next tick, so that the
// runner's retries of group_full, which end with the tick's grace, are not
// cut short by a --wait meant for an unreachable leaseapi.
func (c runConfig) acquireWait(now time.Time) time.Duration {
	if c.group == nil || *c.group == "" || c.schedule == nil {
		return c.wait
	}
	if next := c.schedule.Next(now); !next.IsZero() && next.Sub(now) > c.wait {
		return next.Sub(now)
	}
	return c.wait
}
