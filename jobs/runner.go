package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/schedule"
)

// Defaults for the zero values of Config.
const (
	DefaultTTL           = 30 * time.Second
	DefaultTickPrecision = time.Second
)

// Errors a job's context is cancelled with (context.Cause) and that Run and
// Report.Err carry when a run did not succeed.
var (
	// ErrDeadline: the runner's local deadline (the send time of the last
	// successful acquire or heartbeat + ttl - margin) passed without a
	// successful heartbeat; the lease may already belong to another replica.
	ErrDeadline = errors.New("lease deadline passed without a successful heartbeat")
	// ErrMaxRunTime: the job ran longer than its MaxRunTime.
	ErrMaxRunTime = errors.New("job exceeded its max run time")
	// ErrStalled: the job reported no progress within its ProgressWindow.
	ErrStalled = errors.New("job reported no progress within its progress window")
	// ErrShutdown: the runner is shutting down (the context of Run or Serve
	// was cancelled).
	ErrShutdown = errors.New("runner shutting down")
	// ErrAbandoned: the job did not return after its context was cancelled,
	// and the runner gave the lease up without it.
	ErrAbandoned = errors.New("job did not return after cancellation")
	// ErrNotATick: gocron or robfig/cron fired a job at a time that is not
	// a tick of the schedule the adapter was given (a local time the clock
	// repeated); the firing does not run.
	ErrNotATick = errors.New("not a tick of the schedule")
)

// Func is a job. It must stop when ctx is cancelled: the runner cancels it
// when the lease is lost or about to be (context.Cause tells why). The lease
// it runs under is LeaseFromContext(ctx); a job that writes to another system
// should pass the fencing token along. A job with a progress window reports
// progress with Progress(ctx). A nil error releases the lease succeeded, an
// error or a panic releases it failed.
type Func func(ctx context.Context) error

// Result is how a run that acquired its lease ended, as the runner saw it.
// It is not the lease's leaseapi.Outcome: a run whose lease was lost sent
// no outcome, or one that may not have been recorded.
type Result string

// The results of a run.
const (
	// ResultSucceeded: the job returned nil and the release with outcome
	// succeeded was acknowledged; the tick is done.
	ResultSucceeded Result = "succeeded"
	// ResultFailed: the job failed, panicked, or was cancelled by its max
	// run time, its progress watchdog or shutdown; the release asked for
	// outcome failed.
	ResultFailed Result = "failed"
	// ResultLost: the lease was lost (lease_lost, or the local deadline
	// passed without a successful heartbeat) before the job finished, so its
	// work may overlap with the next holder's.
	ResultLost Result = "lost"
)

// Report describes one run that acquired its lease.
type Report struct {
	JobID string
	Tick  time.Time
	Owner string
	// Token is the fencing token of the grant.
	Token int64
	// Group is the concurrency group the grant was made in, Slot and
	// SlotToken the group's slot it took and its slot token ("", 0, 0
	// outside a group).
	Group     string
	Slot      int
	SlotToken int64
	// Start is when the job function was started, End when the run was
	// over (the job returned or was abandoned, and the release was
	// answered), both by the runner's clock.
	Start, End time.Time
	Result     Result
	// Err is why the run did not succeed: the job's error, a panic, or one
	// of ErrDeadline, ErrMaxRunTime, ErrStalled, ErrShutdown,
	// leaseapi.ErrLeaseLost; nil when it succeeded.
	Err error
	// ReleaseErr is why the release could not be delivered, or nil: the
	// lease then expires by its TTL.
	ReleaseErr error
}

