"""The spec check itself: it must reject what the spec does not allow,
or the exchange checks of the other tests could not fail."""

from __future__ import annotations

import json

from spec import Spec

LEASE = {
    "jobId": "j", "owner": "o", "token": 1, "timeline": 1, "state": "held",
    "acquiredAt": "2026-11-30T07:00:00.000Z", "renewedAt": "2026-11-30T07:00:00.000Z", "expiresAt": "2026-11-30T07:00:30.000Z",
    "releasedAt": None, "ttlMs": 30000, "tick": None, "lastCompletedTick": None, "lastOutcome": None,
    "schedule": None, "graceMs": None, "nextTick": None, "paused": False, "pausedAt": None, "pausedBy": None,
    "pausedReason": None, "missedTicks": 0, "skippedTicks": 0, "revokedBy": None,
    "catchUp": "none", "catchUpWindowMs": 86400000, "owedTick": None, "owedReason": None,
    "group": None, "slot": None, "slotToken": None, "alerting": False,
}


def exchange(status: int, body: object, media: str = "application/json", request: object = None, headers: object = None) -> dict:
    h = {"content-type": media}
    h.update(headers or {})  # type: ignore[arg-type]
    return {"method": "POST", "path": "/leases/j/acquire", "requestBody": request or {"owner": "o"}, "status": status, "headers": h, "body": json.dumps(body)}


def test_spec_check_accepts_a_lease_and_rejects_what_the_spec_does_not_allow(spec: Spec) -> None:
    assert spec.check(exchange(200, LEASE)) == []
    assert spec.check(exchange(200, {k: v for k, v in LEASE.items() if k != "token"}))  # a required field missing
    assert spec.check(exchange(200, dict(LEASE, state="gone")))  # not in the enum
    assert spec.check(exchange(200, dict(LEASE, extra=1)))  # additionalProperties: false
    assert spec.check(exchange(200, dict(LEASE, tick="2026-11-30T07:00:00Z")))  # not millisecond precision
    assert spec.check(exchange(418, LEASE))  # a status the operation does not list
    assert spec.check(exchange(200, LEASE, media="text/plain"))
    assert spec.check(exchange(200, LEASE, request={"owner": "o", "bogus": True}))  # a request field the spec lacks
    assert spec.check(exchange(503, {"type": "https://leaseapi.dev/problems/unavailable", "title": "t", "status": 503, "detail": "d", "code": "unavailable"}, media="application/problem+json"))  # no Retry-After
    assert spec.check(dict(exchange(200, LEASE), path="/nowhere"))
