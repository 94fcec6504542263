"""The runner: a job run under a lease, with heartbeats and a local deadline.

It behaves as the Go runner (package jobs) does. It acquires the job's lease
(retrying 429, 503 and network errors for ``acquire_wait``), runs the job in
the calling thread and heartbeats from a thread of its own every
``heartbeat_interval`` (TTL/3). Its local deadline is the send time of the
last successful acquire or heartbeat plus the TTL, minus a margin (TTL/10),
all by this process's monotonic clock: it never compares its clock with the
server's. The job is told to stop (``RunContext.stop`` is set, ``cause`` says
why) when a heartbeat answers ``lease_lost`` (revoked, or expired and taken
over), when the deadline passes without a successful heartbeat, when it runs
longer than ``max_run_time``, and on :meth:`Runner.shutdown`. The runner then
stops heartbeating and waits for the job until the deadline (a job that lost
its lease gets the margin); if it has not returned by then, the run is given
up and released ``failed`` without it. The lease is released ``succeeded``
when the job returns, ``failed`` when it raises or was stopped. A refused
acquire (``lease_held``, ``tick_done``, ``job_paused``, ``tick_ahead``)
raises :class:`~leaseapi.errors.NotAcquired` without running the job:
another replica has the tick, the job is paused, or the tick lies ahead of
the service's clock (this host's clock is fast: logged as a warning).

A job in a concurrency group (``group=``) is granted only while fewer of
the group's jobs hold a lease than its limit; its lease carries the group's
slot and slot token (``RunContext.slot_token``: the fencing token of what
the group's holders share). An acquire refused ``group_full`` is retried
after its ``Retry-After``, with jitter, while the tick is within its grace
(the ``grace`` given, else the one the service holds for the job; with
``nearest_tick`` counted from the first refusal, and never past the next
tick), else for ``acquire_wait``; then :class:`~leaseapi.errors.GroupFull`
(a :class:`~leaseapi.errors.NotAcquired`) is raised: the tick is skipped.

A Python thread cannot be cancelled: a job that ignores ``stop`` keeps
running after its lease is gone, and another replica may run the next tick
meanwhile. Jobs should poll ``stop`` (or wait on it), run commands through
:meth:`RunContext.run_process`, which terminates them, and pass the fencing
token (``RunContext.token``) to what they write to.

The acquires and heartbeats of a runner go in batches (``POST /acquire``,
``POST /heartbeat``) by group commit: while a batch is at leaseapi, further
acquires (heartbeats) of every runner of the same :class:`Client` in this
process queue, and when it returns the queue goes as the next batch (at
most 1000, one per job); a call alone goes at once, as the single call. So
the jobs that fire at one tick take one or two requests, not one each. Each run gets what its
single call would have: the same lease or error, retried the same way. A
leaseapi that answers the batch routes 404 or 405 (a version without them)
gets single calls from then on; ``batch=False`` sends single calls only.

A job may owe a tick: a catch-up tick that no replica ran during an outage,
or one an operator asked for (run now: ``leasectl trigger``). The jobs
registered with :meth:`Runner.watch_owed` are polled for what they owe
(``POST /owed``, one call per 1000 jobs) from a thread of the runner every
``owed_poll_interval`` (jittered), and each owed tick is claimed with an
ordinary acquire of exactly that tick and run in a thread of its own:
exactly one replica is granted it, the others skip quietly. A job that runs
in this process already is claimed at a later poll, so one process never
runs a job twice at once. :meth:`Runner.shutdown` stops the polling.
"""

from __future__ import annotations

import contextvars
import copy
import dataclasses
import logging
import os
import random
import signal
import socket
import subprocess
import threading
import time
import weakref
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import errors
from .client import _OWED_BATCH, MAX_BATCH_ITEMS, AcquireItem, BatchResult, Client, HeartbeatItem, _jitter, check_schedule_options, min_interval_millis, retrying
from .models import Lease, Owed, Seconds, format_time, to_seconds

__all__ = [
    "Runner",
    "RunContext",
    "RunReport",
    "RunStopped",
    "DeadlinePassed",
    "MaxRunTimeExceeded",
    "ShuttingDown",
    "Abandoned",
    "current_run",
    "default_owner",
]

SUCCEEDED, FAILED, LOST = "succeeded", "failed", "lost"


class RunStopped(Exception):
    """Why the runner told a job to stop, other than a lost lease
    (:class:`~leaseapi.errors.LeaseLost`)."""


class DeadlinePassed(RunStopped):
    """The local deadline (send time of the last successful acquire or
    heartbeat + TTL - margin) passed without a successful heartbeat: the
    lease may belong to another replica by now."""


class MaxRunTimeExceeded(RunStopped):
    """The job ran longer than its ``max_run_time``."""


class ShuttingDown(RunStopped):
    """:meth:`Runner.shutdown` was called."""


class Abandoned(RunStopped):
    """The job did not return after it was told to stop, and the runner gave
    the lease up without it."""


@dataclasses.dataclass(frozen=True)
class RunReport:
    """How a run that acquired its lease ended, as the runner saw it.

    ``result`` is ``succeeded`` (the job returned and the release was
    acknowledged: the tick is done), ``failed`` (the job raised, or was
    stopped by its max run time or shutdown; released ``failed``) or ``lost``
    (the lease was lost before the job finished, or a succeeded run's release
    was not acknowledged: its work may overlap the next holder's). ``error``
    is why it did not succeed; ``value`` what the job returned.
    """

    job_id: str
    owner: str
    token: int
    tick: Optional[datetime]
    started_at: datetime
    ended_at: datetime
    result: str
    error: Optional[BaseException] = None
    release_error: Optional[errors.LeaseError] = None
    value: Any = None
    #: The concurrency group's slot the grant took and its slot token; None
    #: outside a group.
    slot: Optional[int] = None
    slot_token: Optional[int] = None


