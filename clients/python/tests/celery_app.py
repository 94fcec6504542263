"""The Celery app of the Celery beat test: every replica runs a worker with
an embedded beat (``celery -A celery_app worker -B``) on one Redis broker,
and the beat entry fires every second. Settings from the environment:
TEST_BROKER, TEST_LEASEAPI_URL, TEST_LEASEAPI_TOKEN, TEST_EXCHANGES,
TEST_RECORDS, TEST_JOB, TEST_OWED_POLL (seconds between owed-tick polls,
default 10)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any

from celery import Celery
from celery.schedules import schedstate, schedule
from celery.signals import worker_ready

from leaseapi.celery import LeasedTask
from replica_common import JSONLines, client_from_env, record_run

app = Celery("celery_app", broker=os.environ["TEST_BROKER"])
app.conf.update(task_ignore_result=True, worker_hijack_root_logger=False, broker_connection_retry_on_startup=True, timezone="UTC", enable_utc=True)

client = client_from_env()
records = JSONLines(os.environ["TEST_RECORDS"])


# What the README shows: the task base, its job id and the schedule the beat
# entry fires at.
@app.task(base=LeasedTask, lease_client=client, lease_job=os.environ["TEST_JOB"], lease_schedule="* * * * * *", lease_ttl=3, lease_owed_poll_interval=float(os.environ.get("TEST_OWED_POLL", "10")))
def tick() -> None:
    record_run(records, "start")


class EverySecond(schedule):  # type: ignore[misc]
    """Fires at every whole second, as crontab() fires at whole minutes:
    the beats of all replicas fire at the same instants."""

    def __init__(self) -> None:
        super().__init__(run_every=timedelta(seconds=1))

    def __reduce__(self) -> Any:  # beat stores its entries with pickle
        return (self.__class__, ())

    def is_due(self, last_run_at: datetime) -> Any:
        now = datetime.now(timezone.utc)
        to_next = 1 - now.microsecond / 1e6
        last = last_run_at.astimezone(timezone.utc) if last_run_at.tzinfo else last_run_at.replace(tzinfo=timezone.utc)
        return schedstate(last.replace(microsecond=0) < now.replace(microsecond=0), to_next)


app.conf.beat_schedule = {"tick": {"task": tick.name, "schedule": EverySecond()}}


@worker_ready.connect  # type: ignore[misc]
def _ready(**_: Any) -> None:
    records.write({"event": "ready", "pid": os.getpid()})
