"""The minimum interval between two grants of a job (``min_interval``,
``minIntervalMs``): against a real leaseapi, the ``too_soon`` refusal of the
client, of a batch item and of the runner; against a scripted server, the
``feature_disabled`` refusal of a service whose upgrade is not finalized."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Dict, List

import pytest

import leaseapi
from conftest import JSONHandler, http_server

HOUR = 3600


def test_a_grant_too_soon_is_refused(client: leaseapi.Client, job_id: str) -> None:
    first = client.acquire(job_id, "host-a", ttl=30, min_interval=HOUR)
    assert client.acquire(job_id, "host-a", ttl=30, min_interval=HOUR).token == first.token, "the holder's renewal is not refused"
    client.release(job_id, "host-a", first.token)

    with pytest.raises(leaseapi.TooSoon) as info:
        client.acquire(job_id, "host-b", ttl=30, min_interval=timedelta(hours=1))
    err = info.value
    assert isinstance(err, leaseapi.NotAcquired) and (err.status, err.code) == (409, "too_soon")
    assert err.lease is not None and err.lease.token == first.token and err.lease.acquired_at == first.acquired_at
    assert err.retry_after is not None and HOUR - 10 <= err.retry_after <= HOUR
    assert client.get(job_id).token == first.token, "a refusal writes nothing"

    results = client.acquire_batch([leaseapi.AcquireItem(job_id), leaseapi.AcquireItem(job_id + ".new")], owner="host-b", ttl=30, min_interval=HOUR)
    assert isinstance(results[0], leaseapi.TooSoon) and results[0].retry_after is not None and results[0].retry_after >= HOUR - 10
    assert isinstance(results[1], leaseapi.Lease), "a job's first grant is never too soon"

    # An item's own 0 wins over the default: no minimum.
    again = client.acquire_batch([leaseapi.AcquireItem(job_id, min_interval=0)], owner="host-b", ttl=30, min_interval=HOUR)
    assert isinstance(again[0], leaseapi.Lease) and again[0].token == first.token + 1


def test_the_runner_skips_a_run_too_soon(client: leaseapi.Client, job_id: str) -> None:
    ran: List[str] = []
    leaseapi.Runner(client, "host-a", ttl=3).run(job_id, lambda ctx: ran.append("a"), min_interval=HOUR)
    with pytest.raises(leaseapi.TooSoon):
        leaseapi.Runner(client, "host-b", ttl=3, batch=False).run(job_id, lambda ctx: ran.append("b"), min_interval=HOUR)
    with pytest.raises(leaseapi.TooSoon):
        leaseapi.Runner(client, "host-c", ttl=3).run(job_id, lambda ctx: ran.append("c"), min_interval=HOUR)
    assert ran == ["a"]


@pytest.mark.parametrize("value", [-1, 0.0001, timedelta(days=32)])
def test_min_interval_out_of_range_is_refused_before_sending(value: Any) -> None:
    client = leaseapi.Client("http://127.0.0.1:9")  # nothing is sent
    with pytest.raises(ValueError, match="min interval"):
        client.acquire("j", "host-a", min_interval=value)
    with pytest.raises(ValueError, match="min interval"):
        leaseapi.Runner(client, "host-a").run("j", lambda ctx: None, min_interval=value)


def test_feature_disabled_is_an_invalid_request_not_retried() -> None:
    detail = ("minIntervalMs is off until every instance runs leaseapi 1.1.0 or later and `leaseapi upgrade finalize` has run "
              "(the database is finalized at feature level 0, minIntervalMs needs 1)")
    requests: List[Dict[str, Any]] = []

    class Handler(JSONHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            requests.append(json.loads(self.read_body()))
            self.answer(400, {"type": "https://leaseapi.dev/problems/feature_disabled", "title": "Feature disabled",
                              "status": 400, "detail": detail, "code": "feature_disabled"})

    with http_server(Handler) as server:
        client = leaseapi.Client(f"http://127.0.0.1:{server.server_port}", retry_for=5)
        with pytest.raises(leaseapi.FeatureDisabled) as info:
            client.acquire("nightly", "host-a", min_interval=60)
    err = info.value
    assert isinstance(err, leaseapi.InvalidRequest) and (err.status, err.code, err.detail) == (400, "feature_disabled", detail)
    assert requests == [{"owner": "host-a", "minIntervalMs": 60000}], "sent once, with the field in milliseconds"
