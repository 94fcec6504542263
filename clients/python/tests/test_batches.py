"""Batches against a real leaseapi: the client's per-item results and
errors and its retry of the items answered 429; the runner's acquires and
heartbeats of many jobs at one tick in fewer requests than jobs, each job
run once; the switch that turns batching off; and the fallback to single
calls against a leaseapi without the batch routes (a stub that answers them
404 and forwards the rest)."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from datetime import datetime, timezone
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import leaseapi
from conftest import LEASE_TOKEN, JSONHandler, Server, http_server

TICK = datetime(2026, 11, 30, 7, 0, tzinfo=timezone.utc)
# Bounds every wait for a run in these tests.
BOUND = 60.0


def requests_by_route(server: Server) -> Dict[str, float]:
    """leaseapi_http_requests_total summed over the codes, by route."""
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    counts: Dict[str, float] = {}
    for m in re.finditer(r'^leaseapi_http_requests_total\{code="\d+",route="([^"]+)"\} (\S+)$', text, re.M):
        counts[m.group(1)] = counts.get(m.group(1), 0.0) + float(m.group(2))
    return counts


def delta(before: Dict[str, float], after: Dict[str, float], route: str) -> int:
    return int(after.get(route, 0.0) - before.get(route, 0.0))


def test_acquire_batch_answers_each_item_as_its_single_call(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    held = client.acquire(job_id + ".held", "replica-b", ttl=30, tick=TICK)
    done = client.acquire(job_id + ".done", "replica-b", ttl=30, tick=TICK)
    client.release(job_id + ".done", "replica-b", done.token)

    results = client.acquire_batch(
        [
            leaseapi.AcquireItem(job_id + ".free", schedule="0 7 * * *"),
            leaseapi.AcquireItem(job_id + ".held"),
            leaseapi.AcquireItem(job_id + ".done"),
            leaseapi.AcquireItem(job_id + ".own", owner="replica-c", ttl=7),
            leaseapi.AcquireItem(job_id + ".bad", schedule="not a cron spec"),
            leaseapi.AcquireItem(job_id + ".mutex", nearest_tick=False, tick=None),
        ],
        owner="replica-a",
        ttl=5,
        tick=TICK,
    )
    assert len(results) == 6
    free, refused, ran, own, bad, mutex = results
    assert isinstance(free, leaseapi.Lease) and (free.owner, free.tick, free.ttl, free.schedule) == ("replica-a", TICK, 5, "0 7 * * *")
    assert isinstance(refused, leaseapi.LeaseHeld) and (refused.status, refused.code) == (409, "lease_held")
    assert refused.retry_after is not None and refused.retry_after >= 1, refused.retry_after
    assert refused.lease is not None and (refused.lease.owner, refused.lease.token) == ("replica-b", held.token)
    assert refused.request_id and refused.detail
    assert isinstance(ran, leaseapi.TickDone) and ran.lease is not None and ran.lease.last_completed_tick == TICK
    assert isinstance(own, leaseapi.Lease) and (own.owner, own.ttl) == ("replica-c", 7), "an item's own fields win over the defaults"
    assert isinstance(bad, leaseapi.InvalidRequest) and bad.status == 400 and "schedule" in bad.detail
    assert isinstance(mutex, leaseapi.Lease) and mutex.tick == TICK, "an item without a tick takes the default's"

    # The same errors as the single calls raise.
    with pytest.raises(leaseapi.LeaseHeld) as single:
        client.acquire(job_id + ".held", "replica-a", tick=TICK)
    assert (single.value.code, single.value.status, single.value.detail) == (refused.code, refused.status, refused.detail)

    with pytest.raises(ValueError, match="once per batch"):
        client.acquire_batch([leaseapi.AcquireItem(job_id), leaseapi.AcquireItem(job_id)], owner="a")
    with pytest.raises(ValueError, match="need a schedule"):
        client.acquire_batch([leaseapi.AcquireItem(job_id, grace=60)], owner="a")


def test_acquire_batch_scopes_each_item(server: Server, admin: leaseapi.Client, recorder: Any, job_id: str) -> None:
    scope = job_id + ".team."
    cred = admin.create_credential(job_id + "-team", "lease", [scope])
    scoped = leaseapi.Client(server.url, cred.token, retry_for=10, on_exchange=recorder)
    inside, outside = scoped.acquire_batch([leaseapi.AcquireItem(scope + "a"), leaseapi.AcquireItem(job_id + ".other.a")], owner="replica-a", tick=TICK)
    assert isinstance(inside, leaseapi.Lease) and inside.job_id == scope + "a"
    assert isinstance(outside, leaseapi.Forbidden) and outside.status == 403, "403 for one item does not fail the others"


def test_acquire_batch_retries_the_items_beyond_the_rate(server: Server, admin: leaseapi.Client, recorder: Any, job_id: str) -> None:
    scope = job_id + "."
    cred = admin.create_credential(job_id + "-slow", "lease", [scope], rate_per_second=2)
    items = [leaseapi.AcquireItem(f"{scope}{i}") for i in range(5)]

    once = leaseapi.Client(server.url, cred.token, retry_for=0, on_exchange=recorder).acquire_batch(items, owner="replica-a", tick=TICK)
    limited = [r for r in once if isinstance(r, leaseapi.RateLimited)]
    assert limited and all(r.status == 429 and r.code == "rate_limited" for r in limited), "the items beyond the bucket are 429"
    assert any(isinstance(r, leaseapi.Lease) for r in once)

    # With a retry window the 429 items go again, together, until granted;
    # the leases granted before are the holder's idempotent retries.
    results = leaseapi.Client(server.url, cred.token, retry_for=30, on_exchange=recorder).acquire_batch(items, owner="replica-a", tick=TICK)
    assert all(isinstance(r, leaseapi.Lease) for r in results), results
    assert [r.job_id for r in results] == [i.job_id for i in items]


def test_heartbeat_batch(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    a = client.acquire(job_id + ".a", "replica-a", ttl=5, tick=TICK)
    b = client.acquire(job_id + ".b", "replica-a", ttl=5, tick=TICK)
    admin.revoke(job_id + ".b")
    renewed, lost, unknown, other = client.heartbeat_batch(
        [
            leaseapi.HeartbeatItem(job_id + ".a", a.token),
            leaseapi.HeartbeatItem(job_id + ".b", b.token),
            leaseapi.HeartbeatItem(job_id + ".never", 1),
            leaseapi.HeartbeatItem(job_id + ".a2", 1, owner="replica-z", ttl=4),
        ],
        owner="replica-a",
        ttl=6,
    )
    assert isinstance(renewed, leaseapi.Lease) and (renewed.token, renewed.ttl) == (a.token, 6)
    assert isinstance(lost, leaseapi.LeaseLost) and lost.status == 409
    assert isinstance(unknown, leaseapi.NotFound) and unknown.status == 404
    assert isinstance(other, leaseapi.NotFound)


class Stub:
    """Counts the requests of a stub leaseapi without the batch routes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.paths: List[str] = []


