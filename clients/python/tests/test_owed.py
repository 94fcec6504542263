"""Owed ticks against a real leaseapi: a tick triggered with run now is run
exactly once by one of three runners that poll what their job owes, a
catch-up tick is claimed, the decorator registers its function, and the
polling stops on shutdown."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Tuple

import leaseapi
from conftest import LEASE_TOKEN, Recorder, Server, wait_until
from leaseapi.models import format_time

# Bounds every wait in these tests.
BOUND = 60.0
# Short, so that the tests need few seconds; the default is 10 s.
POLL = 0.1


class PollCounter:
    """Counts a client's POST /owed answers, and records the exchanges for
    the spec check."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.lock = threading.Lock()
        self.polls = 0

    def __call__(self, exchange: leaseapi.Exchange) -> None:
        self.recorder(exchange)
        if exchange.method == "POST" and exchange.path == "/owed":
            with self.lock:
                self.polls += 1

    def count(self) -> int:
        with self.lock:
            return self.polls


def polling_runner(server: Server, recorder: Recorder, owner: str) -> Tuple[leaseapi.Runner, PollCounter]:
    counter = PollCounter(recorder)
    client = leaseapi.Client(server.url, LEASE_TOKEN, retry_for=10, on_exchange=counter)
    return leaseapi.Runner(client, owner, ttl=3, owed_poll_interval=POLL), counter


def seed(client: leaseapi.Client, job_id: str) -> None:
    """Makes the job known to leaseapi (a trigger needs its lease): one run
    of an old tick."""
    lease = client.acquire(job_id, "seed", ttl=1, tick=datetime(2026, 1, 1, tzinfo=timezone.utc))
    client.release(job_id, "seed", lease.token, outcome="succeeded")


def ended(admin: leaseapi.Client, job_id: str, owner: str) -> List[leaseapi.Run]:
    """The ended runs of owner, newest first."""
    return [r for r in admin.runs(job_id, limit=100) if r.owner == owner and r.outcome != "running"]


def stop(runner: leaseapi.Runner) -> None:
    """Shuts the runner down and waits for its poll thread to end."""
    runner.shutdown()
    thread = runner._owed_thread  # the poll thread, if one was started
    if thread is not None:
        thread.join(BOUND)
        assert not thread.is_alive(), "the poll thread still runs after shutdown"


def test_a_triggered_tick_runs_once_on_one_of_three_runners(server: Server, recorder: Recorder, client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    seed(client, job_id)
    runners = [polling_runner(server, recorder, f"replica-{i}") for i in range(3)]
    ran: List[Dict[str, Any]] = []
    lock = threading.Lock()

    def job(ctx: leaseapi.RunContext) -> None:
        with lock:
            ran.append({"owner": ctx.owner, "tick": ctx.tick, "token": ctx.token})

    try:
        for runner, _ in runners:
            runner.watch_owed(job_id, job, schedule="0 7 * * *")
        owed_tick = admin.trigger(job_id, "a test").owed_tick
        assert owed_tick is not None
        wait_until("the triggered tick ran", lambda: any(r.trigger == "manual" and r.outcome != "running" for r in admin.runs(job_id)), BOUND)
        # Every runner polls twice more after the run was released: a
        # second claim, had there been one, would have been made by then.
        after = [counter.count() for _, counter in runners]
        wait_until("every runner polled again", lambda: all(c.count() >= n + 2 for (_, c), n in zip(runners, after)), BOUND)
    finally:
        for runner, _ in runners:
            stop(runner)

    assert len(ran) == 1, f"the triggered tick ran {len(ran)} times: {ran}"
    assert ran[0]["tick"] == owed_tick
    runs = [r for r in admin.runs(job_id) if r.owner != "seed"]
    assert [(r.token, r.owner, r.tick, r.trigger, r.outcome) for r in runs] == [(ran[0]["token"], ran[0]["owner"], owed_tick, "manual", "succeeded")]
    assert admin.get(job_id).owed_tick is None
    # The claim acquired exactly the owed tick, with the job's schedule.
    claims = [e["requestBody"] for e in recorder.exchanges if e["method"] == "POST" and e["path"] == f"/leases/{job_id}/acquire" and e["status"] == 200]
    assert [(b["owner"], b["tick"], b["schedule"]) for b in claims if b["owner"] != "seed"] == [(ran[0]["owner"], format_time(owed_tick), "0 7 * * *")]


def test_a_catch_up_tick_is_claimed(server: Server, recorder: Recorder, client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    schedule = "*/2 * * * * *"
    # One run registers the schedule with catch-up latest; then no replica
    # runs the job, its ticks are missed, and it owes the latest one.
    now = datetime.now(timezone.utc).replace(microsecond=0)
    seed = client.acquire(job_id, "seed", ttl=1, tick=now - timedelta(seconds=now.second % 2), schedule=schedule, grace=1, catch_up="latest", catch_up_window=60)
    client.release(job_id, "seed", seed.token, outcome="succeeded")

    def owes_catch_up() -> bool:
        return any(o.reason == "catch-up" for o in client.owed([job_id]))

    wait_until("the job owes a catch-up tick", owes_catch_up, BOUND)

    runner, _ = polling_runner(server, recorder, "replica-a")
    ticks: List[Any] = []
    try:
        runner.watch_owed(job_id, lambda ctx: ticks.append(ctx.tick), schedule=schedule, grace=1, catch_up="latest", catch_up_window=60)
        wait_until("the catch-up tick was claimed", lambda: bool(ended(admin, job_id, "replica-a")), BOUND)
    finally:
        stop(runner)
    catch_ups = ended(admin, job_id, "replica-a")
    assert catch_ups and all(r.trigger == "catch-up" for r in catch_ups), f"the runner's runs: {catch_ups}"
    assert catch_ups[-1].tick == ticks[0] and catch_ups[-1].outcome == "succeeded", f"the first claim: {catch_ups[-1]}, ran tick {ticks[0]}"


def test_polling_stops_on_shutdown(server: Server, recorder: Recorder, client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    seed(client, job_id)
    runner, counter = polling_runner(server, recorder, "replica-a")
    runner.watch_owed(job_id, lambda _ctx: None)
    wait_until("the runner polled", lambda: counter.count() >= 1, BOUND)
    stop(runner)

    admin.trigger(job_id)
    polls = counter.count()
    assert runner.poll_owed() == [], "a runner that shut down claimed an owed tick"
    runner.watch_owed(job_id, lambda _ctx: None)
    assert runner._owed_thread is not None and not runner._owed_thread.is_alive(), "watch_owed started polling after shutdown"
    assert counter.count() == polls, "a runner that shut down asked what its jobs owe"
    assert admin.get(job_id).owed_tick is not None


def test_leased_claims_the_ticks_its_job_owes(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    runner = leaseapi.Runner(client, "replica-a", ttl=3, owed_poll_interval=0)  # polled by hand below
    ticks: List[Any] = []

    @leaseapi.leased(client, job_id, schedule="0 7 * * *", runner=runner)
    def job() -> str:
        run = leaseapi.current_run()
        assert run is not None
        ticks.append(run.tick)
        return "done"

    seed(client, job_id)
    owed_tick = admin.trigger(job_id).owed_tick
    claims = runner.poll_owed()
    for claim in claims:
        claim.join(BOUND)
    assert len(claims) == 1 and not claims[0].is_alive()
    assert ticks == [owed_tick]
    assert [(r.trigger, r.tick, r.outcome) for r in admin.runs(job_id)][0] == ("manual", owed_tick, "succeeded")
    assert runner.poll_owed() == [], "the claimed tick is no longer owed"
