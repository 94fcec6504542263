"""Alert policies against a real leaseapi: set, read, replace and delete a
job's policy, the job alerting and ok again as its runs fail and succeed
(on the policy and on the lease), the errors, and the job.alerting and
job.ok webhooks. The recorder fixture checks every answer the client read
against the spec."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from http.server import ThreadingHTTPServer
from typing import Any, Dict, Iterator, List

import pytest

import leaseapi
from conftest import START_TIMEOUT, JSONHandler, http_server, wait_until

TICK = datetime(2026, 11, 30, 7, 0, tzinfo=timezone.utc)


def _run(client: leaseapi.Client, job_id: str, tick: datetime, outcome: str) -> leaseapi.Lease:
    """One run of the job for tick, released with outcome; the release's
    answer."""
    lease = client.acquire(job_id, "replica-a", ttl=30, tick=tick)
    return client.release(job_id, "replica-a", lease.token, outcome=outcome)


def test_policy_set_read_replace_delete(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    first = _run(client, job_id, TICK, "succeeded")
    assert (first.alerting, first.alert_reasons) == (False, []), "no policy, not alerting"

    policy = admin.put_policy(
        job_id,
        consecutive_failures=2,
        failure_rate=leaseapi.FailureRate(threshold=0.5, runs=10),
        max_runtime=timedelta(minutes=5),
        realert_after=3600,
    )
    assert (policy.job_id, policy.consecutive_failures, policy.failure_rate) == (job_id, 2, leaseapi.FailureRate(0.5, 10))
    assert (policy.max_runtime, policy.min_runtime, policy.missed_ticks, policy.realert_after) == (300, None, None, 3600)
    assert policy.recovery_threshold == 1, "the default, always present"
    assert (policy.status, policy.alerting, policy.alert_reasons, policy.last_alert_at) == ("ok", False, [], None)
    assert policy.updated_by == "admin-token-1" and policy.updated_at is not None and policy.status_since is not None
    assert policy.field_errors == {}
    assert client.policy(job_id) == policy, "the read role reads it as it was set"
    assert not client.get(job_id).alerting

    _run(client, job_id, TICK + timedelta(days=1), "failed")
    assert not client.policy(job_id).alerting, "one failure of two"
    second = _run(client, job_id, TICK + timedelta(days=2), "failed")
    assert (second.alerting, second.alert_reasons) == (True, ["failures"]), "the release answers the job as its policy decided it"
    alerting = client.policy(job_id)
    assert (alerting.status, alerting.alerting, alerting.alert_reasons) == ("alerting", True, ["failures"])
    assert alerting.last_alert_at is not None and alerting.status_since >= policy.status_since
    assert [le.job_id for le in client.leases(prefix=job_id) if le.alerting] == [job_id]

    recovered = _run(client, job_id, TICK + timedelta(days=3), "succeeded")
    assert (recovered.alerting, recovered.alert_reasons) == (False, [])
    ok = client.policy(job_id)
    assert (ok.status, ok.alert_reasons, ok.last_alert_at) == ("ok", [], None)

    replaced = admin.put_policy(job_id, missed_ticks=3, recovery_threshold=2)
    assert (replaced.missed_ticks, replaced.recovery_threshold) == (3, 2)
    assert (replaced.consecutive_failures, replaced.failure_rate, replaced.max_runtime, replaced.realert_after) == (None, None, None, None), (
        "a put replaces the whole policy"
    )

    assert admin.delete_policy(job_id) is None
    with pytest.raises(leaseapi.PolicyNotFound) as none:
        client.policy(job_id)
    assert (none.value.code, none.value.status) == ("policy_not_found", 404)
    assert isinstance(none.value, leaseapi.NotFound), "a missing policy is a NotFound too"
    with pytest.raises(leaseapi.PolicyNotFound):
        admin.delete_policy(job_id)
    assert not client.get(job_id).alerting


def test_policy_errors(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    _run(client, job_id, TICK, "succeeded")

    with pytest.raises(leaseapi.Forbidden):
        client.put_policy(job_id, consecutive_failures=3)
    with pytest.raises(leaseapi.NotFound) as unknown:
        admin.put_policy(job_id + ".never", consecutive_failures=3)
    assert unknown.value.code == "not_found" and not isinstance(unknown.value, leaseapi.PolicyNotFound)
    with pytest.raises(leaseapi.NotFound) as unknown_read:
        client.policy(job_id + ".never")
    assert unknown_read.value.code == "not_found", "an unknown job is not_found, not policy_not_found"

    # A value the spec's bounds allow but the service refuses (the recorder
    # checks every request against the spec, so no value out of its bounds).
    with pytest.raises(leaseapi.InvalidRequest) as invalid:
        admin.put_policy(job_id, max_runtime=60, min_runtime=60)
    assert invalid.value.status == 400 and "minRuntimeMs" in invalid.value.detail

    with pytest.raises(ValueError):
        admin.put_policy(job_id, recovery_threshold=2)  # no condition
    with pytest.raises(ValueError):
        admin.put_policy(job_id, consecutive_failures=True)
    with pytest.raises(ValueError):
        admin.put_policy(job_id, failure_rate=(0.5, 4))  # type: ignore[arg-type]
    with pytest.raises(leaseapi.PolicyNotFound):
        client.policy(job_id)


class _Receiver(JSONHandler):
    """Records the events POSTed to it and answers 204."""

    received: List[Dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        self.received.append({"id": self.headers.get("webhook-id"), "body": json.loads(self.read_body())})
        self.answer(204)


@pytest.fixture
def receiver() -> Iterator[ThreadingHTTPServer]:
    with http_server(type("Receiver", (_Receiver,), {"received": []})) as server:
        yield server


def test_alerting_and_ok_webhooks(client: leaseapi.Client, admin: leaseapi.Client, receiver: ThreadingHTTPServer, job_id: str) -> None:
    scope = job_id + "."
    job = scope + "job"
    hook = admin.create_webhook(f"http://127.0.0.1:{receiver.server_port}/hook", ["job.alerting", "job.ok"], [scope])
    assert hook.events == ["job.alerting", "job.ok"]
    _run(client, job, TICK, "succeeded")
    admin.put_policy(job, consecutive_failures=1)

    received = receiver.RequestHandlerClass.received  # type: ignore[attr-defined]
    _run(client, job, TICK + timedelta(days=1), "failed")
    wait_until("job.alerting delivered", lambda: len(received) >= 1, START_TIMEOUT, interval=0.2)
    _run(client, job, TICK + timedelta(days=2), "succeeded")
    wait_until("job.ok delivered", lambda: len(received) >= 2, START_TIMEOUT, interval=0.2)

    assert [r["body"]["type"] for r in received] == ["job.alerting", "job.ok"]
    alerting, ok = (r["body"]["data"] for r in received)
    assert alerting["reasons"] == ["failures"] and alerting["repeat"] is False and alerting["lease"]["alerting"] is True and alerting["jobId"] == job
    assert ok["jobId"] == job and ok["lease"]["alerting"] is False
    assert received[0]["id"] != received[1]["id"], "one webhook-id per transition"
    deliveries = admin.webhook_deliveries(hook.id)
    assert sorted(d.event_type for d in deliveries) == ["job.alerting", "job.ok"]
    assert all(d.event_type in leaseapi.WEBHOOK_EVENTS for d in deliveries)
    admin.delete_webhook(hook.id)