_current: "contextvars.ContextVar[Optional[RunContext]]" = contextvars.ContextVar("leaseapi_run", default=None)


def current_run() -> Optional["RunContext"]:
    """The run the calling code is part of, or None outside a run: how a job
    wrapped by :func:`leaseapi.leased` or the Celery integration finds its
    lease, token and ``stop`` event."""
    return _current.get()


def default_owner() -> str:
    """``<hostname>/<pid>``: unique per process, so each process of a replica
    (Celery's prefork children too) is its own owner."""
    host = "".join(c for c in socket.gethostname() if "!" <= c <= "~")[:100] or "host"
    return f"{host}/{os.getpid()}"


class RunContext:
    """What a job gets: its lease and the ``stop`` event.

    ``stop`` is set when the job must stop: its lease was lost or is about to
    be, it ran past its max run time, or the runner shuts down; ``cause``
    then says why (:class:`~leaseapi.errors.LeaseLost`,
    :class:`DeadlinePassed`, :class:`MaxRunTimeExceeded`,
    :class:`ShuttingDown`). A long job polls ``stop.is_set()`` or waits with
    ``stop.wait(seconds)`` instead of ``time.sleep``.
    """

    def __init__(self, lease: Lease, owner: str, kill_grace: float, logger: logging.Logger) -> None:
        self.lease = lease
        self.owner = owner
        self.stop = threading.Event()
        self.cause: Optional[BaseException] = None
        self._kill_grace = kill_grace
        self._log = logger
        self._lock = threading.Lock()
        self._wakers: List[threading.Event] = []

    @property
    def job_id(self) -> str:
        return self.lease.job_id

    @property
    def token(self) -> int:
        """The fencing token of the grant: pass it to what the job writes to."""
        return self.lease.token

    @property
    def tick(self) -> Optional[datetime]:
        """The tick the grant is for (the one the service picked with
        nearest tick)."""
        return self.lease.tick

    @property
    def slot(self) -> Optional[int]:
        """The slot of its concurrency group the grant took; None outside a
        group."""
        return self.lease.slot

    @property
    def slot_token(self) -> Optional[int]:
        """The group's fencing token of the grant, strictly increasing per
        group: pass it to what the group's holders share. None outside a
        group."""
        return self.lease.slot_token

    def _signal_stop(self, cause: BaseException) -> None:
        with self._lock:
            self.cause = cause
            self.stop.set()
            for wake in self._wakers:
                wake.set()

    def run_process(
        self,
        args: Union[str, Sequence[str]],
        *,
        kill_grace: Optional[Seconds] = None,
        check: bool = True,
        **popen_kwargs: Any,
    ) -> "subprocess.CompletedProcess[Any]":
        """Runs a command as part of the job, in its own process group, with
        ``LEASE_JOB``, ``LEASE_TOKEN``, ``LEASE_TICK`` and ``LEASE_OWNER`` in
        its environment. When the job must stop, the group gets SIGTERM, and
        SIGKILL after ``kill_grace`` (default half the runner's margin, TTL/20,
        so that a command is gone before a run that lost its lease is given
        up); the cause is then raised. A non-zero exit raises ``subprocess.CalledProcessError``
        when ``check`` (the run is released failed). Other keyword arguments
        go to ``subprocess.Popen``.
        """
        grace = self._kill_grace if kill_grace is None else to_seconds(kill_grace)
        env = dict(popen_kwargs.pop("env", None) or os.environ)
        env.update(
            LEASE_JOB=self.job_id,
            LEASE_TOKEN=str(self.token),
            LEASE_TICK=format_time(self.tick) if self.tick else "",
            LEASE_OWNER=self.owner,
        )
        wake = threading.Event()
        with self._lock:
            if self.stop.is_set():
                raise self._stopped()
            self._wakers.append(wake)
        try:
            proc = subprocess.Popen(args, env=env, start_new_session=True, **popen_kwargs)
            with proc:
                waiter = threading.Thread(target=lambda: (proc.wait(), wake.set()), name=f"leaseapi-wait-{proc.pid}", daemon=True)
                waiter.start()
                wake.wait()
                if proc.poll() is None:
                    self._log.info("stopping command of job %s: %s (SIGTERM, SIGKILL after %.1fs)", self.job_id, self.cause, grace)
                    _signal_group(proc, signal.SIGTERM)
                    try:
                        proc.wait(timeout=grace)
                    except subprocess.TimeoutExpired:
                        _signal_group(proc, signal.SIGKILL)
                        proc.wait()
                waiter.join()
                stdout, stderr = proc.communicate() if (proc.stdout or proc.stderr) else (None, None)
        finally:
            with self._lock:
                self._wakers.remove(wake)
        if self.stop.is_set():
            raise self._stopped()
        if check and proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, proc.args, stdout, stderr)
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)

    def _stopped(self) -> BaseException:
        return self.cause if self.cause is not None else RunStopped("run stopped")


