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
``lease_catch_up``, ``lease_catch_up_window``, ``lease_max_run_time``,
``lease_group`` (the job's concurrency group: a tick it keeps full is
skipped), ``lease_owner`` (default ``<hostname>/<pid>`` of the process that runs the
task), ``lease_batch`` (default True: the acquires and heartbeats of the
tasks a process runs at once go in batches; False sends single calls). A task that does not win its tick returns None without running; one
that runs behaves as :func:`leaseapi.leased` says.

The ticks a task's job owes (a catch-up tick, or run now: ``leasectl
trigger``) are claimed by each worker process that runs tasks: when it
starts (prefork children and the solo pool; other pools at the task's first
run) its runner polls them (:meth:`leaseapi.Runner.watch_owed`) and runs the
task's body without arguments in a thread of that process, outside the
broker, every ``lease_owed_poll_interval`` seconds (default 10, jittered).
Set ``lease_owed = False`` on a task that needs arguments. The
runners stop polling when the worker (process) shuts down. Celery itself is
imported only by this module.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import celery
from celery import signals

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
    lease_catch_up: Optional[str] = None
    lease_catch_up_window: Optional[Seconds] = None
    lease_owed: bool = True
    lease_owed_poll_interval: Seconds = 10.0
    lease_max_run_time: Optional[Seconds] = None
    lease_group: Optional[str] = None
    lease_owner: Optional[str] = None
    lease_batch: bool = True

    # A runner per process: a prefork child must not use threads and locks
    # made before the fork.
    _lease_runners: Dict[int, Runner]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.lease_client is None or not self.lease_schedule:
            raise TypeError(f"task {self.name}: LeasedTask needs lease_client and lease_schedule (app.task options)")
        return run_leased(self._lease_runner(), self._lease_job_id(), lambda: super(LeasedTask, self).__call__(*args, **kwargs), **self._lease_options())

    def _lease_job_id(self) -> str:
        return self.lease_job or self.name

    def _lease_options(self) -> Dict[str, Any]:
        return dict(
            schedule=self.lease_schedule,
            grace=self.lease_grace,
            catch_up=self.lease_catch_up,
            catch_up_window=self.lease_catch_up_window,
            max_run_time=self.lease_max_run_time,
            group=self.lease_group,
        )

    def _lease_runner(self) -> Runner:
        """This process's runner of the task, made at its first use, which
        registers the task's owed ticks with it."""
        runners = self.__dict__.setdefault("_lease_runners", {})
        pid = os.getpid()
        if pid not in runners:
            assert self.lease_client is not None
            runners.clear()
            runner = Runner(self.lease_client, self.lease_owner, ttl=self.lease_ttl, owed_poll_interval=self.lease_owed_poll_interval, batch=self.lease_batch)
            runners[pid] = runner
            if self.lease_owed:
                runner.watch_owed(self._lease_job_id(), lambda _ctx: super(LeasedTask, self).__call__(), **self._lease_options())
        return runners[pid]


def _leased_tasks() -> Any:
    """The LeasedTasks of the current app that are configured."""
    for task in list(celery.current_app.tasks.values()):
        if isinstance(task, LeasedTask) and task.lease_client is not None and task.lease_schedule:
            yield task


@signals.worker_process_init.connect  # type: ignore[misc]
def _watch_owed_ticks(**_: Any) -> None:
    # A process that runs tasks (a prefork child, the solo pool's worker)
    # polls its tasks' owed ticks from its start, not from their first run.
    for task in _leased_tasks():
        task._lease_runner()


@signals.worker_shutdown.connect  # type: ignore[misc]
@signals.worker_process_shutdown.connect  # type: ignore[misc]
def _stop_runners(**_: Any) -> None:
    for task in _leased_tasks():
        runner = task.__dict__.get("_lease_runners", {}).get(os.getpid())
        if runner is not None:
            runner.shutdown()
