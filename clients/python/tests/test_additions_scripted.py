"""The client and the runner against the answers a later leaseapi may give,
which API v1 allows (docs/upgrading.md), from a scripted server: fields the
client does not know (ignored), values of an extensible enum it does not
know (kept as the strings they are), and problem codes it does not know
(read by their HTTP status: the generic error of that status, carrying the
code)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, List, Tuple

import pytest

import leaseapi
from conftest import Script

NEW = {"someNewField": {"since": "a later release"}}
LEASE: Dict[str, Any] = {
    "jobId": "j", "owner": "replica-a", "token": 3, "timeline": 1, "state": "held",
    "acquiredAt": "2026-12-01T07:00:01.000Z", "renewedAt": "2026-12-01T07:00:01.000Z",
    "expiresAt": "2026-12-01T07:00:31.000Z", "releasedAt": None, "ttlMs": 30000,
    "tick": "2026-12-01T07:00:00.000Z", "lastCompletedTick": None, "lastOutcome": None,
    "schedule": None, "graceMs": None, "nextTick": None, "paused": False, "pausedAt": None,
    "pausedBy": None, "pausedReason": None, "missedTicks": 0, "skippedTicks": 0, "revokedBy": None,
    "catchUp": "some_new_policy", "catchUpWindowMs": 86400000, "owedTick": "2026-12-01T07:00:00.000Z",
    "owedReason": "some_new_reason", "group": None, "slot": None, "slotToken": None, "alerting": False,
    **NEW,
}


def problem(status: int, code: str, **extra: Any) -> Dict[str, Any]:
    return {"type": f"https://leaseapi.dev/problems/{code}", "title": "Something new", "status": status,
            "detail": "an answer of a later release", "code": code, **NEW, **extra}


def test_fields_and_values_it_does_not_know(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    run = {"jobId": "j", "token": 3, "owner": "replica-a", "tick": "2026-12-01T07:00:00.000Z",
           "startedAt": "2026-12-01T07:00:01.000Z", "endedAt": None, "outcome": "running", "durationMs": None,
           "revokedBy": None, "trigger": "some_new_trigger", "triggeredBy": None, **NEW}
    script.answers = [(200, LEASE, {}), (200, {"runs": [run], **NEW}, {})]
    lease = client.get("j")
    assert (lease.owner, lease.token, lease.catch_up, lease.owed_reason) == ("replica-a", 3, "some_new_policy", "some_new_reason")
    assert lease.expires_at == datetime(2026, 12, 1, 7, 0, 31, tzinfo=timezone.utc)
    runs = client.runs("j")
    assert [(r.token, r.trigger) for r in runs] == [(3, "some_new_trigger")]


def test_a_refusal_it_does_not_know(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    script.answers = [(409, problem(409, "some_new_refusal", lease=dict(LEASE, owner="replica-z")), {})]
    with pytest.raises(leaseapi.LeaseError) as caught:
        client.acquire("j", "replica-a")
    err = caught.value
    # The generic error of a 409: no refusal the runner would skip, no
    # error of another code.
    assert type(err) is leaseapi.LeaseError
    assert (err.code, err.status) == ("some_new_refusal", 409)
    assert err.lease is not None and err.lease.owner == "replica-z"
    assert "409 some_new_refusal" in str(err)
    assert len(script.requests) == 1, "a 409 is not retried"


@pytest.mark.parametrize(
    "status, error",
    [(400, leaseapi.InvalidRequest), (401, leaseapi.Unauthorized), (403, leaseapi.Forbidden), (404, leaseapi.NotFound), (500, leaseapi.ServerError)],
)
def test_other_codes_it_does_not_know_by_their_status(scripted: Tuple[leaseapi.Client, Script], status: int, error: type) -> None:
    client, script = scripted
    script.answers = [(status, problem(status, "some_new_code"), {})]
    with pytest.raises(error) as caught:
        client.get("j")
    assert (caught.value.code, caught.value.status) == ("some_new_code", status)
    assert len(script.requests) == 1


def test_an_outage_it_does_not_know_is_retried(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    script.answers = [(503, problem(503, "some_new_outage"), {"Retry-After": "1"}), (429, problem(429, "some_new_limit"), {"Retry-After": "1"}), (200, LEASE, {})]
    assert client.acquire("j", "replica-a").token == 3
    assert len(script.requests) == 3


def test_the_runner(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    runner = leaseapi.Runner(client, "replica-a", ttl=30)
    called: List[int] = []
    script.answers = [(200, LEASE, {}), (200, dict(LEASE, state="released"), {})]
    report = runner.run("j", lambda ctx: called.append(ctx.token))
    assert report.result == "succeeded" and called == [3]

    script.answers = [(409, problem(409, "some_new_refusal", lease=dict(LEASE, owner="replica-z")), {})]
    with pytest.raises(leaseapi.LeaseError) as caught:
        runner.run("j", lambda ctx: called.append(ctx.token))
    assert not isinstance(caught.value, leaseapi.NotAcquired)
    assert (caught.value.code, caught.value.status) == ("some_new_refusal", 409)
    assert called == [3], "the refused run did not start"
    assert len(script.requests) == 3