// Config configures a Runner. Client and Owner are required; every other
// zero value takes a default.
type Config struct {
	// Client is the leaseapi client, e.g.
	// client.NewClientWithResponses(url, client.WithBearerToken(token)).
	// Its HTTP client should set sensible transport timeouts; every request
	// also carries RequestTimeout. For an https leaseapi with a certificate
	// of a private CA, add client.WithCAFile(caFile) to the options.
	Client client.ClientWithResponsesInterface
	// Owner identifies this replica, e.g. its pod name: 1–128 printable
	// ASCII characters without spaces. Two replicas must never share one.
	Owner string
	// TTL is the lease TTL of every grant and heartbeat: how long a replica
	// that vanished keeps a job from running. Default 30s; whole
	// milliseconds, within the server's configured bounds.
	TTL time.Duration
	// HeartbeatInterval is how often a running job's lease is extended.
	// Default TTL/3; New rejects an interval above TTL/2, which would leave
	// a single lost heartbeat no time to be retried.
	HeartbeatInterval time.Duration
	// Margin is subtracted from the local deadline (send time + TTL) to
	// absorb clock rate differences and the time it takes to cancel a job.
	// Default TTL/10; at most TTL/4.
	Margin time.Duration
	// RequestTimeout bounds every request to leaseapi. Default
	// HeartbeatInterval, so a hung heartbeat is abandoned before the next
	// one is due.
	RequestTimeout time.Duration
	// ShutdownTimeout bounds how long Serve waits for cancelled runs to
	// finish and release their leases. Default TTL.
	ShutdownTimeout time.Duration
	// Location is the time zone cron specs are evaluated in. Default UTC.
	// A spec may override it with a CRON_TZ= prefix.
	Location *time.Location
	// TickPrecision is what the gocron and robfig/cron adapters round the
	// fire time to, because those schedulers do not tell a wrapper or
	// locker the time a run was scheduled for. Default 1s.
	TickPrecision time.Duration
	// OwedPollInterval is how often Serve asks leaseapi what its jobs owe
	// (a catch-up tick after an outage, or an operator's run now), with one
	// POST /owed per 1,000 jobs, each wait jittered by ±20 %; an owed tick
	// is claimed with an ordinary acquire of that tick and run like a
	// scheduled one. Default 10s; negative turns polling off (a leaseapi
	// without owed ticks).
	OwedPollInterval time.Duration
	// DisableBatches sends every acquire and heartbeat as its own request.
	// By default the acquires of jobs that fire together go as one POST
	// /acquire, and the heartbeats of the runs in flight as one POST
	// /heartbeat: while one batch is at leaseapi the next calls queue, and
	// go together when it returns (a call that finds nothing in flight goes
	// at once, alone). Each job gets the answer its own request would have
	// got. Against a leaseapi without the batch routes the runner sends
	// single requests by itself.
	DisableBatches bool
	// Logger receives the runner's log; nil discards it.
	Logger *slog.Logger
	// Clock is the runner's clock; nil is the real clock. Tests inject a
	// clockwork.FakeClock.
	Clock clockwork.Clock
	// ReportFunc, when set, is called after every run that acquired its
	// lease, from the goroutine of the run. It must not block for long.
	ReportFunc func(Report)
}

// Runner runs jobs under leaseapi leases: at each tick it acquires the job's
// lease for that tick, runs the job while heartbeating, and releases the
// lease with the job's outcome. Create it with New, register jobs with Add,
// and call Serve; or call Run for a single lease-guarded run.
type Runner struct {
	client            leaseClient
	owner             string
	ttl               time.Duration
	heartbeatInterval time.Duration
	margin            time.Duration
	requestTimeout    time.Duration
	shutdownTimeout   time.Duration
	location          *time.Location
	tickPrecision     time.Duration
	owedPollInterval  time.Duration // 0: off
	logger            *slog.Logger
	clock             clockwork.Clock
	reportFunc        func(Report)
	// acquires and heartbeats send the calls of the runs, in batches
	// unless Config.DisableBatches.
	acquires   *batched[acquireRequest]
	heartbeats *batched[heartbeatRequest]

	mu sync.Mutex
	// jobs are the registered jobs in the order of Add.
	jobs []*job
	// serving is set by Serve; Add is refused afterwards.
	serving bool
	// running holds the job ids this runner currently runs, so that two
	// runs of one job on one replica never overlap: a second acquire by the
	// same owner for the same tick would be granted as an idempotent retry.
	running map[string]bool
}

