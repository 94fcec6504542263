"""The runner against a real leaseapi: results and releases, the quiet skip,
a revoked lease stopping the job (and its command: SIGTERM, then SIGKILL),
the local deadline, the max run time, abandonment and shutdown."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import signal
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, List

import pytest

import leaseapi
from conftest import Server, wait_until

TICK = datetime(2026, 11, 30, 7, 0, tzinfo=timezone.utc)
# Bounds every wait for a run in these tests.
BOUND = 60.0


def in_thread(fn: Callable[[], Any]) -> "concurrent.futures.Future[Any]":
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = pool.submit(fn)
    pool.shutdown(wait=False)
    return future


def start_run_until_stopped(runner: leaseapi.Runner, job_id: str) -> "concurrent.futures.Future[leaseapi.RunReport]":
    """Starts a run, in a thread, of a job that waits until it is told to
    stop; returns once the job runs."""
    started = threading.Event()

    def job(ctx: leaseapi.RunContext) -> None:
        started.set()
        assert ctx.stop.wait(BOUND), "the job was never told to stop"

    future = in_thread(lambda: runner.run(job_id, job, tick=TICK))
    assert started.wait(BOUND), future.result() if future.done() else "the job did not start"
    return future


def test_run_releases_succeeded_with_the_value(client: leaseapi.Client, job_id: str) -> None:
    runner = leaseapi.Runner(client, "replica-a", ttl=3)
    seen: List[leaseapi.RunContext] = []

    def job(ctx: leaseapi.RunContext) -> str:
        assert leaseapi.current_run() is ctx
        seen.append(ctx)
        return "done"

    report = runner.run(job_id, job, tick=TICK, schedule="0 7 * * *")
    assert (report.result, report.value, report.error, report.tick, report.owner) == ("succeeded", "done", None, TICK, "replica-a")
    assert seen[0].token == report.token and seen[0].job_id == job_id and not seen[0].stop.is_set()
    assert leaseapi.current_run() is None
    lease = client.get(job_id)
    assert (lease.state, lease.last_outcome, lease.last_completed_tick) == ("released", "succeeded", TICK)

    with pytest.raises(leaseapi.TickDone):
        runner.run(job_id, job, tick=TICK)
    assert len(seen) == 1, "a tick that ran is skipped without running the job"


def test_run_releases_failed_when_the_job_raises(client: leaseapi.Client, job_id: str) -> None:
    runner = leaseapi.Runner(client, "replica-a", ttl=3)

    def job(ctx: leaseapi.RunContext) -> None:
        raise RuntimeError("disk full")

    report = runner.run(job_id, job, tick=TICK)
    assert report.result == "failed" and isinstance(report.error, RuntimeError)
    assert client.get(job_id).last_outcome == "failed"


def test_a_held_tick_is_a_quiet_skip(client: leaseapi.Client, job_id: str) -> None:
    client.acquire(job_id, "replica-b", ttl=30, tick=TICK)
    ran = []
    with pytest.raises(leaseapi.LeaseHeld):
        leaseapi.Runner(client, "replica-a", ttl=3).run(job_id, lambda ctx: ran.append(ctx), tick=TICK)
    assert not ran


def test_a_tick_ahead_of_the_clock_is_skipped_and_logged(client: leaseapi.Client, job_id: str, caplog: pytest.LogCaptureFixture) -> None:
    # A host whose clock runs two days fast asks for a tick of the future:
    # refused (tick_ahead, the service's clock as now, no Retry-After),
    # nothing written, the job not run, and a warning says the clock is fast.
    ahead = datetime.now(timezone.utc) + timedelta(days=2)
    ran = []
    with caplog.at_level(logging.WARNING, logger="leaseapi"):
        with pytest.raises(leaseapi.TickAhead) as info:
            leaseapi.Runner(client, "replica-fast", ttl=3).run(job_id, lambda ctx: ran.append(ctx), tick=ahead)
    err = info.value
    assert not ran and isinstance(err, leaseapi.NotAcquired)
    assert (err.status, err.code, err.retry_after, err.lease) == (409, "tick_ahead", None, None)
    assert err.now is not None and err.now < ahead - timedelta(days=1)
    assert [r for r in caplog.records if "clock is fast" in r.getMessage() and " s fast" in r.getMessage()], caplog.text
    with pytest.raises(leaseapi.NotFound):
        client.get(job_id)


def test_revoked_lease_stops_the_job(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    runner = leaseapi.Runner(client, "replica-a", ttl=3)
    future = start_run_until_stopped(runner, job_id)
    admin.revoke(job_id)
    report = future.result(BOUND)
    assert report.result == "lost" and isinstance(report.error, leaseapi.LeaseLost) and report.release_error is None
    lease = client.get(job_id)
    assert lease.state == "revoked" and lease.last_outcome == "revoked"


@pytest.mark.parametrize("ignores_term", [False, True], ids=["terminated", "killed"])
def test_revoked_lease_stops_the_command(client: leaseapi.Client, admin: leaseapi.Client, job_id: str, tmp_path: Path, ignores_term: bool) -> None:
    runner = leaseapi.Runner(client, "replica-a", ttl=3)
    pid_file, term_file = tmp_path / "pid", tmp_path / "term"
    trap = "trap '' TERM" if ignores_term else f"trap 'echo term > {term_file}; exit 143' TERM"
    script = f"{trap}; echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; sleep 600 & wait"

    def job(ctx: leaseapi.RunContext) -> None:
        ctx.run_process(["sh", "-c", script])  # kill_grace: half the margin, 0.15 s

    future = in_thread(lambda: runner.run(job_id, job, tick=TICK))
    wait_until("the command started", lambda: pid_file.exists() or future.done(), BOUND)
    assert not future.done(), future.result()
    pid = int(pid_file.read_text())
    admin.revoke(job_id)
    report = future.result(BOUND)
    assert report.result == "lost" and isinstance(report.error, leaseapi.LeaseLost)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert term_file.exists() != ignores_term, "SIGTERM first; SIGKILL only for a command that ignores it"


def test_command_exit_status_decides_the_outcome(client: leaseapi.Client, job_id: str) -> None:
    runner = leaseapi.Runner(client, "replica-a", ttl=3)
    report = runner.run(job_id, lambda ctx: ctx.run_process(["sh", "-c", 'test "$LEASE_TOKEN" = "$1" && test "$LEASE_JOB" = "$2"', "sh", "1", job_id]), tick=TICK)
    assert report.result == "succeeded" and report.value.returncode == 0
    failed = runner.run(job_id + ".f", lambda ctx: ctx.run_process(["sh", "-c", "exit 3"]), tick=TICK)
    assert failed.result == "failed" and failed.error.returncode == 3
    assert client.get(job_id + ".f").last_outcome == "failed"


def test_deadline_without_heartbeats_stops_the_job(server: Server, client: leaseapi.Client, job_id: str) -> None:
    runner = leaseapi.Runner(client, "replica-a", ttl=2)
    future = start_run_until_stopped(runner, job_id)
    server.process.proc.send_signal(signal.SIGSTOP)  # leaseapi stops answering
    try:
        report = future.result(BOUND)
    finally:
        server.process.proc.send_signal(signal.SIGCONT)
    assert report.result == "lost" and isinstance(report.error, leaseapi.DeadlinePassed)
    assert isinstance(report.release_error, leaseapi.ConnectionFailed), "after the deadline the release is tried once"


def test_max_run_time_stops_the_job_and_releases_failed(client: leaseapi.Client, job_id: str) -> None:
    runner = leaseapi.Runner(client, "replica-a", ttl=3)

    def job(ctx: leaseapi.RunContext) -> None:
        assert ctx.stop.wait(BOUND)
        assert isinstance(ctx.cause, leaseapi.MaxRunTimeExceeded)

    report = runner.run(job_id, job, tick=TICK, max_run_time=0.2)
    assert report.result == "failed" and isinstance(report.error, leaseapi.MaxRunTimeExceeded)
    assert client.get(job_id).last_outcome == "failed"


def test_a_job_that_ignores_stop_is_abandoned_and_released_failed(client: leaseapi.Client, job_id: str) -> None:
    runner = leaseapi.Runner(client, "replica-a", ttl=2)
    started, let_go = threading.Event(), threading.Event()
    future = in_thread(lambda: runner.run(job_id, lambda ctx: (started.set(), let_go.wait(BOUND)), tick=TICK, max_run_time=0.2))
    try:
        assert started.wait(BOUND)
        # The runner gives the lease up while the job still runs.
        wait_until("the lease released", lambda: client.get(job_id).state == "released", BOUND, interval=0.2)
        assert client.get(job_id).last_outcome == "failed"
    finally:
        let_go.set()
    report = future.result(BOUND)
    assert report.result == "failed" and isinstance(report.error, leaseapi.Abandoned)


def test_shutdown_stops_running_jobs_and_refuses_new_runs(client: leaseapi.Client, job_id: str) -> None:
    runner = leaseapi.Runner(client, "replica-a", ttl=3)
    future = start_run_until_stopped(runner, job_id)
    runner.shutdown()
    report = future.result(BOUND)
    assert report.result == "failed" and isinstance(report.error, leaseapi.ShuttingDown)
    assert client.get(job_id).last_outcome == "failed"
    with pytest.raises(leaseapi.ShuttingDown):
        runner.run(job_id, lambda ctx: None)


def test_runner_refuses_bad_settings() -> None:
    client = leaseapi.Client("http://127.0.0.1:8080")
    with pytest.raises(ValueError):
        leaseapi.Runner(client, "has space")
    with pytest.raises(ValueError):
        leaseapi.Runner(client, "a", ttl=3, heartbeat_interval=2)
    with pytest.raises(ValueError):
        leaseapi.leased(client, "job")  # no schedule
    assert "/" in leaseapi.default_owner()