def _signal_group(proc: "subprocess.Popen[Any]", sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


class Runner:
    """Runs jobs under leaseapi leases; one per process is enough.

    ``owner`` identifies this replica (1-128 printable ASCII characters
    without spaces; two processes must never share one); None is
    :func:`default_owner`, computed at each run so that forked workers differ.
    ``ttl`` is the TTL of every grant and heartbeat (seconds, default 30):
    how long a replica that died keeps a job from running.
    ``heartbeat_interval`` defaults to TTL/3 (at most TTL/2), ``margin``
    (subtracted from the local deadline) to TTL/10 (at most TTL/4),
    ``request_timeout`` to the heartbeat interval. ``acquire_wait`` is how
    long an acquire is retried while leaseapi does not answer or answers
    429/503. ``owed_poll_interval`` (seconds, default 10, each wait jittered
    by ±20 %; 0 turns polling off, for a leaseapi without owed ticks) is how
    often the jobs registered with :meth:`watch_owed` ask what they owe; an
    owed tick's acquire is retried until the next poll. ``batch`` (default
    True) sends acquires and heartbeats in batches (see the module); False
    sends one request per call.
    """

    def __init__(
        self,
        client: Client,
        owner: Optional[str] = None,
        *,
        ttl: Seconds = 30.0,
        heartbeat_interval: Optional[Seconds] = None,
        margin: Optional[Seconds] = None,
        request_timeout: Optional[Seconds] = None,
        acquire_wait: Seconds = 10.0,
        owed_poll_interval: Seconds = 10.0,
        logger: Optional[logging.Logger] = None,
        batch: bool = True,
    ) -> None:
        self.client = client
        self.batch = batch
        if owner is not None and not _valid_owner(owner):
            raise ValueError(f"owner {owner!r} must be 1-128 printable ASCII characters without spaces")
        self._owner = owner
        self.ttl = to_seconds(ttl)
        if self.ttl < 0.001:
            raise ValueError(f"ttl {ttl!r} must be at least 1 millisecond")
        self.heartbeat_interval = self.ttl / 3 if heartbeat_interval is None else to_seconds(heartbeat_interval)
        if not 0 < self.heartbeat_interval <= self.ttl / 2:
            raise ValueError(f"heartbeat interval {self.heartbeat_interval}s must be above zero and at most ttl/2 ({self.ttl / 2}s)")
        self.margin = self.ttl / 10 if margin is None else to_seconds(margin)
        if not 0 <= self.margin <= self.ttl / 4:
            raise ValueError(f"margin {self.margin}s must not be negative and at most ttl/4 ({self.ttl / 4}s)")
        self.request_timeout = self.heartbeat_interval if request_timeout is None else to_seconds(request_timeout)
        if self.request_timeout <= 0:
            raise ValueError("request timeout must be above zero")
        self.acquire_wait = to_seconds(acquire_wait)
        self.owed_poll_interval = to_seconds(owed_poll_interval)
        if self.owed_poll_interval != 0 and not self.owed_poll_interval >= 0.01:
            raise ValueError(f"owed poll interval {self.owed_poll_interval}s must be at least 10 milliseconds, or 0 to turn polling off")
        self._log = logger or logging.getLogger("leaseapi")
        self._lock = threading.Lock()
        self._running: Dict[str, "_Run"] = {}
        self._shutting_down = False
        self._owed_jobs: Dict[str, "_OwedJob"] = {}
        self._owed_thread: Optional[threading.Thread] = None
        # Set by shutdown: the poll thread's waits, and the waits before
        # retrying a group_full refusal, end at once.
        self._owed_stop = threading.Event()

    @property
    def owner(self) -> str:
        return self._owner if self._owner is not None else default_owner()

    def run(
        self,
        job_id: str,
        fn: Callable[[RunContext], Any],
        *,
        tick: Optional[datetime] = None,
        nearest_tick: bool = False,
        schedule: Optional[str] = None,
        grace: Optional[Seconds] = None,
        catch_up: Optional[str] = None,
        catch_up_window: Optional[Seconds] = None,
        max_run_time: Optional[Seconds] = None,
        group: Optional[str] = None,
        min_interval: Optional[Seconds] = None,
    ) -> RunReport:
        """Runs ``fn(ctx)`` once under the lease of ``job_id`` and returns how
        the run ended.

        ``tick`` is the scheduled time the run is for; ``nearest_tick=True``
        lets the service pick it from ``schedule`` (neither: a plain mutex).
        ``schedule`` and ``grace`` are sent with the acquire so that ticks no
        replica started are recorded missed, and ``catch_up`` (``latest``:
        the latest missed tick is owed once) and ``catch_up_window`` with
        them (see :meth:`Client.acquire`), ``group``, the job's
        concurrency group (``""`` takes it out of its group), and
        ``min_interval``: the run is refused (:class:`TooSoon`) sooner than
        that after the job's previous run started, by the service's clock,
        for a job run without a tick on hosts whose clocks differ. Raises
        :class:`~leaseapi.errors.NotAcquired` when the tick is not this
        replica's to run, and :class:`~leaseapi.errors.LeaseError` when the
        acquire failed; ``fn`` is then not called. An exception of ``fn``
        does not propagate: it is the report's ``error``.
        """
        spec = _Spec(schedule, grace, catch_up, catch_up_window, max_run_time, group, min_interval)
        return self._run(job_id, fn, tick, nearest_tick, spec, self.acquire_wait)

    def _run(self, job_id: str, fn: Callable[[RunContext], Any], tick: Optional[datetime], nearest_tick: bool, spec: "_Spec", acquire_wait: float) -> RunReport:
        """run, with the acquire retried for acquire_wait seconds."""
        max_run_time = spec.max_run_time
        owner = self.owner
        log = _Logger(self._log, job_id, owner)
        with self._lock:
            if self._shutting_down:
                raise ShuttingDown("runner is shutting down: no new runs")
            if job_id in self._running:
                # The service would grant this owner the lease again as an
                # idempotent retry: one replica must not run a job twice at once.
                raise errors.LeaseHeld(f"job {job_id} is still running in this process", code="lease_held")
            self._running[job_id] = _PENDING
        try:
            def attempt() -> Tuple[float, Lease]:
                # The send time of the attempt that got the lease starts the
                # local deadline; retries are this loop's, so that it is the
                # last attempt's, not the first's.
                item = AcquireItem(
                    job_id,
                    owner=owner,
                    ttl=self.ttl,
                    tick=tick,
                    nearest_tick=nearest_tick,
                    schedule=spec.schedule,
                    grace=spec.grace,
                    catch_up=spec.catch_up,
                    catch_up_window=spec.catch_up_window,
                    group=spec.group,
                    min_interval=spec.min_interval,
                )
                if self.batch:
                    return _batchers_of(self.client, self._log).acquires.call(item, self.request_timeout)
                return _acquire_single(self.client, item, self.request_timeout)

            try:
                sent, lease = self._acquire(attempt, job_id, tick, spec, acquire_wait, log)
            except errors.TickAhead as err:
                # This host's clock runs ahead of the service's: its ticks
                # are refused until the clock is fixed.
                fast = err.clock_fast(datetime.now(timezone.utc))
                log.warning("tick skipped: this host's clock is fast; fix it (NTP): clock %s s fast, service clock %s",
                            "?" if fast is None else f"{fast:.0f}", format_time(err.now) if err.now else "unknown")
                raise
            except errors.NotAcquired as err:
                log.debug("tick skipped: %s", err)
                raise
            run = _Run(self, lease, owner, sent, None if max_run_time is None else to_seconds(max_run_time), log)
            with self._lock:
                self._running[job_id] = run
                shutting_down = self._shutting_down
            if shutting_down:
                # Shutdown began while the acquire was on its way: give the
                # lease back at once instead of starting the job.
                return run.abort(ShuttingDown("runner is shutting down: the job was not started"))
            return run.execute(fn)
        finally:
            with self._lock:
                del self._running[job_id]

    def _acquire(self, attempt: Callable[[], Tuple[float, Lease]], job_id: str, tick: Optional[datetime], spec: "_Spec", acquire_wait: float, log: "_Logger") -> Tuple[float, Lease]:
        """attempt(), retrying what the client retries for acquire_wait, and
        group_full after its Retry-After, with jitter, while the tick may
        still start (see _group_full_until); raises the last refusal then."""
        wait_until = time.monotonic() + acquire_wait
        until: Optional[datetime] = None
        while True:
            try:
                return retrying(attempt, max(0.0, wait_until - time.monotonic()), self._log, f"acquire of {job_id}")
            except errors.GroupFull as err:
                if until is None:
                    until = _group_full_until(tick, spec.grace, err, datetime.now(timezone.utc), acquire_wait)
                retry_after = err.retry_after if err.retry_after and err.retry_after > 0 else 1.0
                wait = retry_after + random.random() * retry_after / 4
                if datetime.now(timezone.utc) + timedelta(seconds=wait) >= until:
                    raise
                log.debug("group %s full, retrying in %.1fs", err.group.name if err.group else "?", wait)
                if self._owed_stop.wait(wait):
                    raise ShuttingDown("runner is shutting down: the job was not started") from err
                wait_until = time.monotonic() + acquire_wait

    def shutdown(self) -> None:
        """Takes no new runs, stops polling owed ticks, and tells the running
        jobs to stop (cause :class:`ShuttingDown`); each is released failed
        when it returns (the tick may run again elsewhere). Returns at once;
        the threads in :meth:`run` return when their jobs do."""
        with self._lock:
            self._shutting_down = True
            runs = [r for r in self._running.values() if r is not _PENDING]
        self._owed_stop.set()
        for run in runs:
            run.stop_now(ShuttingDown("runner is shutting down"))

    def watch_owed(
        self,
        job_id: str,
        fn: Callable[[RunContext], Any],
        *,
        schedule: Optional[str] = None,
        grace: Optional[Seconds] = None,
        catch_up: Optional[str] = None,
        catch_up_window: Optional[Seconds] = None,
        max_run_time: Optional[Seconds] = None,
        group: Optional[str] = None,
        min_interval: Optional[Seconds] = None,
    ) -> None:
        """Registers ``fn`` to run the ticks ``job_id`` owes (a catch-up
        tick, or a manual one: run now): the runner's poll thread asks what
        the registered jobs owe every ``owed_poll_interval`` and runs each
        owed tick as :meth:`run` would with ``tick`` the owed one and these
        options, in a thread of its own. The first poll comes after a random
        share of one interval, so that a fleet restarted at once spreads its
        polls. :func:`leaseapi.leased` and the Celery integration register
        their jobs; registering a job again replaces its ``fn`` and options.
        The poll thread is a daemon: it does not keep the process alive."""
        spec = _Spec(schedule, grace, catch_up, catch_up_window, max_run_time, group, min_interval)
        with self._lock:
            self._owed_jobs[job_id] = _OwedJob(fn, spec)
            if self.owed_poll_interval == 0 or self._owed_thread is not None or self._shutting_down:
                return
            self._owed_thread = threading.Thread(target=self._poll_owed_loop, name="leaseapi-owed-poll", daemon=True)
            self._owed_thread.start()

    def _poll_owed_loop(self) -> None:
        interval = self.owed_poll_interval
        wait = random.uniform(0, interval)
        while not self._owed_stop.wait(wait):
            try:
                self.poll_owed()
            except Exception:  # noqa: BLE001 - a bug in one poll must not end the polling
                self._log.exception("owed-tick poll failed", extra={"owner": self.owner})
            wait = interval * 0.8 + random.random() * interval * 0.4

    def poll_owed(self) -> List[threading.Thread]:
        """Asks once what the jobs registered with :meth:`watch_owed` owe
        (one ``POST /owed`` per 1000 jobs) and starts a claim of each owed
        tick whose job does not run in this process already; returns the
        claims' threads (their runs go on). The poll thread calls it; tests
        call it directly. Does nothing once the runner shuts down."""
        with self._lock:
            if self._shutting_down:
                return []
            jobs = dict(self._owed_jobs)
        owner = self.owner
        ids = sorted(jobs)
        claims: List[threading.Thread] = []
        for start in range(0, len(ids), _OWED_BATCH):
            batch = ids[start : start + _OWED_BATCH]
            try:
                owed = self.client.owed(batch, retry_for=0, timeout=self.request_timeout)
            except errors.LeaseError as err:
                hint = ""
                if err.status in (404, 405):
                    # POST /owed never answers 404 for unknown ids: the
                    # route itself is missing.
                    hint = " (this leaseapi does not serve POST /owed, an older version?; pass owed_poll_interval=0 to stop polling)"
                self._log.warning("owed ticks not polled%s: %s owner=%s jobs=%d", hint, err, owner, len(batch), extra={"owner": owner, "jobs": len(batch)})
                continue
            for o in owed:
                job = jobs.get(o.job_id)
                with self._lock:
                    skip = job is None or o.job_id in self._running or self._shutting_down
                if skip:
                    continue
                assert job is not None
                log = _Logger(self._log, o.job_id, owner)
                if o.tick is None:
                    log.error("owed tick skipped: its time is unreadable: %s", o.field_errors.get("tick"))
                    continue
                log.debug("claiming owed tick %s (%s)", format_time(o.tick), o.reason)
                claim = threading.Thread(target=self._claim_owed, args=(job, o, log), name=f"leaseapi-owed-{o.job_id}", daemon=True)
                claim.start()
                claims.append(claim)
        return claims

    def _claim_owed(self, job: "_OwedJob", owed: Owed, log: "_Logger") -> None:
        """Runs job for the tick it owes, with an ordinary acquire of that
        tick: exactly one replica is granted it, the others skip quietly
        (lease_held, tick_done). The acquire is retried until the next poll,
        which asks again."""
        try:
            self._run(owed.job_id, job.fn, owed.tick, False, job.spec, self.owed_poll_interval)
        except (errors.NotAcquired, ShuttingDown):
            pass  # the normal skips: run logged them
        except errors.LeaseError as err:
            log.warning("owed tick %s not run: %s", format_time(owed.tick) if owed.tick else "?", err)


@dataclasses.dataclass(frozen=True)
class _Spec:
    """What a run sends with its acquire besides the tick, and its max run
    time; made from the caller's options, which it checks."""

    schedule: Optional[str]
    grace: Optional[Seconds]
    catch_up: Optional[str]
    catch_up_window: Optional[Seconds]
    max_run_time: Optional[Seconds]
    group: Optional[str] = None
    min_interval: Optional[Seconds] = None

    def __post_init__(self) -> None:
        check_schedule_options(self.schedule, self.grace, self.catch_up, self.catch_up_window)
        if self.min_interval is not None:
            min_interval_millis(self.min_interval)
        if self.max_run_time is not None and to_seconds(self.max_run_time) <= 0:
            raise ValueError("max run time must be above zero")


def _group_full_until(tick: Optional[datetime], grace: Optional[Seconds], refusal: errors.GroupFull, now: datetime, acquire_wait: float) -> datetime:
    """Until when an acquire refused group_full is retried: the tick plus
    its grace (the one given, else the one the refusal's lease holds), never
    past the lease's next tick. Without a tick (nearest tick) the grace
    counts from now, the first refusal; without a grace the acquire is
    retried for acquire_wait."""
    lease = refusal.lease
    seconds = to_seconds(grace) if grace is not None else (lease.grace if lease is not None else None)
    if seconds is None:
        return now + timedelta(seconds=acquire_wait)
    until = (tick if tick is not None else now) + timedelta(seconds=seconds)
    if lease is not None and lease.next_tick is not None and lease.next_tick < until:
        until = lease.next_tick
    return until


@dataclasses.dataclass(frozen=True)
class _OwedJob:
    """A job registered with Runner.watch_owed."""

    fn: Callable[[RunContext], Any]
    spec: _Spec


def _valid_owner(owner: str) -> bool:
    return 1 <= len(owner) <= 128 and all("!" <= c <= "~" for c in owner)


class _Logger:
    """The runner's log lines, each naming the job and owner (key=value, so a
    JSON formatter can take the ``extra`` fields too)."""

    def __init__(self, logger: logging.Logger, job_id: str, owner: str) -> None:
        self._logger, self._job_id, self._owner, self.token = logger, job_id, owner, 0

    def _emit(self, level: int, msg: str, args: Any) -> None:
        if self._logger.isEnabledFor(level):
            extra = {"job_id": self._job_id, "owner": self._owner, "token": self.token}
            self._logger.log(level, msg + " job_id=%s owner=%s token=%d", *args, self._job_id, self._owner, self.token, extra=extra)

    def debug(self, msg: str, *args: Any) -> None:
        self._emit(logging.DEBUG, msg, args)

    def info(self, msg: str, *args: Any) -> None:
        self._emit(logging.INFO, msg, args)

    def warning(self, msg: str, *args: Any) -> None:
        self._emit(logging.WARNING, msg, args)

    def error(self, msg: str, *args: Any) -> None:
        self._emit(logging.ERROR, msg, args)


# A run's phases, as in the Go runner: running → (stopping →) releasing.
_RUNNING, _STOPPING, _RELEASING = "running", "stopping", "releasing"
# Whether, and how, the lease was lost: it decides the release.
_NOT_LOST, _LOST_DEADLINE, _LOST_CONFLICT = "not lost", "deadline", "conflict"


class _Run:
    """One run between its acquire and its report. The job runs in the
    calling thread, the watcher (heartbeats, deadline, max run time) in a
    thread of its own; both hold ``cond`` to touch the state."""

    def __init__(self, runner: Runner, lease: Lease, owner: str, sent: float, max_run_time: Optional[float], log: _Logger) -> None:
        self.r = runner
        self.lease = lease
        self.owner = owner
        self.log = log
        log.token = lease.token
        self.max_run_time = max_run_time
        self.cond = threading.Condition()
        self.valid_until = self._valid_until(sent, lease)
        self.start = time.monotonic()
        self.started_at = datetime.now(timezone.utc)
        self.next_heartbeat = self.start + runner.heartbeat_interval
        self.heartbeat_backoff = runner.heartbeat_interval / 8
        self.phase = _RUNNING
        self.loss = _NOT_LOST
        self.cause: Optional[BaseException] = None
        self.give_up_at = 0.0
        self.requested_stop: Optional[BaseException] = None
        self.job_done = False
        self.report: Optional[RunReport] = None
        self.ctx = RunContext(lease, owner, runner.margin / 2, runner._log)
        log.debug("lease acquired, tick %s", format_time(lease.tick) if lease.tick else "none")

    def _valid_until(self, sent: float, lease: Lease) -> float:
        # The service set expiresAt = its now + ttl after it received the
        # request, so the lease is ours until at least sent + ttl by our clock.
        ttl = lease.ttl if lease.ttl > 0 else self.r.ttl
        return sent + ttl - self.r.margin

    def stop_now(self, cause: BaseException) -> None:
        """Asks the watcher to stop the job (shutdown)."""
        with self.cond:
            if self.requested_stop is None:
                self.requested_stop = cause
            self.cond.notify_all()

    def abort(self, cause: BaseException) -> RunReport:
        """Releases the lease failed without running the job."""
        with self.cond:
            self.cause = cause
        return self.finish(None)

    def execute(self, fn: Callable[[RunContext], Any]) -> RunReport:
        if time.monotonic() >= self.valid_until:
            # The grant's answer came after its local deadline (the process
            # was paused meanwhile): another replica may hold it; don't start.
            with self.cond:
                self.loss, self.cause = _LOST_DEADLINE, DeadlinePassed("the acquire was answered after the lease's local deadline")
            return self.finish(None)
        watcher = threading.Thread(target=self.watch, name=f"leaseapi-heartbeat-{self.lease.job_id}", daemon=True)
        watcher.start()
        value: Any = None
        error: Optional[BaseException] = None
        token = _current.set(self.ctx)
        try:
            value = fn(self.ctx)
        except BaseException as err:  # noqa: B902 - released failed, re-raised below if not an Exception
            error = err
            if isinstance(err, Exception):
                self.log.warning("job raised %s: %s", type(err).__name__, err)
        finally:
            _current.reset(token)
            with self.cond:
                self.job_done = True
                self.cond.notify_all()
            watcher.join()
        report = self.job_returned(error, value)
        if error is not None and not isinstance(error, Exception):
            raise error  # KeyboardInterrupt, SystemExit: after the release
        return report

    def job_returned(self, error: Optional[BaseException], value: Any) -> RunReport:
        with self.cond:
            if self.report is not None:
                # Abandoned: the watcher released the lease without the job.
                return dataclasses.replace(self.report, ended_at=datetime.now(timezone.utc))
            now = time.monotonic()
            if self.loss != _NOT_LOST:
                pass
            elif now >= self.valid_until:
                # It finished, but after the lease could have passed to
                # another replica: it cannot claim the tick.
                self.loss, self.cause = _LOST_DEADLINE, DeadlinePassed("the job returned after the lease's local deadline")
            elif self.phase == _STOPPING:
                pass
            elif error is not None:
                self.cause = error
        return self.finish(value)

    def watch(self) -> None:
        """The watcher thread: heartbeats, the deadline, the max run time and
        shutdown, until the job returns or is given up."""
        while True:
            with self.cond:
                if self.job_done:
                    return
                now = time.monotonic()
                if self.phase == _STOPPING and now >= self.give_up_at:
                    self.log.warning("job abandoned: it did not return after it was told to stop (%s)", self.cause)
                    abandoned = Abandoned(f"{self.cause}; the job did not return after it was told to stop")
                    abandoned.__cause__ = self.cause
                    self.cause = abandoned
                    break
                beat = False
                if self.loss == _NOT_LOST and now >= self.valid_until:
                    self.loss = _LOST_DEADLINE
                    self._stop(now, DeadlinePassed("lease deadline passed without a successful heartbeat"))
                elif self.phase == _STOPPING:
                    pass
                elif self.requested_stop is not None:
                    self._stop(now, self.requested_stop)
                elif self.max_run_time is not None and now >= self.start + self.max_run_time:
                    self._stop(now, MaxRunTimeExceeded(f"job ran longer than its max run time of {self.max_run_time}s"))
                elif now >= self.next_heartbeat:
                    beat = True
                if not beat:
                    self.cond.wait(max(0.0, self._next_event() - now))
                    continue
            self.heartbeat(now)
        self.finish(None)

    def _stop(self, now: float, cause: BaseException) -> None:
        """Tells the job to stop (cond held), unless it is stopping already."""
        if self.phase == _STOPPING:
            return
        self.phase = _STOPPING
        self.cause = cause
        # Wait for the job until the lease would lapse anyway; a job that
        # lost its lease already gets the margin to return.
        self.give_up_at = self.valid_until
        if self.loss != _NOT_LOST or now >= self.give_up_at:
            self.give_up_at = now + self.r.margin
        self.log.info("job told to stop: %s", cause)
        self.ctx._signal_stop(cause)

    def _next_event(self) -> float:
        if self.phase == _STOPPING:
            return self.give_up_at
        nxt = min(self.valid_until, self.next_heartbeat)
        if self.max_run_time is not None:
            nxt = min(nxt, self.start + self.max_run_time)
        return nxt

    def heartbeat(self, now: float) -> None:
        """Sends one heartbeat (without holding cond) and records its result."""
        r = self.r
        timeout = max(0.001, min(r.request_timeout, self.valid_until - now))
        item = HeartbeatItem(self.lease.job_id, self.lease.token, owner=self.owner, ttl=r.ttl)
        try:
            if r.batch:
                _, lease = _batchers_of(r.client, r._log).heartbeats.call(item, timeout)
            else:
                _, lease = _heartbeat_single(r.client, item, timeout)
        except (errors.LeaseLost, errors.NotFound) as err:
            # Revoked, or expired and taken over: another replica may run
            # the job now, so this one must stop and has nothing to release.
            with self.cond:
                self.loss = _LOST_CONFLICT
                self.log.warning("lease lost: %s", err)
                self._stop(time.monotonic(), err)
            return
        except errors.LeaseError as err:
            # Unknown outcome: retry soon; the deadline decides when to give up.
            with self.cond:
                self.next_heartbeat = time.monotonic() + _jitter(self.heartbeat_backoff)
                self.heartbeat_backoff = min(2 * self.heartbeat_backoff, r.heartbeat_interval / 2)
            self.log.warning("heartbeat failed, retrying: %s", err)
            return
        with self.cond:
            self.valid_until = max(self.valid_until, self._valid_until(now, lease))
            self.next_heartbeat = now + r.heartbeat_interval
            self.heartbeat_backoff = r.heartbeat_interval / 8
        self.log.debug("heartbeat, lease valid for %.2fs", self.valid_until - time.monotonic())

    def finish(self, value: Any) -> RunReport:
        """Decides the result, releases the lease as the loss allows, and
        reports the run (from the job's thread, or the watcher's when the job
        was abandoned)."""
        with self.cond:
            self.phase = _RELEASING
            loss, cause, valid_until = self.loss, self.cause, self.valid_until
        result = LOST if loss != _NOT_LOST else FAILED if cause is not None else SUCCEEDED
        release_error: Optional[errors.LeaseError] = None
        if loss != _LOST_CONFLICT:
            outcome = "succeeded" if result == SUCCEEDED else "failed"
            # While the lease is ours the release is retried until the
            # deadline; after it, it is sent once in case it still is.
            retry_for = max(0.0, valid_until - time.monotonic()) if loss == _NOT_LOST else 0.0
            try:
                self.r.client.release(self.lease.job_id, self.owner, self.lease.token, outcome=outcome, retry_for=retry_for, timeout=self.r.request_timeout)
            except errors.LeaseError as err:
                if result == SUCCEEDED:
                    # Not acknowledged: the tick may run again elsewhere.
                    result, cause = LOST, err
                self.log.warning("release failed, the lease expires by its TTL: %s", err)
                release_error = err
        report = RunReport(
            job_id=self.lease.job_id,
            owner=self.owner,
            token=self.lease.token,
            tick=self.lease.tick,
            started_at=self.started_at,
            ended_at=datetime.now(timezone.utc),
            result=result,
            error=None if result == SUCCEEDED else cause,
            release_error=release_error,
            value=value if result == SUCCEEDED else None,
            slot=self.lease.slot,
            slot_token=self.lease.slot_token,
        )
        if result == SUCCEEDED:
            self.log.info("run finished: succeeded")
        else:
            self.log.info("run finished: %s (%s)", result, report.error)
        with self.cond:
            self.report = report
        return report


# The placeholder of a job whose acquire is on its way.
_PENDING: Any = object()


def _acquire_single(client: Client, item: AcquireItem, timeout: float) -> Tuple[float, Lease]:
    """The acquire of item as a single call, once; returns its send time
    and the lease."""
    sent = time.monotonic()
    lease = client.acquire(
        item.job_id,
        item.owner or "",
        ttl=item.ttl,
        tick=item.tick,
        nearest_tick=item.nearest_tick,
        schedule=item.schedule,
        grace=item.grace,
        catch_up=item.catch_up,
        catch_up_window=item.catch_up_window,
        group=item.group,
        min_interval=item.min_interval,
        retry_for=0,
        timeout=timeout,
    )
    return sent, lease


def _heartbeat_single(client: Client, item: HeartbeatItem, timeout: float) -> Tuple[float, Lease]:
    """The heartbeat of item as a single call, once."""
    sent = time.monotonic()
    return sent, client.heartbeat(item.job_id, item.owner or "", item.token, ttl=item.ttl, retry_for=0, timeout=timeout)


class _Call:
    """One acquire or heartbeat waiting in a _Batcher for its answer."""

    def __init__(self, item: Union[AcquireItem, HeartbeatItem], timeout: float) -> None:
        self.item = item
        self.timeout = timeout
        self.done = threading.Event()
        # Set with done: the batch's send time and the item's result, or
        # single when the call is to be sent alone.
        self.sent = 0.0
        self.result: Union[Lease, BaseException, None] = None
        self.single = False


class _Batcher:
    """Group commit of one batch route: while a batch is at leaseapi,
    further calls queue; when it returns, the queue goes as the next batch
    (at most MAX_BATCH_ITEMS, one per job: a second call of a job waits for
    the next). No timer: a call that finds nothing in flight goes at once.
    The sender is a thread that lives while calls queue."""

    def __init__(self, owner: "_Batchers", route: str, send: Callable[[List[Any], float], List[BatchResult]], single: Callable[[Client, Any, float], Tuple[float, Lease]]) -> None:
        self._owner = owner
        self._route = route
        self._send = send
        self._single = single
        self._lock = threading.Lock()
        self._queue: List[_Call] = []
        self._sending = False

    def call(self, item: Union[AcquireItem, HeartbeatItem], timeout: float) -> Tuple[float, Lease]:
        """The send time and lease of item, as its single call with
        retry_for=0 and timeout would return them, or what it would raise;
        answered in at most timeout seconds."""
        if self._owner.single_only:
            return self._single(self._owner.client, item, timeout)
        call = _Call(item, timeout)
        with self._lock:
            self._queue.append(call)
            if not self._sending:
                self._sending = True
                threading.Thread(target=self._send_batches, name=f"leaseapi-batch{self._route.replace('/', '-')}", daemon=True).start()
        if not call.done.wait(timeout):
            with self._lock:
                queued = call in self._queue
                if queued:
                    self._queue.remove(call)
            what = "was not sent" if queued else "got no answer"
            raise errors.ConnectionFailed(f"POST {self._owner.client.url}{self._route}: the batch of job {item.job_id} {what} within {timeout:.3f}s")
        if call.single:
            return self._single(self._owner.client, item, timeout)
        if isinstance(call.result, BaseException):
            raise call.result
        assert isinstance(call.result, Lease)
        return call.sent, call.result

    def _send_batches(self) -> None:
        while True:
            with self._lock:
                batch: List[_Call] = []
                rest: List[_Call] = []
                jobs = set()
                for call in self._queue:
                    if len(batch) < MAX_BATCH_ITEMS and call.item.job_id not in jobs:
                        jobs.add(call.item.job_id)
                        batch.append(call)
                    else:
                        rest.append(call)
                self._queue = rest
                if not batch:
                    self._sending = False
                    return
            if self._owner.single_only:
                # Batching stopped while these queued: each goes alone.
                for call in batch:
                    call.single = True
                    call.done.set()
                continue
            self._send_one(batch)

    def _send_one(self, batch: List[_Call]) -> None:
        """Sends batch and answers each of its calls, whatever happens. A
        batch of one is sent as its single call (the same answer, from a
        route that costs leaseapi less), from this thread, so that further
        calls queue meanwhile."""
        if len(batch) == 1:
            call = batch[0]
            try:
                call.sent, call.result = self._single(self._owner.client, call.item, call.timeout)
            except BaseException as err:  # noqa: B902 - the caller raises it
                call.sent, call.result = time.monotonic(), err
            call.done.set()
            return
        sent = time.monotonic()
        try:
            results: List[Any] = self._send([c.item for c in batch], min(c.timeout for c in batch))
        except errors.LeaseError as err:
            if err.status in (404, 405):
                # A leaseapi without the batch routes: single calls for good.
                self._owner.stop_batching(err)
                results = [None] * len(batch)
            elif isinstance(err, errors.InvalidRequest):
                # Refused as a whole (one item the request cannot carry):
                # each goes alone and gets its own answer.
                results = [None] * len(batch)
            else:
                # No answer, or one for every item (401, 503): each call
                # gets it, as its single call would have.
                results = [copy.copy(err) for _ in batch]
        except ValueError:
            results = [None] * len(batch)  # each call raises its own
        except BaseException as err:  # noqa: B902 - never leave a caller waiting
            results = [err] * len(batch)
        for call, result in zip(batch, results):
            call.sent, call.result, call.single = sent, result, result is None
            call.done.set()


class _Batchers:
    """The batchers of one Client in this process, shared by its runners:
    the jobs of every runner that fire at one tick go together."""

    def __init__(self, client: Client, log: logging.Logger) -> None:
        self.client = client
        self._log = log
        self.single_only = False
        self.acquires = _Batcher(self, "/acquire", lambda items, timeout: client.acquire_batch(items, retry_for=0, timeout=timeout), _acquire_single)
        self.heartbeats = _Batcher(self, "/heartbeat", lambda items, timeout: client.heartbeat_batch(items, retry_for=0, timeout=timeout), _heartbeat_single)

    def stop_batching(self, err: errors.LeaseError) -> None:
        if not self.single_only:
            self.single_only = True
            self._log.info("leaseapi at %s does not serve batches (%s): sending single calls from now on", self.client.url, err)


_batchers_lock = threading.Lock()
_batchers: "weakref.WeakKeyDictionary[Client, _Batchers]" = weakref.WeakKeyDictionary()


def _batchers_of(client: Client, log: logging.Logger) -> _Batchers:
    with _batchers_lock:
        found = _batchers.get(client)
        if found is None:
            found = _batchers[client] = _Batchers(client, log)
        return found


def _forget_batchers() -> None:
    # A forked child (a Celery prefork worker) has none of its parent's
    # sender threads: it starts with batchers of its own.
    global _batchers_lock, _batchers
    _batchers_lock = threading.Lock()
    _batchers = weakref.WeakKeyDictionary()


os.register_at_fork(after_in_child=_forget_batchers)
