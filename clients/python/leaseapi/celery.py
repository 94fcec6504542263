"""Celery beat run on every replica, each tick run once.

Run beat on every replica (``celery worker -B``, or a beat next to each
worker group) with the same schedule, and give the scheduled tasks the base
:class:`LeasedTask`: every beat sends the task at every tick, and the task
runs only where it wins the tick's lease::

    from leaseapi.celery import LeasedTask

    @app.task(base=LeasedTask, lease_client=client, lease_schedule="*/5 * * * *")
    def refresh_cache():
        ...

    app.conf.beat_schedule = {"refresh-cache": {"task": refresh_cache.name, "schedule": crontab(minute="*/5")}}

The task's attributes (set as ``app.task`` options): ``lease_client`` (a
:class:`leaseapi.Client`, required), ``lease_schedule`` (the cron spec the
beat entry fires at, required), ``lease_job`` (the job id, default the task's
name), ``lease_ttl`` (seconds, default 30), ``lease_grace``,
``lease_max_run_time``, ``lease_owner`` (default ``<hostname>/<pid>`` of the
process that runs the task). A task that does not win its tick returns None
without running; one that runs behaves as :func:`leaseapi.leased` says.
Celery itself is imported only by this module.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import celery

from .client import Client
from .decorator import run_leased
from .models import Seconds
from .runner import Runner

__all__ = ["LeasedTask"]


class LeasedTask(celery.Task):  # type: ignore[misc]
    """A Celery task base whose runs are leased per tick (see the module)."""

    lease_client: Optional[Client] = None
    lease_schedule: Optional[str] = None
    lease_job: Optional[str] = None
    lease_ttl: Seconds = 30.0
    lease_grace: Optional[Seconds] = None
    lease_max_run_time: Optional[Seconds] = None
    lease_owner: Optional[str] = None

    # A runner per process: a prefork child must not use threads and locks
    # made before the fork.
    _lease_runners: Dict[int, Runner]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.lease_client is None or not self.lease_schedule:
            raise TypeError(f"task {self.name}: LeasedTask needs lease_client and lease_schedule (app.task options)")
        job = self.lease_job or self.name
        return run_leased(self._lease_runner(), job, self.lease_schedule, self.lease_grace, self.lease_max_run_time, lambda: super(LeasedTask, self).__call__(*args, **kwargs))

    def _lease_runner(self) -> Runner:
        runners = self.__dict__.setdefault("_lease_runners", {})
        pid = os.getpid()
        if pid not in runners:
            assert self.lease_client is not None
            runners.clear()
            runners[pid] = Runner(self.lease_client, self.lease_owner, ttl=self.lease_ttl)
        return runners[pid]