// New validates cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	r := &Runner{
		client:            cfg.Client,
		owner:             cfg.Owner,
		ttl:               cfg.TTL,
		heartbeatInterval: cfg.HeartbeatInterval,
		margin:            cfg.Margin,
		requestTimeout:    cfg.RequestTimeout,
		shutdownTimeout:   cfg.ShutdownTimeout,
		location:          cfg.Location,
		tickPrecision:     cfg.TickPrecision,
		owedPollInterval:  cfg.OwedPollInterval,
		logger:            cfg.Logger,
		clock:             cfg.Clock,
		reportFunc:        cfg.ReportFunc,
		running:           make(map[string]bool),
	}
	if r.client == nil {
		return nil, errors.New("new runner: client is required")
	}
	if !leaseapi.ValidOwner(r.owner) {
		return nil, fmt.Errorf("new runner: owner %q must be 1-128 printable ASCII characters without spaces", r.owner)
	}
	if r.ttl == 0 {
		r.ttl = DefaultTTL
	}
	if r.ttl < time.Millisecond || r.ttl%time.Millisecond != 0 {
		return nil, fmt.Errorf("new runner: ttl %s must be a positive whole number of milliseconds", r.ttl)
	}
	if r.heartbeatInterval == 0 {
		r.heartbeatInterval = r.ttl / 3
	}
	if r.heartbeatInterval <= 0 || r.heartbeatInterval > r.ttl/2 {
		return nil, fmt.Errorf("new runner: heartbeat interval %s must be above zero and at most ttl/2 (%s)", r.heartbeatInterval, r.ttl/2)
	}
	if r.margin == 0 {
		r.margin = r.ttl / 10
	}
	if r.margin < 0 || r.margin > r.ttl/4 {
		return nil, fmt.Errorf("new runner: margin %s must not be negative and at most ttl/4 (%s)", r.margin, r.ttl/4)
	}
	if r.requestTimeout == 0 {
		r.requestTimeout = r.heartbeatInterval
	}
	if r.requestTimeout < 0 {
		return nil, fmt.Errorf("new runner: request timeout %s must be above zero", r.requestTimeout)
	}
	if r.shutdownTimeout == 0 {
		r.shutdownTimeout = r.ttl
	}
	if r.shutdownTimeout < 0 {
		return nil, fmt.Errorf("new runner: shutdown timeout %s must be above zero", r.shutdownTimeout)
	}
	if r.location == nil {
		r.location = time.UTC
	}
	if r.tickPrecision == 0 {
		r.tickPrecision = DefaultTickPrecision
	}
	if r.tickPrecision < time.Millisecond {
		return nil, fmt.Errorf("new runner: tick precision %s must be at least 1ms", r.tickPrecision)
	}
	switch {
	case r.owedPollInterval == 0:
		r.owedPollInterval = DefaultOwedPollInterval
	case r.owedPollInterval < 0:
		r.owedPollInterval = 0
	case r.owedPollInterval < 10*time.Millisecond:
		return nil, fmt.Errorf("new runner: owed poll interval %s must be at least 10ms, or negative to turn polling off", r.owedPollInterval)
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	if r.clock == nil {
		r.clock = clockwork.NewRealClock()
	}
	r.acquires = newBatched("acquire", func(a *acquireRequest) string { return a.jobID },
		func(ctx context.Context, a *acquireRequest) (leaseapi.Lease, error) {
			return postAcquire(ctx, r.client, a)
		},
		func(ctx context.Context, as []*acquireRequest) ([]callResult, error) {
			return postAcquireBatch(ctx, r.client, as)
		},
		r.logger, cfg.DisableBatches)
	r.heartbeats = newBatched("heartbeat", func(h *heartbeatRequest) string { return h.jobID },
		func(ctx context.Context, h *heartbeatRequest) (leaseapi.Lease, error) {
			return postHeartbeat(ctx, r.client, h)
		},
		func(ctx context.Context, hs []*heartbeatRequest) ([]callResult, error) {
			return postHeartbeatBatch(ctx, r.client, hs)
		},
		r.logger, cfg.DisableBatches)
	return r, nil
}

