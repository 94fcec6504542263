"""The client against a real leaseapi: every endpoint a replica or operator
uses, the errors it raises, and the retry of 429 after Retry-After. The
recorder fixture checks every answer the client read against the spec."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

import leaseapi
from conftest import ADMIN_TOKEN, Recorder, Server

TICK = datetime(2026, 11, 30, 7, 0, tzinfo=timezone.utc)


def test_acquire_heartbeat_release(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    lease = client.acquire(job_id, "replica-a", ttl=5, tick=TICK, schedule="0 7 * * *", grace=timedelta(minutes=2))
    assert (lease.job_id, lease.owner, lease.state, lease.tick) == (job_id, "replica-a", "held", TICK)
    assert lease.ttl == 5 and lease.schedule == "0 7 * * *" and lease.grace == 120
    assert lease.expires_at.tzinfo is not None and lease.next_tick is not None

    again = client.acquire(job_id, "replica-a", ttl=5, tick=TICK)
    assert again.token == lease.token, "the same owner and tick is an idempotent retry"

    renewed = client.heartbeat(job_id, "replica-a", lease.token, ttl=6)
    assert renewed.ttl == 6 and renewed.token == lease.token

    released = client.release(job_id, "replica-a", lease.token, outcome="succeeded")
    assert released.state == "released" and released.last_completed_tick == TICK and released.last_outcome == "succeeded"
    assert client.release(job_id, "replica-a", lease.token).state == "released", "a second release is idempotent"

    assert client.get(job_id) == released
    runs = client.runs(job_id, limit=10)
    assert [(r.token, r.owner, r.tick, r.outcome) for r in runs] == [(lease.token, "replica-a", TICK, "succeeded")]
    assert runs[0].duration is not None and runs[0].duration >= 0

    forgotten = admin.forget_schedule(job_id)
    assert forgotten.schedule is None and forgotten.grace is None


def test_conflicts_raise_with_code_and_lease(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    lease = client.acquire(job_id, "replica-a", ttl=30, tick=TICK)

    with pytest.raises(leaseapi.LeaseHeld) as held:
        client.acquire(job_id, "replica-b", tick=TICK)
    err = held.value
    assert isinstance(err, leaseapi.NotAcquired) and isinstance(err, leaseapi.LeaseError)
    assert (err.code, err.status) == ("lease_held", 409)
    assert err.lease is not None and err.lease.owner == "replica-a" and err.lease.token == lease.token
    assert err.retry_after is not None and err.retry_after >= 1
    assert err.request_id and err.detail

    client.release(job_id, "replica-a", lease.token)
    with pytest.raises(leaseapi.TickDone) as done:
        client.acquire(job_id, "replica-b", tick=TICK)
    assert done.value.code == "tick_done" and done.value.lease is not None and done.value.lease.last_completed_tick == TICK

    paused = admin.pause(job_id, reason="maintenance")
    assert paused.paused and paused.paused_reason == "maintenance" and paused.paused_at is not None
    with pytest.raises(leaseapi.JobPaused) as job_paused:
        client.acquire(job_id, "replica-b", tick=TICK + timedelta(days=1))
    assert job_paused.value.code == "job_paused" and job_paused.value.lease is not None and job_paused.value.lease.paused
    assert not admin.resume(job_id).paused

    later = client.acquire(job_id, "replica-b", tick=TICK + timedelta(days=1))
    revoked = admin.revoke(job_id)
    assert revoked.state == "revoked" and revoked.token == later.token + 1
    with pytest.raises(leaseapi.LeaseLost) as lost:
        client.heartbeat(job_id, "replica-b", later.token)
    assert lost.value.code == "lease_lost" and lost.value.lease is not None and lost.value.lease.state == "revoked"
    with pytest.raises(leaseapi.LeaseLost):
        client.release(job_id, "replica-b", later.token, outcome="failed")

    # Nothing of the job lies ahead of the clock: a repair changes nothing.
    repaired = admin.repair(job_id, reason="clock was fast")
    assert repaired.token == revoked.token and repaired.last_completed_tick == TICK


def test_errors_of_bad_calls(server: Server, client: leaseapi.Client, recorder: Recorder, job_id: str) -> None:
    with pytest.raises(leaseapi.NotFound) as not_found:
        client.get(job_id + ".never")
    assert (not_found.value.code, not_found.value.status, not_found.value.lease) == ("not_found", 404, None)

    with pytest.raises(leaseapi.InvalidRequest) as invalid:
        client.acquire(job_id, "replica-a", ttl=0.5)  # below LEASEAPI_MIN_TTL (1s)
    assert invalid.value.code == "invalid_request" and "ttl" in invalid.value.detail.lower()

    with pytest.raises(leaseapi.Forbidden) as forbidden:
        client.revoke(job_id)
    assert forbidden.value.code == "forbidden"

    stranger = leaseapi.Client(server.url, "not-a-token", on_exchange=recorder)
    with pytest.raises(leaseapi.Unauthorized) as unauthorized:
        stranger.get(job_id)
    assert unauthorized.value.code == "unauthorized" and unauthorized.value.status == 401

    nobody = leaseapi.Client(f"http://127.0.0.1:{_closed_port()}", retry_for=0)
    with pytest.raises(leaseapi.ConnectionFailed) as refused:
        nobody.get(job_id)
    assert refused.value.code is None and refused.value.status is None

    with pytest.raises(ValueError):
        client.acquire(job_id, "replica-a", tick=datetime(2026, 1, 1))  # naive: its zone would be a guess
    with pytest.raises(ValueError):
        client.acquire(job_id, "replica-a", tick=TICK, nearest_tick=True)


def _closed_port() -> int:
    from conftest import free_port

    return free_port()


def test_list_pages_and_reads(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    prefix = job_id + "."
    ids = [f"{prefix}{i}" for i in range(5)]
    for i, jid in enumerate(ids):
        lease = client.acquire(jid, f"replica-{i % 2}", ttl=30)
        if i % 2 == 0:
            client.release(jid, lease.owner, lease.token)

    first = client.list(prefix=prefix, limit=2)
    assert [le.job_id for le in first.leases] == ids[:2] and first.next_cursor is not None
    assert [le.job_id for le in client.leases(prefix=prefix, page_size=2)] == ids
    assert [le.job_id for le in client.leases(prefix=prefix, state="held")] == [ids[1], ids[3]]
    assert [le.job_id for le in client.leases(prefix=prefix, owner="replica-0", paused=False, overdue=False)] == [ids[0], ids[2], ids[4]]

    recent = client.recent_runs(outcomes=["succeeded"], limit=1000)
    assert {r.job_id for r in recent.runs} >= {ids[0], ids[2], ids[4]}

    stats = client.stats()
    assert stats.leases["held"] >= 2 and stats.runs_24h["succeeded"] >= 3

    me = client.whoami()
    assert not me.open and me.role == "lease" and me.scopes == ["*"]
    assert admin.whoami().role == "admin"


def test_rate_limited_call_is_retried_after_retry_after(server: Server, admin: leaseapi.Client, recorder: Recorder, job_id: str) -> None:
    created = admin.create_credential("py-rate-" + uuid.uuid4().hex[:8], "read", ["*"], rate_per_second=1)
    limited = leaseapi.Client(server.url, created.token, on_exchange=recorder)

    # Spend the credential's allowance (bounded: a rate of 1/s allows a
    # small burst at most).
    for _ in range(50):
        try:
            limited.whoami(retry_for=0)
        except leaseapi.RateLimited as err:
            assert err.code == "rate_limited" and err.status == 429 and err.retry_after is not None and err.retry_after >= 1
            break
    else:
        pytest.fail("50 calls of a credential limited to 1 per second were never answered 429")

    before = len(recorder.exchanges)
    assert limited.whoami(retry_for=30).role == "read"
    statuses = [e["status"] for e in recorder.exchanges[before:]]
    assert statuses[0] == 429 and statuses[-1] == 200, f"the call was not retried after its 429: {statuses}"


def test_client_refuses_bad_settings() -> None:
    with pytest.raises(ValueError):
        leaseapi.Client("ftp://example.com")
    with pytest.raises(ValueError):
        leaseapi.Client("http://localhost:8080", token="has space")
    assert ADMIN_TOKEN not in repr(leaseapi.Client("http://localhost:8080", ADMIN_TOKEN))