@pytest.fixture
def without_batches(server: Server) -> Iterator[Tuple[str, Stub]]:
    """A leaseapi as an older version answers: 404 for POST /acquire and
    POST /heartbeat, everything else forwarded to the real one."""
    stub = Stub()

    class Handler(JSONHandler):
        def _serve(self) -> None:
            body = self.read_body()
            with stub.lock:
                stub.paths.append(self.path)
            if self.path in ("/acquire", "/heartbeat"):
                self.answer(404, {"type": "https://leaseapi.dev/problems/not_found", "title": "Not found", "status": 404, "detail": "no such route", "code": "not_found"})
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type", "accept")}
            request = urllib.request.Request(server.url + self.path, data=body or None, headers=headers, method=self.command)
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    status, payload, ctype = answer.status, answer.read(), answer.headers.get("Content-Type")
            except urllib.error.HTTPError as err:
                status, payload, ctype = err.code, err.read(), err.headers.get("Content-Type")
            self.send_response(status)
            self.send_header("Content-Type", ctype or "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = do_PUT = _serve  # noqa: N815 - the http.server names

    with http_server(Handler) as httpd:
        yield f"http://127.0.0.1:{httpd.server_port}", stub


def run_at_once(runners: List[leaseapi.Runner], jobs: List[str], hold: float) -> List[Any]:
    """Runs every job on every runner, all starting together (one thread
    each), each run holding its lease for hold seconds; returns the reports
    and the NotAcquired refusals."""
    start = threading.Barrier(len(runners) * len(jobs))
    outcomes: List[Any] = []
    lock = threading.Lock()

    def one(runner: leaseapi.Runner, job: str) -> None:
        start.wait(BOUND)
        try:
            outcome: Any = runner.run(job, lambda ctx: ctx.stop.wait(hold), tick=TICK)
        except leaseapi.NotAcquired as err:
            outcome = err
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=one, args=(r, j)) for r in runners for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BOUND)
        assert not t.is_alive(), "a run did not end"
    return outcomes


def test_runner_batches_the_jobs_of_one_tick(server: Server, recorder: Any, job_id: str) -> None:
    jobs = [f"{job_id}.{i}" for i in range(30)]
    # Three replicas, each its own client and runner; ttl 3 s: runs of 2.5 s
    # heartbeat twice (every second).
    runners = [leaseapi.Runner(leaseapi.Client(server.url, LEASE_TOKEN, on_exchange=recorder), f"replica-{i}", ttl=3) for i in range(3)]
    before = requests_by_route(server)
    outcomes = run_at_once(runners, jobs, 2.5)
    after = requests_by_route(server)

    reports = [o for o in outcomes if isinstance(o, leaseapi.RunReport)]
    assert sorted(r.job_id for r in reports) == sorted(jobs), "each job runs once"
    assert all(r.result == "succeeded" for r in reports), [r.error for r in reports if r.result != "succeeded"]
    assert all(isinstance(o, (leaseapi.LeaseHeld, leaseapi.RunReport)) for o in outcomes), outcomes

    acquires = delta(before, after, "/acquire") + delta(before, after, "/leases/{jobId}/acquire")
    assert delta(before, after, "/acquire") >= 1
    assert acquires < len(jobs), f"{len(jobs) * len(runners)} acquires took {acquires} requests"
    heartbeats = delta(before, after, "/heartbeat") + delta(before, after, "/leases/{jobId}/heartbeat")
    assert delta(before, after, "/heartbeat") >= 1
    assert heartbeats < len(jobs), f"the heartbeats of {len(jobs)} runs took {heartbeats} requests"