// Owner returns the owner the runner acquires leases as.
func (r *Runner) Owner() string { return r.owner }

// JobOption configures one job (Add) or one run (Run).
type JobOption func(*jobConfig) error

type jobConfig struct {
	maxRunTime     time.Duration
	progressWindow time.Duration
	// schedule, with its grace (zero: the server's default), is sent with
	// every acquire, so that leaseapi can tell when a tick did not run.
	schedule string
	grace    time.Duration
	// catchUp and catchUpWindow (zero: the server's default) are sent
	// with the schedule when CatchUp is given; "" leaves the stored policy.
	catchUp       leaseapi.CatchUp
	catchUpWindow time.Duration
	// group is sent with every acquire: nil keeps the job's stored group,
	// "" takes it out of its group.
	group *string
	// minInterval is sent with every acquire (0: none).
	minInterval time.Duration
}

// Schedule sends spec, the job's schedule as leaseapi reads it (package
// schedule; fields in UTC unless it names a zone with CRON_TZ=), with every
// acquire of the job, so that leaseapi records the ticks that no replica
// started as missed. Runner.Add sends its job's spec by itself; the
// adapters (CronJobWrapper, Locker.Job) also take their ticks from it.
func Schedule(spec string) JobOption {
	return func(c *jobConfig) error {
		if _, err := schedule.Parse(spec); err != nil {
			return fmt.Errorf("schedule %q: %w", spec, err)
		}
		c.schedule = spec
		return nil
	}
}

// Grace is how long after a tick a replica may still start it before
// leaseapi counts the tick as missed (1 ms to 24 h; the server caps it at
// the schedule's shortest gap). Without it the server's default applies.
// It needs a schedule (Schedule, or Runner.Add's).
func Grace(d time.Duration) JobOption {
	return func(c *jobConfig) error {
		if d < time.Millisecond || d > leaseapi.MaxGrace || d%time.Millisecond != 0 {
			return fmt.Errorf("grace %s must be a whole number of milliseconds from 1ms to 24h", d)
		}
		c.grace = d
		return nil
	}
}

// CatchUp makes leaseapi owe the job's latest missed tick once, while it is
// at most window old (1 min to 7 days; zero for the server's default of
// 24 h): after an outage of every replica the job runs once for the latest
// tick nobody ran, claimed by the owed-tick poll (Config.OwedPollInterval),
// instead of waiting for its next tick. It needs a schedule (Schedule, or
// Runner.Add's). Without it the job's stored policy stays (none for a new
// job).
func CatchUp(window time.Duration) JobOption {
	return func(c *jobConfig) error {
		if err := leaseapi.ValidateCatchUp(leaseapi.CatchUpLatest, window); err != nil {
			return fmt.Errorf("catch-up window %s must be zero or from 1m to 168h", window)
		}
		c.catchUp, c.catchUpWindow = leaseapi.CatchUpLatest, window
		return nil
	}
}

// Group puts the job in the concurrency group name, sent with every
// acquire: leaseapi grants the job only while fewer of the group's jobs hold
// a lease than its limit, and the lease carries the group's slot and slot
// token (LeaseFromContext). The group must exist (PUT /groups/{name},
// leasectl groups put). An acquire refused group_full is retried after its
// Retry-After, with jitter, while the tick may still start (its grace, and
// never past the next tick), then the tick is skipped quietly. Group("")
// takes the job out of its group at its next grant; without the option the
// job stays in the group it is in.
func Group(name string) JobOption {
	return func(c *jobConfig) error {
		if name != "" {
			if err := leaseapi.ValidateGroupName("group", name); err != nil {
				return fmt.Errorf("group %q: %w", name, err)
			}
		}
		c.group = &name
		return nil
	}
}

