"""The operator calls against a real leaseapi: run now (trigger, owed,
cancel_trigger), credentials and webhooks. The recorder fixture checks every
answer the client read against the spec."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from typing import Any, Dict, Iterator, List

import pytest

import leaseapi
from conftest import START_TIMEOUT, JSONHandler, Recorder, Server, http_server, wait_until

TICK = datetime(2026, 11, 30, 7, 0, tzinfo=timezone.utc)


def test_trigger_owed_and_cancel(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    lease = client.acquire(job_id, "replica-a", ttl=30, tick=TICK)
    client.release(job_id, "replica-a", lease.token)
    assert client.owed([job_id]) == []
    assert client.owed([]) == [], "no ids, no call"

    key = "py-" + uuid.uuid4().hex
    triggered = admin.trigger(job_id, reason="backfill", idempotency_key=key)
    assert triggered.owed_reason == "manual" and triggered.owed_tick is not None and triggered.owed_tick > TICK
    again = admin.trigger(job_id, reason="backfill", idempotency_key=key)
    assert again.owed_tick == triggered.owed_tick, "the same key answers the same tick"
    assert admin.trigger(job_id).owed_tick == triggered.owed_tick, "a trigger while a tick is owed answers that tick"
    with pytest.raises(leaseapi.IdempotencyKeyReused) as reused:
        admin.trigger(job_id, reason="another reason", idempotency_key=key)
    assert (reused.value.code, reused.value.status) == ("idempotency_key_reused", 422)

    owed = client.owed([job_id, job_id + ".unknown", job_id])
    assert [(o.job_id, o.tick, o.reason, o.triggered_by, o.trigger_reason) for o in owed] == [
        (job_id, triggered.owed_tick, "manual", "admin-token-1", "backfill")
    ]
    assert owed[0].field_errors == {}

    manual = client.acquire(job_id, "replica-b", ttl=30, tick=owed[0].tick)
    client.release(job_id, "replica-b", manual.token)
    assert client.owed([job_id]) == [], "a claimed and succeeded tick is owed no more"
    run = client.runs(job_id, limit=1)[0]
    assert (run.tick, run.trigger, run.triggered_by, run.outcome) == (owed[0].tick, "manual", "admin-token-1", "succeeded")

    unchanged = admin.cancel_trigger(job_id)
    assert unchanged.owed_tick is None and unchanged.token == manual.token
    assert admin.trigger(job_id).owed_tick is not None
    cancelled = admin.cancel_trigger(job_id)
    assert cancelled.owed_tick is None and cancelled.owed_reason is None
    assert client.owed([job_id]) == []

    admin.pause(job_id)
    with pytest.raises(leaseapi.JobPaused) as paused:
        admin.trigger(job_id)
    assert paused.value.code == "job_paused" and paused.value.lease is not None and paused.value.lease.paused
    admin.resume(job_id)

    with pytest.raises(leaseapi.Forbidden):
        client.trigger(job_id)
    with pytest.raises(leaseapi.NotFound):
        admin.trigger(job_id + ".never")
    with pytest.raises(ValueError):
        admin.trigger(job_id, idempotency_key="not\tprintable")


def test_owed_asks_in_batches(client: leaseapi.Client, recorder: Recorder, job_id: str) -> None:
    ids = [f"{job_id}.{i:04d}" for i in range(1001)]
    before = len(recorder.exchanges)
    assert client.owed(ids) == []
    sizes = [len(e["requestBody"]["jobs"]) for e in recorder.exchanges[before:]]
    assert sizes == [1000, 1]


def test_credentials(server: Server, admin: leaseapi.Client, recorder: Recorder) -> None:
    name = "py-cred-" + uuid.uuid4().hex[:8]
    created = admin.create_credential(name, "read", ["py.cred."], rate_per_second=5)
    assert (created.name, created.role, created.scopes, created.rate_per_second) == (name, "read", ["py.cred."], 5)
    assert created.id.startswith("lk_") and created.token is not None and created.token.startswith(created.id + ".")
    assert created.created_at is not None and created.created_at.tzinfo is not None
    assert created.token not in repr(created) and "token" not in created.raw

    me = leaseapi.Client(server.url, created.token, on_exchange=recorder).whoami()
    assert (me.name, me.role, me.scopes) == (name, "read", ["py.cred."])

    listed = {c.id: c for c in admin.credentials()}
    assert listed[created.id].token is None and listed[created.id].name == name
    assert listed[created.id] == dataclasses.replace(created, token=None)

    with pytest.raises(leaseapi.CredentialExists) as exists:
        admin.create_credential(name, "read", ["py.cred."])
    assert (exists.value.code, exists.value.status) == ("credential_exists", 409)
    unlimited = admin.create_credential(name + "-free", "lease", ["*"], rate_per_second=0)
    assert unlimited.rate_per_second == 0
    default_rate = admin.create_credential(name + "-default", "lease", ["*"])
    assert default_rate.rate_per_second is None

    for credential in (created, unlimited, default_rate):
        assert admin.delete_credential(credential.id) is None
    assert not {created.id, unlimited.id, default_rate.id} & {c.id for c in admin.credentials()}
    with pytest.raises(leaseapi.Unauthorized):
        leaseapi.Client(server.url, created.token, on_exchange=recorder).whoami(retry_for=0)
    with pytest.raises(leaseapi.NotFound):
        admin.delete_credential(created.id)


class _Receiver(JSONHandler):
    """Records the events POSTed to it and answers 204."""

    received: List[Dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        body = self.read_body()
        self.received.append({"id": self.headers.get("webhook-id"), "signature": self.headers.get("webhook-signature"), "body": body})
        self.answer(204)


@pytest.fixture
def receiver() -> Iterator[ThreadingHTTPServer]:
    with http_server(type("Receiver", (_Receiver,), {"received": []})) as server:
        yield server


def test_webhooks(client: leaseapi.Client, admin: leaseapi.Client, receiver: ThreadingHTTPServer, job_id: str) -> None:
    scope = job_id + "."
    url = f"http://127.0.0.1:{receiver.server_port}/hook?secret-path"
    created = admin.create_webhook(url, ["run.failed"], [scope])
    assert created.id.startswith("wh_") and created.secret is not None and created.secret.startswith("whsec_")
    assert created.secret not in repr(created) and "secret" not in created.raw
    assert (created.events, created.scopes, created.format, created.created_by) == (["run.failed"], [scope], "standard", "admin-token-1")
    assert created.last_delivery is None and "secret-path" not in created.url

    lease = client.acquire(scope + "job", "replica-a", ttl=30, tick=TICK)
    client.release(scope + "job", "replica-a", lease.token, outcome="failed")
    wait_until("the run.failed event delivered", lambda: bool(admin.webhook_deliveries(created.id)), START_TIMEOUT, interval=0.2)
    delivery = admin.webhook_deliveries(created.id)[0]
    assert (delivery.event_type, delivery.job_id, delivery.attempt, delivery.status, delivery.error, delivery.delivered) == (
        "run.failed", scope + "job", 1, 204, None, True
    )
    assert delivery.at is not None and delivery.field_errors == {}
    received = receiver.RequestHandlerClass.received  # type: ignore[attr-defined]
    assert [r["id"] for r in received] == [delivery.event_id] and received[0]["signature"].startswith("v1,")

    listed = {w.id: w for w in admin.webhooks()}
    assert listed[created.id].secret is None and listed[created.id].last_delivery == delivery

    slack = admin.create_webhook("https://hooks.example.com/services/x", ["run.missed", "job.overdue"], [scope], format="slack")
    assert slack.format == "slack" and slack.url.startswith("https://hooks.example.com")

    for webhook in (created, slack):
        assert admin.delete_webhook(webhook.id) is None
    assert not {created.id, slack.id} & {w.id for w in admin.webhooks()}
    with pytest.raises(leaseapi.NotFound):
        admin.delete_webhook(created.id)
    with pytest.raises(leaseapi.NotFound):
        admin.webhook_deliveries(created.id)
    with pytest.raises(leaseapi.InvalidRequest):
        admin.create_webhook("ftp://example.com", ["run.failed"], [scope])
    with pytest.raises(leaseapi.Forbidden):
        client.webhooks()

