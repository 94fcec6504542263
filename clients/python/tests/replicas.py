"""Starting the replica programs of the integration tests and reading what
they recorded."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, List

import leaseapi
from conftest import LEASE_TOKEN, START_TIMEOUT, Process, Processes, Recorder, Server, wait_until
from leaseapi.models import parse_time

HERE = Path(__file__).resolve().parent


def read_records(path: Path) -> List[Dict[str, Any]]:
    if not path.exists():
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


class Replicas:
    """Replica processes of one program, each with its records file; "{name}"
    in args is replaced by the replica's name."""

    def __init__(self, processes: Processes, recorder: Recorder, server: Server, tmp_path: Path, names: List[str], args: List[str], env: Dict[str, str]) -> None:
        self.procs: Dict[str, Process] = {}
        self.records: Dict[str, Path] = {}
        for name in names:
            self.records[name] = tmp_path / f"records-{name}.jsonl"
            child_env = dict(
                os.environ,
                PYTHONPATH=str(HERE.parent),
                TEST_LEASEAPI_URL=server.url,
                TEST_LEASEAPI_TOKEN=LEASE_TOKEN,
                TEST_EXCHANGES=str(recorder.file_for(name)),
                TEST_RECORDS=str(self.records[name]),
                **env,
            )
            self.procs[name] = processes.start(name, [sys.executable, *(a.format(name=name) for a in args)], env=child_env, cwd=HERE)

    def events(self, event: str) -> List[Dict[str, Any]]:
        return [r for path in self.records.values() for r in read_records(path) if r["event"] == event]

    def wait_ready(self, processes: Processes) -> None:
        def ready() -> bool:
            for name, p in self.procs.items():
                assert p.alive(), f"{name} exited\n{processes.tails()}"
            return len(self.events("ready")) >= len(self.procs)

        wait_until("every replica ready", ready, START_TIMEOUT)

    def stop(self, processes: Processes) -> None:
        for name, p in self.procs.items():
            if p.alive():
                status = p.stop()
                assert status == 0, f"{name} exited with {status} on SIGTERM\n{processes.tails()}"


def whole_seconds(start: datetime, end: datetime) -> List[datetime]:
    """The ticks of `* * * * * *` in [start, end)."""
    first = start.replace(microsecond=0) + (timedelta(seconds=1) if start.microsecond else timedelta(0))
    ticks = []
    t = first
    while t < end:
        ticks.append(t)
        t += timedelta(seconds=1)
    return ticks


def next_whole_second(after: datetime, plus: int = 0) -> datetime:
    return after.replace(microsecond=0) + timedelta(seconds=1 + plus)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def runs_by_tick(client: leaseapi.Client, job: str) -> Dict[datetime, List[leaseapi.Run]]:
    by_tick: Dict[datetime, List[leaseapi.Run]] = {}
    for run in client.runs(job, limit=1000):
        if run.tick is not None and run.outcome != "missed":
            by_tick.setdefault(run.tick, []).append(run)
    return by_tick


def started_by_tick(replicas: Replicas) -> Dict[datetime, List[Dict[str, Any]]]:
    by_tick: Dict[datetime, List[Dict[str, Any]]] = {}
    for r in replicas.events("start"):
        by_tick.setdefault(parse_time(r["tick"]), []).append(r)
    return by_tick


def run_window_and_check_each_tick_once(replicas: Replicas, processes: Processes, admin: leaseapi.Client, job: str, seconds: int) -> None:
    """Lets the replicas run the ticks of a window of `seconds` whole
    seconds starting two seconds from now, stops them, and checks that each
    tick of the window ran exactly once: one run, succeeded, in the
    service's history, and one start among the replicas' records."""
    window_start = next_whole_second(utcnow(), plus=2)
    window_end = window_start + timedelta(seconds=seconds)
    # The test's length, not a synchronisation: the replicas run on their
    # own; the last tick's run (0.3 s) ends before they are stopped.
    time.sleep(max(0.0, (window_end - utcnow()).total_seconds()) + 1.5)
    replicas.stop(processes)

    ticks = whole_seconds(window_start, window_end)
    runs = runs_by_tick(admin, job)
    started = started_by_tick(replicas)
    wrong = {t: [(r.owner, r.outcome) for r in runs.get(t, [])] for t in ticks if [r.outcome for r in runs.get(t, [])] != ["succeeded"]}
    assert not wrong, f"ticks that did not run exactly once (of {len(ticks)}): {wrong}\n{processes.tails()}"
    twice = {t: rs for t, rs in started.items() if len(rs) > 1}
    assert not twice, f"ticks a replica started more than once: {twice}"
    assert all(len(started.get(t, [])) == 1 for t in ticks), "a tick the service recorded as run was not started by a replica"
