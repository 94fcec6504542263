"""Three Celery workers with an embedded beat each (celery -B on every
replica) on one Redis broker: every beat sends the task at every tick, and
each tick runs once. Three workers that poll what their job owes run a
tick triggered with run now once."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List

import leaseapi
from conftest import START_TIMEOUT, Processes, Recorder, Server, wait_until
from leaseapi.models import parse_time
from replicas import Replicas, run_window_and_check_each_tick_once

WINDOW = 15


def start_workers(processes: Processes, recorder: Recorder, server: Server, tmp_path: Path, options: List[str], env: Dict[str, str]) -> Replicas:
    """Starts three solo-pool workers of celery_app with the extra options
    and environment, and waits until they are ready."""
    args = ["-m", "celery", "-A", "celery_app", "worker", "--pool=solo", "--hostname", "{name}@%h", "--loglevel=WARNING", *options]
    replicas = Replicas(processes, recorder, server, tmp_path, ["celery-1", "celery-2", "celery-3"], args, env)
    replicas.wait_ready(processes)
    return replicas


def test_three_celery_beats_run_each_tick_once(processes: Processes, recorder: Recorder, server: Server, admin: leaseapi.Client, redis_url: str, tmp_path: Path, job_id: str) -> None:
    replicas = start_workers(processes, recorder, server, tmp_path, ["-B", "--schedule", str(tmp_path / "beat-{name}")], {"TEST_BROKER": redis_url, "TEST_JOB": job_id})
    run_window_and_check_each_tick_once(replicas, processes, admin, job_id, WINDOW)


def test_a_triggered_tick_runs_once_on_one_of_three_celery_workers(
    processes: Processes, recorder: Recorder, server: Server, client: leaseapi.Client, admin: leaseapi.Client, redis_url: str, tmp_path: Path, job_id: str
) -> None:
    # Workers without a beat: the job runs only when it owes a tick.
    replicas = start_workers(processes, recorder, server, tmp_path, [], {"TEST_BROKER": redis_url, "TEST_JOB": job_id, "TEST_OWED_POLL": "0.2"})
    seed = client.acquire(job_id, "seed", ttl=1, tick=datetime(2026, 1, 1, tzinfo=timezone.utc))
    client.release(job_id, "seed", seed.token, outcome="succeeded")
    owed_tick = admin.trigger(job_id, "a test").owed_tick

    def ran() -> bool:
        return any(r.trigger == "manual" and r.outcome != "running" for r in admin.runs(job_id))

    wait_until("a worker ran the triggered tick", ran, START_TIMEOUT)
    # Every worker polls twice more after the run ended: a second claim,
    # had there been one, would have been made by then.
    after = {name: owed_polls(recorder, name) for name in replicas.procs}
    wait_until("every worker polled again", lambda: all(owed_polls(recorder, n) >= k + 2 for n, k in after.items()), START_TIMEOUT)
    replicas.stop(processes)

    starts = replicas.events("start")
    assert [parse_time(s["tick"]) for s in starts] == [owed_tick], f"the workers' runs: {starts}"
    # The claim registered the schedule: the ticks no beat sent are missed.
    runs = [(r.owner, r.tick, r.trigger, r.outcome) for r in admin.runs(job_id, limit=1000) if r.owner != "seed" and r.outcome != "missed"]
    assert runs == [(starts[0]["owner"], owed_tick, "manual", "succeeded")]


def owed_polls(recorder: Recorder, name: str) -> int:
    """The POST /owed calls the replica name made so far."""
    path = recorder.file_for(name)
    if not path.exists():
        return 0
    with open(path) as f:
        return sum(1 for line in f if line.endswith("\n") and '"path": "/owed"' in line)
