"""Concurrency groups against a scripted server (the standard library's HTTP
server) that answers as api/openapi.yaml says: the group calls' methods,
paths and bodies, the lease's slot, the group_full refusal, and the runner
retrying it after Retry-After while the tick is within its grace."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional, Tuple

import pytest

import leaseapi
from conftest import Script

GROUP = {
    "name": "reports", "limit": 1, "held": 1, "createdBy": "ops", "createdAt": "2026-11-01T00:00:00.000Z",
    "holders": [{"jobId": "other", "owner": "replica-z", "token": 4, "slot": 1, "slotToken": 9, "expiresAt": "2026-12-01T07:00:31.000Z"}],
}
LEASE = {
    "jobId": "j", "owner": "replica-a", "token": 3, "timeline": 1, "state": "held",
    "acquiredAt": "2026-12-01T07:00:01.000Z", "renewedAt": "2026-12-01T07:00:01.000Z",
    "expiresAt": "2026-12-01T07:00:31.000Z", "releasedAt": None, "ttlMs": 30000,
    "tick": "2026-12-01T07:00:00.000Z", "lastCompletedTick": None, "lastOutcome": None,
    "schedule": "* * * * *", "graceMs": 30000, "nextTick": "2999-01-01T00:00:00.000Z", "paused": False, "pausedAt": None,
    "pausedBy": None, "pausedReason": None, "missedTicks": 0, "skippedTicks": 0, "revokedBy": None,
    "catchUp": "none", "catchUpWindowMs": 86400000, "owedTick": None, "owedReason": None,
    "group": "reports", "slot": 1, "slotToken": 10,
}


def group_full(lease: Optional[Dict[str, Any]] = None) -> Tuple[int, Dict[str, Any], Dict[str, str]]:
    body: Dict[str, Any] = {
        "type": "https://leaseapi.dev/problems/group_full", "title": "Group full", "status": 409,
        "detail": 'every slot of group "reports" is in use (1 of 1)', "code": "group_full", "group": GROUP,
    }
    if lease is not None:
        body["lease"] = lease
    return 409, body, {"Retry-After": "1"}


def test_group_calls(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    released = dict(LEASE, state="released", group=None, slot=1, slotToken=10)
    script.answers = [
        (200, GROUP, {}),
        (200, GROUP, {}),
        (200, {"groups": [GROUP], "nextCursor": "c1"}, {}),
        (200, {"groups": [dict(GROUP, name="reports-2", holders=[], held=0)], "nextCursor": None}, {}),
        (204, None, {}),
        (200, released, {}),
    ]
    group = client.put_group("reports", 1)
    assert (group.name, group.limit, group.held, group.created_by) == ("reports", 1, 1, "ops")
    holder = group.holders[0]
    assert (holder.job_id, holder.owner, holder.token, holder.slot, holder.slot_token) == ("other", "replica-z", 4, 1, 9)
    assert holder.expires_at == datetime(2026, 12, 1, 7, 0, 31, tzinfo=timezone.utc)
    assert client.get_group("reports") == group
    assert [g.name for g in client.groups(prefix="rep", page_size=1)] == ["reports", "reports-2"]
    assert client.delete_group("reports") is None
    lease = client.leave_group("j")
    assert lease.group is None
    assert [(r["method"], r["path"], r["body"]) for r in script.requests] == [
        ("PUT", "/groups/reports", {"limit": 1}),
        ("GET", "/groups/reports", None),
        ("GET", "/groups?prefix=rep&limit=1", None),
        ("GET", "/groups?prefix=rep&limit=1&cursor=c1", None),
        ("DELETE", "/groups/reports", None),
        ("DELETE", "/leases/j/group", None),
    ]


@pytest.mark.parametrize("limit", [0, 10001, 1.5, True])
def test_put_group_checks_the_limit(scripted: Tuple[leaseapi.Client, Script], limit: Any) -> None:
    client, script = scripted
    with pytest.raises(ValueError, match="from 1 to 10000"):
        client.put_group("reports", limit)
    assert script.requests == []


def test_group_in_use(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    script.answers = [(409, {"type": "https://leaseapi.dev/problems/group_in_use", "title": "Group in use", "status": 409,
                             "detail": 'job "j" is in group "reports"', "code": "group_in_use"}, {})]
    with pytest.raises(leaseapi.GroupInUse) as err:
        client.delete_group("reports")
    assert err.value.status == 409 and '"j"' in err.value.detail


def test_acquire_sends_the_group_and_reads_the_slot(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    script.answers = [(200, LEASE, {}), (200, LEASE, {})]
    lease = client.acquire("j", "replica-a", group="reports")
    assert (lease.group, lease.slot, lease.slot_token) == ("reports", 1, 10)
    client.acquire("j", "replica-a", group="")
    assert [r["body"].get("group") for r in script.requests] == ["reports", ""]


def test_group_full_carries_the_group(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    script.answers = [group_full(dict(LEASE, owner="replica-z"))]
    with pytest.raises(leaseapi.GroupFull) as err:
        client.acquire("j", "replica-a", group="reports")
    refusal = err.value
    assert isinstance(refusal, leaseapi.NotAcquired) and refusal.code == "group_full" and refusal.retry_after == 1.0
    assert refusal.group is not None and refusal.group.name == "reports" and refusal.group.holders[0].job_id == "other"
    assert refusal.lease is not None and refusal.lease.owner == "replica-z"
    assert len(script.requests) == 1, "group_full is the runner's to retry, not the client's"


def test_runner_retries_group_full_within_the_grace(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    tick = datetime.now(timezone.utc).replace(microsecond=0)
    # No grace given: the one the refusal's lease holds (30 s) counts.
    script.answers = [group_full(dict(LEASE, tick=None)), group_full(dict(LEASE, tick=None)), (200, LEASE, {}), (200, dict(LEASE, state="released"), {})]
    runner = leaseapi.Runner(client, "replica-a", ttl=30)
    seen: List[Tuple[Optional[int], Optional[int]]] = []
    report = runner.run("j", lambda ctx: seen.append((ctx.slot, ctx.slot_token)), tick=tick, schedule="* * * * *", group="reports")
    assert report.result == "succeeded" and (report.slot, report.slot_token) == (1, 10) and seen == [(1, 10)]
    acquires = [r for r in script.requests if r["path"] == "/leases/j/acquire"]
    assert len(acquires) == 3 and all(r["body"]["group"] == "reports" for r in acquires)
    gaps = [b["at"] - a["at"] for a, b in zip(acquires, acquires[1:])]
    assert all(gap >= 1.0 for gap in gaps), f"retried before Retry-After: 1: gaps {gaps}"


def test_runner_skips_group_full_after_the_grace(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    runner = leaseapi.Runner(client, "replica-a", ttl=30)
    called: List[bool] = []
    # The tick's grace ends within a second: a retry after Retry-After: 1
    # would come too late.
    tick = datetime.now(timezone.utc)
    script.answers = [group_full()]
    with pytest.raises(leaseapi.GroupFull):
        runner.run("j", lambda ctx: called.append(True), tick=tick, schedule="* * * * *", grace=0.5, group="reports")
    # nearest tick, as the integrations acquire: the grace counts from the
    # first refusal; the decorator skips quietly.
    script.answers = [group_full(dict(LEASE, graceMs=500))]
    assert leaseapi.decorator.run_leased(runner, "j", lambda: called.append(True), schedule="* * * * *", group="reports") is None
    assert called == [] and len(script.requests) == 2


def test_group_full_until() -> None:
    from leaseapi.runner import _group_full_until

    now = datetime(2026, 12, 1, 7, 0, 2, tzinfo=timezone.utc)
    tick = now.replace(second=0)
    refusal = leaseapi.GroupFull("full", lease=leaseapi.Lease.from_json(LEASE))
    bare = leaseapi.GroupFull("full")
    assert _group_full_until(tick, 10, refusal, now, 5) == tick + timedelta(seconds=10)
    assert _group_full_until(tick, None, refusal, now, 5) == tick + timedelta(seconds=30)
    assert _group_full_until(None, None, refusal, now, 5) == now + timedelta(seconds=30)
    assert _group_full_until(tick, None, bare, now, 5) == now + timedelta(seconds=5)
    soon = leaseapi.GroupFull("full", lease=leaseapi.Lease.from_json(dict(LEASE, nextTick="2026-12-01T07:00:20.000Z")))
    assert _group_full_until(tick, None, soon, now, 5) == datetime(2026, 12, 1, 7, 0, 20, tzinfo=timezone.utc)


def test_the_decorator_sends_the_group(scripted: Tuple[leaseapi.Client, Script]) -> None:
    client, script = scripted
    script.answers = [group_full()]
    runner = leaseapi.Runner(client, "replica-a", owed_poll_interval=0)
    called: List[bool] = []

    @leaseapi.leased(client, "j", schedule="* * * * *", grace=0.5, group="reports", runner=runner, owed=False)
    def job() -> None:
        called.append(True)

    assert job() is None and called == []
    assert [(r["path"], r["body"].get("group"), r["body"].get("nearestTick")) for r in script.requests] == [("/leases/j/acquire", "reports", True)]
