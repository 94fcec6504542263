"""Which calls are retried after which answers, against a scripted server
(the standard library's HTTP server): a trigger retries with the same
Idempotency-Key; a create is retried only after an answer saying nothing was
done, since after no answer or 503 ``unavailable`` it may have happened."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import leaseapi
from conftest import JSONHandler, http_server

CREDENTIAL = {"id": "lk_abcdefghijkl", "name": "n", "role": "read", "scopes": ["*"], "ratePerSecond": None, "createdAt": "2026-12-01T00:00:00.000Z", "token": "lk_abcdefghijkl.s3cret"}
WEBHOOK = {"id": "wh_abcdefghijkl", "url": "https://hooks.example.com", "events": ["run.failed"], "scopes": ["*"], "format": "standard", "createdBy": None, "createdAt": "2026-12-01T00:00:00.000Z", "secret": "whsec_" + "A" * 32}
LEASE = {
    "jobId": "j", "owner": "a", "token": 1, "timeline": 1, "state": "released",
    "acquiredAt": "2026-12-01T00:16:03.603Z", "renewedAt": "2026-12-01T00:16:03.603Z",
    "expiresAt": "2026-12-01T00:16:33.603Z", "releasedAt": "2026-12-01T00:16:04.000Z", "ttlMs": 30000,
    "tick": "2026-12-01T07:00:00.000Z", "lastCompletedTick": "2026-12-01T07:00:00.000Z", "lastOutcome": "succeeded",
    "schedule": None, "graceMs": None, "nextTick": None, "paused": False, "pausedAt": None,
    "pausedBy": None, "pausedReason": None, "missedTicks": 0, "skippedTicks": 0, "revokedBy": None,
    "catchUp": "none", "catchUpWindowMs": 86400000, "owedTick": "2026-12-01T08:00:00.000Z", "owedReason": "manual",
}


def problem(status: int, code: str) -> Tuple[int, Dict[str, Any]]:
    return status, {"type": f"https://leaseapi.dev/problems/{code}", "title": code, "status": status, "detail": code, "code": code}


class Script:
    """The answers to give, in order, and the requests received."""

    def __init__(self) -> None:
        self.answers: List[Tuple[int, Dict[str, Any]]] = []
        self.requests: List[Dict[str, Any]] = []


@pytest.fixture
def scripted() -> Iterator[Tuple[leaseapi.Client, Script]]:
    script = Script()

    class Handler(JSONHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            body = json.loads(self.read_body())
            script.requests.append({"path": self.path, "idempotency_key": self.headers.get("Idempotency-Key"), "body": body})
            status, answer = script.answers.pop(0)
            self.answer(status, answer, {"Retry-After": "0"} if status in (429, 503) else None)

    with http_server(Handler) as server:
        yield leaseapi.Client(f"http://127.0.0.1:{server.server_port}", retry_for=10), script


def test_trigger_retries_with_one_idempotency_key(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    script.answers = [problem(503, "unavailable"), problem(409, "idempotency_key_in_flight"), (200, LEASE)]
    lease = client.trigger("j", reason="r")
    assert lease.owed_reason == "manual"
    keys = [r["idempotency_key"] for r in script.requests]
    assert len(keys) == 3 and len(set(keys)) == 1 and keys[0].startswith("leaseapi-python-")

    script.requests.clear()
    script.answers = [(200, LEASE)]
    client.trigger("j", idempotency_key="mine")
    assert [r["idempotency_key"] for r in script.requests] == ["mine"]
    script.requests.clear()
    script.answers = [(200, LEASE)]
    client.trigger("j")
    assert script.requests[0]["idempotency_key"] not in keys, "each call has a key of its own"


@pytest.mark.parametrize("create", ["credential", "webhook"])
def test_create_is_retried_only_when_nothing_was_done(scripted: Tuple[leaseapi.Client, Script], create: str) -> None:
    client, script = scripted

    def call() -> Any:
        if create == "credential":
            return client.create_credential("n", "read", ["*"])
        return client.create_webhook("https://hooks.example.com/x", ["run.failed"], ["*"])

    created = CREDENTIAL if create == "credential" else WEBHOOK
    script.answers = [problem(429, "rate_limited"), problem(503, "overloaded"), (201, created)]
    assert call().id == created["id"]
    assert len(script.requests) == 3

    script.requests.clear()
    script.answers = [problem(503, "unavailable"), (201, created)]
    with pytest.raises(leaseapi.Unavailable) as unknown:
        call()
    assert unknown.value.code == "unavailable" and len(script.requests) == 1, "a create whose outcome is unknown is not sent again"
