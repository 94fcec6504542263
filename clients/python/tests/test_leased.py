"""leaseapi.leased in this process: the service picks the tick (nearest
tick), a won tick runs the function and returns its value, a tick that ran,
or a paused job, is a quiet skip, and an exception propagates after the
lease is released failed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import List

import pytest

import leaseapi


def test_leased_runs_the_tick_the_service_picks_once(client: leaseapi.Client, admin: leaseapi.Client, job_id: str) -> None:
    ticks: List[datetime] = []

    @leaseapi.leased(client, job_id, schedule="@every 1h", ttl=3)
    def hourly(x: int) -> int:
        run = leaseapi.current_run()
        assert run is not None and run.tick is not None
        ticks.append(run.tick)
        return x * 2

    assert hourly(21) == 42
    assert len(ticks) == 1 and ticks[0].tzinfo is not None
    assert ticks[0].timestamp() % 3600 == 0, f"{ticks[0]} is not a tick of @every 1h"
    # The newest tick at or before the service's clock + min(1 min, half the gap).
    assert ticks[0] <= datetime.now(timezone.utc) + timedelta(minutes=1)
    lease = client.get(job_id)
    assert (lease.last_completed_tick, lease.schedule, lease.last_outcome) == (ticks[0], "@every 1h", "succeeded")

    assert hourly(21) is None, "the tick ran: a second call is a quiet skip"
    admin.pause(job_id)
    assert hourly(21) is None, "a paused job is a quiet skip"
    assert len(ticks) == 1


def test_leased_raises_what_the_function_raises(client: leaseapi.Client, job_id: str) -> None:
    @leaseapi.leased(client, job_id, schedule="@every 1h", ttl=3)
    def broken() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError):
        broken()
    assert client.get(job_id).last_outcome == "failed"
