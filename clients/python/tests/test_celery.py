"""Three Celery workers with an embedded beat each (celery -B on every
replica) on one Redis broker: every beat sends the task at every tick, and
each tick runs once."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import leaseapi
from conftest import Processes, Recorder, Server
from replicas import Replicas, next_whole_second, runs_by_tick, started_by_tick, utcnow, whole_seconds

WINDOW = 15


def test_three_celery_beats_run_each_tick_once(processes: Processes, recorder: Recorder, server: Server, admin: leaseapi.Client, redis_url: str, tmp_path: Path, job_id: str) -> None:
    names = ["celery-1", "celery-2", "celery-3"]
    replicas = Replicas(processes, recorder, server, tmp_path, [], [], {})
    for name in names:
        r = Replicas(
            processes,
            recorder,
            server,
            tmp_path,
            [name],
            ["-m", "celery", "-A", "celery_app", "worker", "-B", "--pool=solo", "--hostname", f"{name}@%h", "--loglevel=WARNING", "--schedule", str(tmp_path / f"beat-{name}")],
            {"TEST_BROKER": redis_url, "TEST_JOB": job_id},
        )
        replicas.procs.update(r.procs)
        replicas.records.update(r.records)
    replicas.wait_ready(processes)
    window_start = next_whole_second(utcnow(), plus=2)
    window_end = window_start + timedelta(seconds=WINDOW)
    # The test's length, not a synchronisation: the replicas run on their own.
    time.sleep(max(0.0, (window_end - utcnow()).total_seconds()) + 1.5)
    replicas.stop(processes)

    ticks = whole_seconds(window_start, window_end)
    runs = runs_by_tick(admin, job_id)
    started = started_by_tick(replicas)
    wrong = {t: [(r.owner, r.outcome) for r in runs.get(t, [])] for t in ticks if [r.outcome for r in runs.get(t, [])] != ["succeeded"]}
    assert not wrong, f"ticks that did not run exactly once (of {len(ticks)}): {wrong}\n{processes.tails()}"
    twice = {t: rs for t, rs in started.items() if len(rs) > 1}
    assert not twice, f"ticks a replica started more than once: {twice}"
    assert all(len(started.get(t, [])) == 1 for t in ticks), "a tick the service recorded as run was not started by a replica"
