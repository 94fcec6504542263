"""A time the client cannot represent is an error of its field, never of the
answer: a canned list (the standard library's HTTP server) with leases whose
times lie in year 0000 and 10000 still returns every lease."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator

import pytest

import leaseapi


def _lease(job_id: str, **times: Any) -> Dict[str, Any]:
    lease = {
        "jobId": job_id, "owner": "a", "token": 1, "timeline": 1, "state": "released",
        "acquiredAt": "2026-12-01T00:16:03.603Z", "renewedAt": "2026-12-01T00:16:03.603Z",
        "expiresAt": "2026-12-01T00:16:33.603Z", "releasedAt": None, "ttlMs": 30000,
        "tick": "2026-12-01T07:00:00.000Z", "lastCompletedTick": None, "lastOutcome": None,
        "schedule": None, "graceMs": None, "nextTick": None, "paused": False, "pausedAt": None,
        "pausedBy": None, "pausedReason": None, "missedTicks": 0, "skippedTicks": 0, "revokedBy": None,
        "catchUp": "none", "catchUpWindowMs": 86400000, "owedTick": None, "owedReason": None,
    }
    lease.update(times)
    return lease


LEASES = [
    _lease("fine"),
    _lease("year-0000", tick="0000-01-01T00:00:00.000Z", lastCompletedTick="0000-12-31T23:59:59.999Z"),
    _lease("year-10000", nextTick="10000-01-01T00:00:00.000Z", acquiredAt="10000-01-01T00:00:00.000Z"),
    _lease("offset", owedTick="9999-12-31T23:59:59.999-01:00", pausedAt="2026-01-01T00:00:00+25:00"),
    _lease("garbage", releasedAt="yesterday", renewedAt=17),
]
RUNS = [
    {"jobId": "year-0000", "token": 1, "owner": "a", "tick": "0000-01-01T00:00:00.000Z", "startedAt": "2026-12-01T00:16:03.603Z",
     "endedAt": "10000-01-01T00:00:00.000Z", "outcome": "succeeded", "durationMs": 5, "revokedBy": None, "trigger": "schedule", "triggeredBy": None},
    {"jobId": "year-0000", "token": None, "owner": None, "tick": "2026-12-01T07:00:00.000Z", "startedAt": None,
     "endedAt": "2026-12-01T07:01:00.000Z", "outcome": "missed", "durationMs": None, "revokedBy": None, "trigger": "schedule", "triggeredBy": None},
]


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        path = self.path.split("?")[0]
        if path == "/leases":
            body: Any = {"leases": LEASES, "nextCursor": None, "serverTime": "2026-12-01T00:16:04.000Z"}
        elif path.endswith("/runs"):
            body = {"runs": RUNS}
        else:
            body = next(item for item in LEASES if item["jobId"] == path.rsplit("/", 1)[1])
        payload = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def canned() -> Iterator[leaseapi.Client]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield leaseapi.Client(f"http://127.0.0.1:{server.server_port}", retry_for=0)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_unreadable_times_keep_the_list(canned: leaseapi.Client) -> None:
    leases = {lease.job_id: lease for lease in canned.leases()}
    assert list(leases) == [item["jobId"] for item in LEASES]
    assert leases["fine"].field_errors == {}

    bad = leases["year-0000"]
    assert bad.tick is None and bad.last_completed_tick is None
    assert set(bad.field_errors) == {"tick", "last_completed_tick"}
    assert "0000-01-01T00:00:00.000Z" in bad.field_errors["tick"]
    assert bad.raw["lastCompletedTick"] == "0000-12-31T23:59:59.999Z"
    assert bad.acquired_at is not None and bad.token == 1

    assert set(leases["year-10000"].field_errors) == {"next_tick", "acquired_at"}
    assert set(leases["offset"].field_errors) == {"owed_tick", "paused_at"}
    assert set(leases["garbage"].field_errors) == {"released_at", "renewed_at"}


def test_unreadable_time_in_get_and_runs(canned: leaseapi.Client) -> None:
    lease = canned.get("year-10000")
    assert lease.next_tick is None and "next_tick" in lease.field_errors
    runs = canned.runs("year-0000")
    assert len(runs) == 2
    assert set(runs[0].field_errors) == {"tick", "ended_at"}
    assert runs[0].started_at is not None
    assert runs[1].field_errors == {}