// MinInterval refuses the job's lease to this replica sooner than d after
// the job's previous run started (1 ms to 31 days; leaseapi's clock
// decides, not this host's): the run is skipped, an error wrapping
// leaseapi.ErrTooSoon. It is for a job started without a tick (Run with a
// zero tick) on replicas whose clocks differ: a replica that starts late
// finds the run another one just finished and skips it, where it would
// otherwise run the job again. The holder's own retry is never refused.
// A server that does not know it yet (an upgrade not finalized) refuses
// the acquire with 400 feature_disabled: an *APIError.
func MinInterval(d time.Duration) JobOption {
	return func(c *jobConfig) error {
		if !leaseapi.ValidMinInterval(d) {
			return fmt.Errorf("min interval %s must be a whole number of milliseconds from 1ms to 744h (31 days)", d)
		}
		c.minInterval = d
		return nil
	}
}

// MaxRunTime cancels the job (cause ErrMaxRunTime) when it has run for d,
// and stops heartbeating: a stuck job gives its lease up instead of holding
// it forever. The run is released failed as soon as the job returns, or at
// the local deadline if it does not.
func MaxRunTime(d time.Duration) JobOption {
	return func(c *jobConfig) error {
		if d <= 0 {
			return fmt.Errorf("max run time %s must be above zero", d)
		}
		c.maxRunTime = d
		return nil
	}
}

// ProgressWindow turns on the progress watchdog: the runner heartbeats only
// while the job has called Progress(ctx) within the last d (counted from the
// start of the run at first). A job that hangs is cancelled with cause
// ErrStalled and loses its lease within ttl + d; its run is released failed.
func ProgressWindow(d time.Duration) JobOption {
	return func(c *jobConfig) error {
		if d <= 0 {
			return fmt.Errorf("progress window %s must be above zero", d)
		}
		c.progressWindow = d
		return nil
	}
}

// errCatchUpWithoutSchedule: the server owes a missed tick only of a job
// whose schedule it knows.
var errCatchUpWithoutSchedule = errors.New("catch-up needs the job's schedule: add Schedule(spec), or use Runner.Add")

// newScheduledJobConfig is newJobConfig for a run whose schedule comes only
// from the options (Run and the adapters, not Runner.Add).
func newScheduledJobConfig(opts []JobOption) (jobConfig, error) {
	c, err := newJobConfig(opts)
	if err == nil && c.catchUp != "" && c.schedule == "" {
		err = errCatchUpWithoutSchedule
	}
	return c, err
}

func newJobConfig(opts []JobOption) (jobConfig, error) {
	var c jobConfig
	for _, o := range opts {
		if err := o(&c); err != nil {
			return jobConfig{}, err
		}
	}
	return c, nil
}

// contextKey is the type of the context keys of this package.
type contextKey int

const runKey contextKey = iota

// LeaseFromContext returns the lease a job runs under, as granted by its
// acquire: the fencing token is lease.Token. ok is false outside a run.
func LeaseFromContext(ctx context.Context) (lease leaseapi.Lease, ok bool) {
	s, ok := ctx.Value(runKey).(*runState)
	if !ok {
		return leaseapi.Lease{}, false
	}
	return s.lease, true
}

// Progress tells the runner that the job is making progress. It matters only
// for a job with a ProgressWindow; outside a run it does nothing.
func Progress(ctx context.Context) {
	if s, ok := ctx.Value(runKey).(*runState); ok {
		s.lastProgress.Store(s.r.clock.Now().UnixNano())
	}
}
