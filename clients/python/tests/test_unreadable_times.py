"""A time the client cannot represent is an error of its field, never of the
answer: a canned list (the standard library's HTTP server) with leases whose
times lie in year 0000 and 10000 still returns every lease; so do the owed
ticks (which the runner skips), credentials, webhooks and deliveries."""

from __future__ import annotations

import logging
from typing import Any, Dict, Iterator, List

import pytest

import leaseapi
from conftest import JSONHandler, http_server


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
OWED = [
    {"jobId": "fine", "tick": "2026-12-01T07:00:00.000Z", "reason": "manual", "triggeredBy": "ops", "triggerReason": None},
    {"jobId": "year-10000", "tick": "10000-01-01T00:00:00.000Z", "reason": "catch-up", "triggeredBy": None, "triggerReason": None},
]
CREDENTIALS = [
    {"id": "lk_abcdefghijkl", "name": "fine", "role": "read", "scopes": ["*"], "ratePerSecond": 5, "createdAt": "2026-12-01T00:00:00.000Z"},
    {"id": "lk_bcdefghijklm", "name": "year-0000", "role": "admin", "scopes": ["a."], "ratePerSecond": None, "createdAt": "0000-01-01T00:00:00.000Z"},
]
DELIVERY = {"eventId": "msg_1", "eventType": "run.failed", "jobId": "fine", "attempt": 1, "at": "0000-01-01T00:00:00.000Z", "status": None, "error": "refused", "delivered": False}
WEBHOOKS = [
    {"id": "wh_abcdefghijkl", "url": "https://hooks.example.com", "events": ["run.failed"], "scopes": ["*"], "format": "standard",
     "createdBy": None, "createdAt": "10000-01-01T00:00:00.000Z", "lastDelivery": DELIVERY},
]


class _Handler(JSONHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        path = self.path.split("?")[0]
        if path == "/leases":
            body: Any = {"leases": LEASES, "nextCursor": None, "serverTime": "2026-12-01T00:16:04.000Z"}
        elif path.endswith("/runs"):
            body = {"runs": RUNS}
        elif path == "/credentials":
            body = {"credentials": CREDENTIALS}
        elif path == "/webhooks":
            body = {"webhooks": WEBHOOKS}
        elif path.endswith("/deliveries"):
            body = {"deliveries": [DELIVERY]}
        else:
            body = next(item for item in LEASES if item["jobId"] == path.rsplit("/", 1)[1])
        self.answer(200, body)

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        self.read_body()
        self.answer(200, {"owed": OWED})


@pytest.fixture
def canned() -> Iterator[leaseapi.Client]:
    with http_server(_Handler) as server:
        yield leaseapi.Client(f"http://127.0.0.1:{server.server_port}", retry_for=0)


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


def test_unreadable_times_of_operator_answers(canned: leaseapi.Client) -> None:
    owed = canned.owed(["fine", "year-10000"])
    assert [o.job_id for o in owed] == ["fine", "year-10000"]
    assert owed[0].field_errors == {} and owed[0].tick is not None
    assert owed[1].tick is None and set(owed[1].field_errors) == {"tick"} and owed[1].reason == "catch-up"

    credentials = canned.credentials()
    assert credentials[0].field_errors == {} and credentials[0].rate_per_second == 5
    assert credentials[1].created_at is None and set(credentials[1].field_errors) == {"created_at"}

    (webhook,) = canned.webhooks()
    assert webhook.created_at is None and set(webhook.field_errors) == {"created_at"}
    assert webhook.last_delivery is not None and set(webhook.last_delivery.field_errors) == {"at"}
    (delivery,) = canned.webhook_deliveries(webhook.id)
    assert delivery.at is None and delivery.raw["at"] == "0000-01-01T00:00:00.000Z" and delivery.error == "refused"


def test_an_unreadable_owed_tick_is_skipped_by_the_runner(canned: leaseapi.Client, caplog: pytest.LogCaptureFixture) -> None:
    runner = leaseapi.Runner(canned, "replica-a", owed_poll_interval=0)
    ran: List[str] = []
    runner.watch_owed("year-10000", lambda ctx: ran.append(ctx.job_id))
    with caplog.at_level(logging.ERROR, logger="leaseapi"):
        assert runner.poll_owed() == [], "a tick the client cannot read was claimed"
    assert ran == []
    assert any("owed tick skipped: its time is unreadable" in r.getMessage() and getattr(r, "job_id", None) == "year-10000" for r in caplog.records), caplog.text
