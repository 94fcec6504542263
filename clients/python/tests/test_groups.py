"""Concurrency groups against a real leaseapi: the group calls, the slot of
a grant, group_full naming the holder, and the runner waiting out a full
group within the tick's grace; every answer checked against the spec."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import List, Optional, Tuple

import pytest

import leaseapi


def test_group_calls(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    group = f"{job_id}-group"
    with pytest.raises(leaseapi.Forbidden):
        client.put_group(group, 2)
    made = admin.put_group(group, 2)
    assert (made.name, made.limit, made.held, made.holders) == (group, 2, 0, [])
    assert made.created_at is not None

    lease = client.acquire(job_id, "a", ttl=5, group=group)
    assert (lease.group, lease.slot) == (group, 1) and lease.slot_token is not None and lease.slot_token >= 1
    got = client.get_group(group)
    holder = got.holders[0]
    assert (got.held, holder.job_id, holder.slot, holder.slot_token) == (1, job_id, 1, lease.slot_token)
    assert holder.expires_at is not None
    assert [g.name for g in client.groups(prefix=group)] == [group]

    with pytest.raises(leaseapi.GroupInUse) as in_use:
        admin.delete_group(group)
    assert job_id in in_use.value.detail
    assert admin.leave_group(job_id).group is None
    admin.delete_group(group)
    with pytest.raises(leaseapi.NotFound):
        client.get_group(group)


def test_group_full_past_the_grace_is_skipped(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    group = f"{job_id}-group"
    admin.put_group(group, 1)
    holder = f"{job_id}-holder"
    client.acquire(holder, "a", ttl=60, group=group)

    with pytest.raises(leaseapi.GroupFull) as refused:
        client.acquire(job_id, "b", group=group)
    full = refused.value
    assert full.status == 409 and full.retry_after is not None and full.retry_after >= 1
    assert full.group is not None and (full.group.name, full.group.limit, full.group.held) == (group, 1, 1)
    assert full.group.holders[0].job_id == holder

    # The tick's grace (1 s) ends before Retry-After (about a minute): skipped.
    runner = leaseapi.Runner(client, "b", ttl=3)
    tick = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    called: List[bool] = []
    with pytest.raises(leaseapi.GroupFull):
        runner.run(job_id, lambda ctx: called.append(True), tick=tick, schedule="* * * * *", grace=1, group=group)
    assert called == []


def test_runner_wins_the_slot_its_holder_let_expire(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    group = f"{job_id}-group"
    admin.put_group(group, 1)
    held = client.acquire(f"{job_id}-holder", "a", ttl=1.5, group=group)
    assert held.slot_token is not None
    # No tick nor grace: retried for acquire_wait (10 s), far beyond the
    # holder's expiry.
    runner = leaseapi.Runner(client, "b", ttl=3)
    seen: List[Tuple[Optional[int], Optional[int]]] = []
    report = runner.run(job_id, lambda ctx: seen.append((ctx.slot, ctx.slot_token)), group=group)
    assert report.result == "succeeded", report.error
    assert report.slot == 1 and report.slot_token is not None and report.slot_token > held.slot_token
    assert seen == [(report.slot, report.slot_token)]
