"""``leased``: a function that a scheduler runs on every replica, run once
per tick under a lease (APScheduler 3, or anything that calls a function at
the job's times)."""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Optional, TypeVar, cast

from . import errors
from .client import Client
from .models import Seconds
from .runner import Runner

__all__ = ["leased", "run_leased"]

F = TypeVar("F", bound=Callable[..., Any])


def leased(
    client: Client,
    job: str,
    schedule: Optional[str] = None,
    owner: Optional[str] = None,
    *,
    ttl: Seconds = 30.0,
    grace: Optional[Seconds] = None,
    catch_up: Optional[str] = None,
    catch_up_window: Optional[Seconds] = None,
    max_run_time: Optional[Seconds] = None,
    group: Optional[str] = None,
    runner: Optional[Runner] = None,
    logger: Optional[logging.Logger] = None,
    owed: bool = True,
    batch: bool = True,
) -> Callable[[F], F]:
    """Decorates the function a scheduler runs at every tick of ``schedule``
    on every replica, so that each tick runs on one of them::

        @leaseapi.leased(client, "nightly-report", schedule="0 2 * * *")
        def nightly_report():
            ...

        scheduler.add_job(nightly_report, CronTrigger.from_crontab("0 2 * * *", timezone="UTC"))

    ``schedule`` is the job's cron spec as leaseapi reads it (five fields,
    six with leading seconds, ``@every D``; UTC unless it starts with
    ``CRON_TZ=``): the same times the scheduler fires at. It is required: the
    scheduler does not tell the function which tick it fires for, so the
    acquire asks the service for the tick of the schedule nearest to its
    clock, and sends the schedule (and ``grace``) so that a tick no replica
    started is recorded missed; ``catch_up="latest"`` (and
    ``catch_up_window``) makes the job owe the latest missed tick once.
    ``group`` puts the job in a concurrency group: a tick whose group stays
    full while the tick is within its grace is skipped like a tick another
    replica won.

    A call that wins the tick runs the function under the lease, with
    heartbeats, and returns what it returns; :func:`leaseapi.current_run`
    gives the function its lease, token and ``stop`` event. A call that does
    not win (another replica has the tick, it ran, or the job is paused)
    returns None without running it. A function that raises, or a run that
    lost its lease, raises (the lease released ``failed``), so the
    scheduler logs it. ``owner``, ``ttl``, ``logger`` and ``batch`` configure
    the :class:`Runner` made for the function, unless ``runner`` is given.
    The runners of one :class:`Client` send their acquires and heartbeats in
    batches (see :class:`Runner`), so the functions that fire at one tick
    take one or two requests; ``batch=False`` sends single calls.

    The ticks the job owes (a catch-up tick, or run now: ``leasectl
    trigger``) are claimed by the runner's owed-tick poll
    (:meth:`Runner.watch_owed`), which calls the function without arguments
    in a thread of its own; ``owed=False`` leaves them to other replicas (a
    function that needs the scheduler's arguments).
    """
    if not schedule:
        raise ValueError(f"leased({job!r}) needs the job's schedule: the service picks the tick from it and records the ticks no replica started")
    if runner is None:
        runner = Runner(client, owner, ttl=ttl, logger=logger, batch=batch)
    the_runner = runner
    options = dict(schedule=schedule, grace=grace, catch_up=catch_up, catch_up_window=catch_up_window, max_run_time=max_run_time, group=group)

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return run_leased(the_runner, job, lambda: fn(*args, **kwargs), **options)

        if owed:
            the_runner.watch_owed(job, lambda _ctx: fn(), **options)

        wrapper.runner = the_runner  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorate


def run_leased(runner: Runner, job: str, call: Callable[[], Any], **options: Any) -> Any:
    """Runs ``call`` under the lease of the tick of ``options["schedule"]``
    nearest to the service's clock (``options`` are :meth:`Runner.run`'s):
    its value when it ran and succeeded, None when the tick was not this
    replica's (a quiet skip); raises why a run did not succeed."""
    try:
        report = runner.run(job, lambda _ctx: call(), nearest_tick=True, **options)
    except errors.NotAcquired:
        return None
    if report.error is not None:
        raise report.error
    return report.value
