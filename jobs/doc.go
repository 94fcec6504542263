// Package jobs is the replica side of leaseapi: a Runner that runs cron jobs
// on horizontally scaled replicas so that each tick runs once, under a
// lease, and adapters for gocron v2 (Locker) and robfig/cron (CronJobWrapper).
//
// # Ticks
//
// Every replica registers the same jobs with the same cron specs (robfig/cron
// syntax, seconds optional, evaluated in Config.Location, UTC by default). A
// tick is a fire time computed from the spec alone (package schedule, with
// cron(8)'s rule for daylight-saving changes), never from when a replica
// started; `@every D` ticks at the multiples of D since the Unix epoch. So
// every replica asks leaseapi for the same (job, tick), whatever its start
// time or clock offset, and leaseapi grants it to one of them. The others get
// 409 lease_held (it runs) or tick_done (it ran) and skip quietly. A replica
// whose clock runs further ahead of leaseapi's than LEASEAPI_MAX_TICK_AHEAD
// gets 409 tick_ahead: it skips the tick too, and logs a warning with
// clock_fast_seconds, by how much its clock is fast.
//
// # A run
//
// At a tick the runner acquires the job's lease for the tick (retrying 503s
// and network errors with backoff, never sooner than the Retry-After of a 503 or 429,
// while the tick is still the current one),
// runs the job with a context that carries the lease (LeaseFromContext: pass
// the fencing token to the systems the job writes to), heartbeats every
// HeartbeatInterval (TTL/3), and releases the lease succeeded when the job
// returns nil, failed when it returns an error or panics.
//
// The runner keeps a local deadline: the send time of its last successful
// acquire or heartbeat, plus the TTL, minus a margin. It never compares its
// clock with the server's. The job's context is cancelled (context.Cause
// says why) when a heartbeat answers lease_lost (the lease was revoked, or
// expired and was taken over), when the deadline passes without a successful
// heartbeat (ErrDeadline), when the job runs longer than its MaxRunTime, when
// a job with a ProgressWindow stops calling Progress (ErrStalled), and on
// shutdown (ErrShutdown). After a cancellation the runner stops heartbeating
// and waits for the job until the deadline; a job that has not returned by
// then is abandoned, and its lease released failed, so a stuck job never
// holds its lease forever. A job that returns after its deadline cannot
// claim the tick: its run is reported lost.
//
// # Batches
//
// The acquires of the jobs that fire at one tick go to leaseapi as one POST
// /acquire, and the heartbeats of the runs in flight as one POST
// /heartbeat, by group commit: while a batch is at leaseapi the next calls
// queue, and go together (up to 1,000, one per job) when it returns. There
// is no timer: a call that finds nothing in flight goes at once, as its own
// request, so under light load nothing waits. Each run gets the answer its
// own request would have got, and acts on it as above: a refusal skips the
// tick, an item answered 503 or 429 is retried. A leaseapi that answers the
// batch routes 404 or 405 is older than them: the runner logs that once, at
// Info, and sends single requests from then on. Config.DisableBatches sends
// single requests from the start.
//
// # Concurrency groups
//
// A job put in a concurrency group with the Group option is granted only
// while fewer of the group's jobs hold a lease than the group's limit; the
// grant carries the group's slot and slot token (LeaseFromContext,
// Report), which a shared resource can use to fence the group's holders.
// An acquire refused with 409 group_full is retried after its Retry-After,
// with jitter, while the tick may still start (within its grace, never past
// the next tick); a tick whose group stays full is skipped quietly
// (Skipped), and leaseapi records it missed.
//
// # Jobs without ticks
//
// Run with a zero tick asks for the lease without a tick: a mutex, for a job
// started by something other than a schedule (a deploy hook, a queue). Two
// replicas that start it minutes apart run it twice, one after the other.
// The MinInterval option makes leaseapi refuse the lease sooner than the
// interval after the job's previous run started, by leaseapi's clock: the
// late replica gets 409 too_soon and skips quietly (Skipped).
//
// # Owed ticks
//
// A job may owe a tick: a catch-up tick that no replica ran during an
// outage, or a tick an operator asked for with run now (POST
// /leases/{jobId}/trigger, leasectl trigger). Serve asks leaseapi what its
// jobs owe every OwedPollInterval (10 s, jittered), with one POST /owed per
// 1,000 jobs, and claims each owed tick with an ordinary acquire of that
// tick, run as a scheduled tick is: exactly one replica is granted it, the
// others skip quietly. A job that already runs on a replica (its scheduled
// tick, or an earlier claim) is not claimed there until it is done, so a
// scheduled tick and an owed tick of one job never run at once on one
// replica; leaseapi keeps them apart across replicas.
//
// # Shutdown
//
// When the context of Serve is cancelled the runner takes no new ticks,
// cancels the running jobs, releases their leases failed (the ticks may run
// again elsewhere), and returns when they are done or ShutdownTimeout has
// passed.
//
// # What is not guaranteed
//
// A lease is exclusive by the database's clock. A replica that is paused
// (a long GC pause, a stopped process, a frozen VM) past its deadline may
// keep running a job for a moment after it wakes up and before the runner
// cancels it; by then another replica may hold the lease. Jobs must therefore
// be idempotent, or fenced by the lease's token in the systems they write to.
// See the guarantees of package leaseapi.
package jobs
