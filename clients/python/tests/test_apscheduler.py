"""Three APScheduler processes, one job every second, each run leased with
leaseapi.leased: each tick runs exactly once, and a replica killed mid-run is
taken over once its TTL has passed."""

from __future__ import annotations

from pathlib import Path

import leaseapi
from conftest import Processes, Recorder, Server, wait_until
from replicas import Replicas, run_window_and_check_each_tick_once

WINDOW = 15  # seconds of ticks counted
TTL = 3.0


def start(processes: Processes, recorder: Recorder, server: Server, tmp_path: Path, job: str, work: float) -> Replicas:
    replicas = Replicas(
        processes, recorder, server, tmp_path, ["aps-1", "aps-2", "aps-3"], ["apscheduler_replica.py"], {"TEST_JOB": job, "TEST_WORK": str(work), "TEST_TTL": str(TTL)}
    )
    replicas.wait_ready(processes)
    return replicas


def test_three_apschedulers_run_each_tick_once(processes: Processes, recorder: Recorder, server: Server, admin: leaseapi.Client, tmp_path: Path, job_id: str) -> None:
    replicas = start(processes, recorder, server, tmp_path, job_id, work=0.3)
    run_window_and_check_each_tick_once(replicas, processes, admin, job_id, WINDOW)


def test_a_killed_apscheduler_is_taken_over_after_its_ttl(processes: Processes, recorder: Recorder, server: Server, admin: leaseapi.Client, tmp_path: Path, job_id: str) -> None:
    # Runs take longer than the test: the one killed is surely mid-run.
    replicas = start(processes, recorder, server, tmp_path, job_id, work=120)
    wait_until("a run started", lambda: bool(replicas.events("start")), 60)
    first = replicas.events("start")[0]
    victim = next(name for name, p in replicas.procs.items() if p.pid == first["pid"])
    replicas.procs[victim].kill()

    def taken_over() -> bool:
        return any(r.owner != first["owner"] and r.token is not None and r.token > first["token"] for r in admin.runs(job_id, limit=100))

    wait_until("another replica took the job over", taken_over, 60, interval=0.2)
    runs = {r.token: r for r in admin.runs(job_id, limit=100) if r.token is not None}
    killed, takeover = runs[first["token"]], runs[first["token"] + 1]
    assert killed.owner == first["owner"] and killed.outcome == "expired", f"the killed run: {killed}"
    assert takeover.owner != first["owner"] and takeover.started_at is not None and killed.ended_at is not None
    # By the database's clock: the takeover was granted when the killed
    # holder's lease had expired (endedAt of an expired run is its expiry).
    assert takeover.started_at >= killed.ended_at, f"taken over at {takeover.started_at}, before the lease expired at {killed.ended_at}"
    replicas.stop(processes)