def test_runner_without_batching_sends_single_calls(server: Server, recorder: Any, job_id: str) -> None:
    jobs = [f"{job_id}.{i}" for i in range(5)]
    runner = leaseapi.Runner(leaseapi.Client(server.url, LEASE_TOKEN, on_exchange=recorder), "replica-a", ttl=3, batch=False)
    before = requests_by_route(server)
    outcomes = run_at_once([runner], jobs, 0)
    after = requests_by_route(server)
    assert sorted(o.job_id for o in outcomes if o.result == "succeeded") == sorted(jobs)
    assert delta(before, after, "/acquire") == 0 and delta(before, after, "/leases/{jobId}/acquire") == len(jobs)


def test_runner_falls_back_to_single_calls_for_good(without_batches: Tuple[str, Stub], job_id: str) -> None:
    url, stub = without_batches
    runner = leaseapi.Runner(leaseapi.Client(url, LEASE_TOKEN), "replica-a", ttl=3)
    jobs = [f"{job_id}.{i}" for i in range(8)]

    first = run_at_once([runner], jobs, 1.5)
    assert sorted(o.job_id for o in first if isinstance(o, leaseapi.RunReport) and o.result == "succeeded") == sorted(jobs), first
    batch_tries = [p for p in stub.paths if p in ("/acquire", "/heartbeat")]
    assert batch_tries == ["/acquire"], f"one batch tried, then single calls: {batch_tries}"
    singles = [p for p in stub.paths if p.endswith("/acquire") and p != "/acquire"]
    assert len(singles) == len(jobs)
    assert any(p.endswith("/heartbeat") for p in stub.paths), "the runs heartbeat (single calls)"

    second = run_at_once([runner], [j + "-again" for j in jobs], 0)
    assert all(isinstance(o, leaseapi.RunReport) and o.result == "succeeded" for o in second), second
    assert [p for p in stub.paths if p in ("/acquire", "/heartbeat")] == ["/acquire"], "no batch is tried again"


def test_batch_results_follow_a_scripted_answer() -> None:
    """A per-item 503 is sent again alone; a result that does not match the
    items is a ProtocolError."""
    answers: List[Tuple[int, Dict[str, Any]]] = []
    bodies: List[Dict[str, Any]] = []

    class Handler(JSONHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            bodies.append(json.loads(self.read_body()))
            status, body = answers.pop(0)
            self.answer(status, body)

    lease = {
        "jobId": "b", "owner": "a", "token": 2, "timeline": 1, "state": "held",
        "acquiredAt": "2026-12-01T00:16:03.603Z", "renewedAt": "2026-12-01T00:16:03.603Z",
        "expiresAt": "2026-12-01T00:16:33.603Z", "releasedAt": None, "ttlMs": 30000,
        "tick": None, "lastCompletedTick": None, "lastOutcome": None,
        "schedule": None, "graceMs": None, "nextTick": None, "paused": False, "pausedAt": None,
        "pausedBy": None, "pausedReason": None, "missedTicks": 0, "skippedTicks": 0, "revokedBy": None,
        "catchUp": "none", "catchUpWindowMs": 86400000, "owedTick": None, "owedReason": None,
    }
    unavailable = {"type": "https://leaseapi.dev/problems/unavailable", "title": "Service unavailable", "status": 503, "detail": "later", "code": "unavailable"}
    with http_server(Handler) as httpd:
        client = leaseapi.Client(f"http://127.0.0.1:{httpd.server_port}", retry_for=10)
        answers[:] = [
            (200, {"results": [{"jobId": "a", "status": 200, "lease": dict(lease, jobId="a", token=1)}, {"jobId": "b", "status": 503, "problem": unavailable}]}),
            (200, {"results": [{"jobId": "b", "status": 200, "lease": lease}]}),
        ]
        a, b = client.acquire_batch([leaseapi.AcquireItem("a"), leaseapi.AcquireItem("b")], owner="a")
        assert (a.token, b.token) == (1, 2)
        assert [[i["jobId"] for i in body["items"]] for body in bodies] == [["a", "b"], ["b"]]
        assert bodies[1]["owner"] == "a", "the retry sends the defaults again"

        answers[:] = [(200, {"results": [{"jobId": "b", "status": 200, "lease": lease}]})]
        with pytest.raises(leaseapi.ProtocolError, match="2 items sent, 1 results"):
            client.acquire_batch([leaseapi.AcquireItem("a"), leaseapi.AcquireItem("b")], owner="a")
