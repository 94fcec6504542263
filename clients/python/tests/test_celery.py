"""Three Celery workers with an embedded beat each (celery -B on every
replica) on one Redis broker: every beat sends the task at every tick, and
each tick runs once."""

from __future__ import annotations

from pathlib import Path

import leaseapi
from conftest import Processes, Recorder, Server
from replicas import Replicas, run_window_and_check_each_tick_once

WINDOW = 15


def test_three_celery_beats_run_each_tick_once(processes: Processes, recorder: Recorder, server: Server, admin: leaseapi.Client, redis_url: str, tmp_path: Path, job_id: str) -> None:
    replicas = Replicas(
        processes,
        recorder,
        server,
        tmp_path,
        ["celery-1", "celery-2", "celery-3"],
        ["-m", "celery", "-A", "celery_app", "worker", "-B", "--pool=solo", "--hostname", "{name}@%h", "--loglevel=WARNING", "--schedule", str(tmp_path / "beat-{name}")],
        {"TEST_BROKER": redis_url, "TEST_JOB": job_id},
    )
    replicas.wait_ready(processes)
    run_window_and_check_each_tick_once(replicas, processes, admin, job_id, WINDOW)
