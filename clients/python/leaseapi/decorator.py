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
    max_run_time: Optional[Seconds] = None,
    runner: Optional[Runner] = None,
    logger: Optional[logging.Logger] = None,
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
    started is recorded missed.

    A call that wins the tick runs the function under the lease, with
    heartbeats, and returns what it returns; :func:`leaseapi.current_run`
    gives the function its lease, token and ``stop`` event. A call that does
    not win (another replica has the tick, it ran, or the job is paused)
    returns None without running it. A function that raises, or a run that
    lost its lease, raises (the lease released ``failed``), so the
    scheduler logs it. ``owner``, ``ttl`` and ``logger`` configure the
    :class:`Runner` made for the function, unless ``runner`` is given.
    """
    if not schedule:
        raise ValueError(f"leased({job!r}) needs the job's schedule: the service picks the tick from it and records the ticks no replica started")
    if runner is None:
        runner = Runner(client, owner, ttl=ttl, logger=logger)
    the_runner = runner

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return run_leased(the_runner, job, schedule, grace, max_run_time, lambda: fn(*args, **kwargs))

        wrapper.runner = the_runner  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorate


def run_leased(
    runner: Runner,
    job: str,
    schedule: str,
    grace: Optional[Seconds],
    max_run_time: Optional[Seconds],
    call: Callable[[], Any],
) -> Any:
    """Runs ``call`` under the lease of the tick of ``schedule`` nearest to
    the service's clock: its value when it ran and succeeded, None when the
    tick was not this replica's (a quiet skip); raises why a run did not
    succeed."""
    try:
        report = runner.run(job, lambda _ctx: call(), nearest_tick=True, schedule=schedule, grace=grace, max_run_time=max_run_time)
    except errors.NotAcquired:
        return None
    if report.error is not None:
        raise report.error
    return report.value
