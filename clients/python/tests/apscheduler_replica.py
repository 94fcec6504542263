"""A replica of the APScheduler tests: one job every second, each run
leased, until SIGTERM. Settings from the environment: TEST_LEASEAPI_URL,
TEST_LEASEAPI_TOKEN, TEST_EXCHANGES, TEST_RECORDS, TEST_JOB, TEST_WORK
(seconds a run takes), TEST_TTL."""

from __future__ import annotations

import logging
import os
import signal
import threading

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

import leaseapi
from replica_common import JSONLines, client_from_env, record_run


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    client = client_from_env()
    records = JSONLines(os.environ["TEST_RECORDS"])
    work = float(os.environ["TEST_WORK"])

    # What the README shows: the decorator on the function APScheduler runs.
    @leaseapi.leased(client, os.environ["TEST_JOB"], schedule="* * * * * *", ttl=float(os.environ["TEST_TTL"]))
    def job() -> None:
        record_run(records, "start")
        run = leaseapi.current_run()
        assert run is not None
        stopped = run.stop.wait(work)
        record_run(records, "stopped" if stopped else "end")

    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_job(job, CronTrigger(second="*", timezone="UTC"), max_instances=1, misfire_grace_time=1, coalesce=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    scheduler.start()
    records.write({"event": "ready", "pid": os.getpid()})
    stop.wait()
    job.runner.shutdown()  # type: ignore[attr-defined]
    scheduler.shutdown(wait=True)


if __name__ == "__main__":
    main()
