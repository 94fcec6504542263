"""The HTTP client of the leaseapi service (standard library only)."""

from __future__ import annotations

import dataclasses
import http.client
import json
import logging
import random
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import errors
from .models import (
    Credential,
    FailureRate,
    Group,
    GroupPage,
    JobPolicy,
    Lease,
    LeasePage,
    Owed,
    Run,
    RunPage,
    Seconds,
    Stats,
    Webhook,
    WebhookDelivery,
    Whoami,
    format_time,
    parse_time,
    to_millis,
    to_seconds,
)

__all__ = ["Client", "Exchange", "AcquireItem", "HeartbeatItem", "BatchResult"]

T = TypeVar("T")

# Backoff of retried calls when the answer names no Retry-After (a network
# error): from 50 ms, doubling, up to 2 s, each wait jittered to [d/2, d).
_MIN_BACKOFF = 0.05
_MAX_BACKOFF = 2.0

_OUTCOMES = ("succeeded", "failed")

# The most job ids one POST /owed takes (the spec's maxItems); owed() asks
# in batches of this many, and so does the runner's owed-tick poll.
_OWED_BATCH = 1000

# The most items one POST /acquire or POST /heartbeat takes; a longer batch
# is sent as several requests.
MAX_BATCH_ITEMS = 1000


@dataclasses.dataclass(frozen=True)
class AcquireItem:
    """One acquire of :meth:`Client.acquire_batch`: the job and the fields of
    :meth:`Client.acquire` it sets itself; a field left None takes the
    batch's default. An item with ``tick`` or ``nearest_tick`` takes neither
    from the defaults."""

    job_id: str
    owner: Optional[str] = None
    ttl: Optional[Seconds] = None
    tick: Optional[datetime] = None
    nearest_tick: bool = False
    schedule: Optional[str] = None
    grace: Optional[Seconds] = None
    catch_up: Optional[str] = None
    catch_up_window: Optional[Seconds] = None
    group: Optional[str] = None
    min_interval: Optional[Seconds] = None


@dataclasses.dataclass(frozen=True)
class HeartbeatItem:
    """One heartbeat of :meth:`Client.heartbeat_batch`: the job and the
    grant's token; ``owner`` and ``ttl`` left None take the batch's
    defaults."""

    job_id: str
    token: int
    owner: Optional[str] = None
    ttl: Optional[Seconds] = None


#: One item's result in a batch: the lease its single call would have
#: returned, or the error that call would have raised.
BatchResult = Union[Lease, errors.LeaseError]


@dataclasses.dataclass(frozen=True)
class Exchange:
    """One request and the answer to it, as the client sent and read them;
    what ``Client(on_exchange=...)`` is called with (for tracing, or to check
    answers against the service's OpenAPI document)."""

    method: str
    #: The path and query, e.g. ``/leases/nightly/acquire``.
    path: str
    request_body: Optional[Dict[str, Any]]
    status: int
    headers: Dict[str, str]
    body: bytes


def _jitter(d: float) -> float:
    return d / 2 + random.random() * d / 2


class Client:
    """A client of one leaseapi service.

    ``url`` is the service's base URL (``https://leaseapi.internal``);
    ``token`` the bearer token (a credential's ``<id>.<secret>``, or one of
    the configured tokens), sent with every call. ``timeout`` bounds each
    request (seconds). Calls answered 429 ``rate_limited`` or 503
    ``unavailable``/``overloaded``, and calls that got no answer, are retried
    after the answer's ``Retry-After`` (else with a short backoff) for up to
    ``retry_for`` seconds; every method takes its own ``retry_for`` too (0:
    one attempt). Retrying is safe: an acquire by the same owner for the same
    tick, and a heartbeat or release with the same owner and token, are
    idempotent, and a trigger sends one Idempotency-Key with all its retries;
    the creates of credentials and webhooks are retried only after answers
    that say nothing was done.

    For https with a private CA pass ``ca_file`` (a PEM bundle), or a whole
    ``ssl_context``. ``on_exchange`` is called after every answer with the
    :class:`Exchange`. The client keeps no connection open and is safe to
    share between threads.
    """

    #: The method of every operation of api/openapi.yaml the client makes, by
    #: operationId (a test fails when the spec gains one missing here). Not
    #: listed: the probes, /metrics, /openapi.yaml and the console, which are
    #: for orchestrators, Prometheus and browsers.
    OPERATIONS: Mapping[str, str] = {
        "acquireLease": "acquire",
        "heartbeatLease": "heartbeat",
        "acquireBatch": "acquire_batch",
        "heartbeatBatch": "heartbeat_batch",
        "releaseLease": "release",
        "getLease": "get",
        "listLeases": "list",
        "listRuns": "runs",
        "listRecentRuns": "recent_runs",
        "getStats": "stats",
        "whoami": "whoami",
        "owedTicks": "owed",
        "revokeLease": "revoke",
        "pauseJob": "pause",
        "resumeJob": "resume",
        "repairJob": "repair",
        "forgetSchedule": "forget_schedule",
        "triggerJob": "trigger",
        "cancelTrigger": "cancel_trigger",
        "createCredential": "create_credential",
        "listCredentials": "credentials",
        "deleteCredential": "delete_credential",
        "createWebhook": "create_webhook",
        "listWebhooks": "webhooks",
        "deleteWebhook": "delete_webhook",
        "listWebhookDeliveries": "webhook_deliveries",
        "putGroup": "put_group",
        "getGroup": "get_group",
        "listGroups": "list_groups",
        "deleteGroup": "delete_group",
        "leaveGroup": "leave_group",
        "putPolicy": "put_policy",
        "getPolicy": "policy",
        "deletePolicy": "delete_policy",
    }

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        *,
        timeout: Seconds = 10.0,
        retry_for: Seconds = 30.0,
        ca_file: Optional[str] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
        user_agent: str = "leaseapi-python/0.1",
        logger: Optional[logging.Logger] = None,
        on_exchange: Optional[Callable[[Exchange], None]] = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"leaseapi url {url!r} must be an http:// or https:// URL")
        if ca_file is not None and ssl_context is not None:
            raise ValueError("pass ca_file or ssl_context, not both")
        if token is not None and (not token or any(c.isspace() for c in token)):
            raise ValueError("token must be non-empty and without white space")
        self.url = url.rstrip("/")
        self.timeout = to_seconds(timeout)
        self.retry_for = to_seconds(retry_for)
        if self.timeout <= 0 or self.retry_for < 0:
            raise ValueError("timeout must be positive and retry_for not negative")
        self._token = token
        self._user_agent = user_agent
        self._log = logger or logging.getLogger("leaseapi")
        self._on_exchange = on_exchange
        if ca_file is not None:
            ssl_context = ssl.create_default_context(cafile=ca_file)
        handlers: List[urllib.request.BaseHandler] = [_NoRedirect()]
        if ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=ssl_context))
        # No proxy handler from the environment: leaseapi is an internal
        # service, and a lease call must not take a detour.
        handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        # Never the token.
        return f"Client({self.url!r})"

    # Leases: what a replica calls.

    def acquire(
        self,
        job_id: str,
        owner: str,
        *,
        ttl: Optional[Seconds] = None,
        tick: Optional[datetime] = None,
        nearest_tick: bool = False,
        schedule: Optional[str] = None,
        grace: Optional[Seconds] = None,
        catch_up: Optional[str] = None,
        catch_up_window: Optional[Seconds] = None,
        group: Optional[str] = None,
        min_interval: Optional[Seconds] = None,
        retry_for: Optional[Seconds] = None,
        timeout: Optional[Seconds] = None,
    ) -> Lease:
        """Acquires the lease of ``job_id`` for ``owner`` (``POST
        /leases/{jobId}/acquire``), or renews it when ``owner`` holds it for
        the same tick.

        ``tick`` is the scheduled fire time the grant is for; with
        ``nearest_tick=True`` the service picks the tick of the schedule
        nearest to its clock instead (the answer's ``tick`` says which).
        ``schedule`` (a cron spec) and ``grace`` register the job's schedule
        so that ticks no replica started are recorded missed; ``catch_up``
        (``none`` or ``latest``) and ``catch_up_window`` register with it
        whether the latest missed tick is owed once afterwards (None keeps the
        stored policy). ``group`` puts the job in that concurrency group
        from this grant on (``""`` takes it out; None keeps its group): the
        grant takes one of the group's slots, and the lease's ``slot`` and
        ``slot_token`` say which. ``min_interval`` (up to 31 days; 0 or
        None: none) refuses a new grant sooner than that after the job's
        previous grant started, by the service's clock: for a job run
        without ticks on hosts whose clocks differ. Raises
        :class:`LeaseHeld`, :class:`TickDone`, :class:`JobPaused`,
        :class:`TooSoon` or :class:`GroupFull` (all :class:`NotAcquired`)
        when this tick is not this owner's to run (now), and
        :class:`FeatureDisabled` for ``min_interval`` while the service's
        upgrade to a release that knows it is not finalized.
        """
        body = _acquire_fields(owner, ttl, tick, nearest_tick, schedule, grace, catch_up, catch_up_window, group, min_interval)
        check_schedule_options(schedule, grace, catch_up, catch_up_window)
        return self._call("POST", f"/leases/{_segment(job_id)}/acquire", body=body, retry_for=retry_for, timeout=timeout, parse=Lease.from_json)

    def heartbeat(
        self,
        job_id: str,
        owner: str,
        token: int,
        *,
        ttl: Optional[Seconds] = None,
        retry_for: Optional[Seconds] = None,
        timeout: Optional[Seconds] = None,
    ) -> Lease:
        """Extends the grant ``token`` of ``owner`` (``POST
        /leases/{jobId}/heartbeat``); :class:`LeaseLost` when it is gone."""
        body: Dict[str, Any] = {"owner": owner, "token": token}
        if ttl is not None:
            body["ttlMs"] = to_millis(ttl, "ttl")
        return self._call("POST", f"/leases/{_segment(job_id)}/heartbeat", body=body, retry_for=retry_for, timeout=timeout, parse=Lease.from_json)

    def release(
        self,
        job_id: str,
        owner: str,
        token: int,
        *,
        outcome: str = "succeeded",
        retry_for: Optional[Seconds] = None,
        timeout: Optional[Seconds] = None,
    ) -> Lease:
        """Ends the grant ``token`` of ``owner`` with ``outcome``
        (``succeeded`` or ``failed``); a succeeded tick is never granted
        again. :class:`LeaseLost` when the grant is gone."""
        if outcome not in _OUTCOMES:
            raise ValueError(f"outcome {outcome!r} must be one of {', '.join(_OUTCOMES)}")
        body = {"owner": owner, "token": token, "outcome": outcome}
        return self._call("POST", f"/leases/{_segment(job_id)}/release", body=body, retry_for=retry_for, timeout=timeout, parse=Lease.from_json)

    def acquire_batch(
        self,
        items: Iterable[AcquireItem],
        *,
        owner: Optional[str] = None,
        ttl: Optional[Seconds] = None,
        tick: Optional[datetime] = None,
        nearest_tick: bool = False,
        schedule: Optional[str] = None,
        grace: Optional[Seconds] = None,
        catch_up: Optional[str] = None,
        catch_up_window: Optional[Seconds] = None,
        group: Optional[str] = None,
        min_interval: Optional[Seconds] = None,
        retry_for: Optional[Seconds] = None,
        timeout: Optional[Seconds] = None,
    ) -> List[BatchResult]:
        """Acquires the leases of several jobs in one request (``POST
        /acquire``), each decided exactly as its :meth:`acquire` would be.
        The keyword arguments are the defaults of every item that does not
        set its own (see :class:`AcquireItem`).

        Returns one result per item, in item order: the :class:`Lease`, or
        the :class:`LeaseError` its single call would have raised
        (:class:`LeaseHeld`, :class:`Forbidden`, ...), not raised. Items
        answered 429 or 503 are sent again, together, as a single call would
        be, until ``retry_for`` ends. Raises only for the request as a
        whole: ValueError for a job given twice, and the error of an answer
        that is not 200 (no answer, 401, 503 for every item, or 404/405 from
        a leaseapi without the batch routes). More than 1000 items go as
        several requests."""
        items = list(items)
        defaults = _acquire_fields(owner, ttl, tick, nearest_tick, schedule, grace, catch_up, catch_up_window, group, min_interval)
        bodies = []
        for item in items:
            check_schedule_options(_pick(item.schedule, schedule), _pick(item.grace, grace), _pick(item.catch_up, catch_up), _pick(item.catch_up_window, catch_up_window))
            fields = _acquire_fields(
                item.owner, item.ttl, item.tick, item.nearest_tick, item.schedule, item.grace, item.catch_up, item.catch_up_window, item.group, item.min_interval
            )
            bodies.append({"jobId": item.job_id, **fields})
        return self._batch("/acquire", defaults, bodies, retry_for, timeout)

    def heartbeat_batch(
        self,
        items: Iterable[HeartbeatItem],
        *,
        owner: Optional[str] = None,
        ttl: Optional[Seconds] = None,
        retry_for: Optional[Seconds] = None,
        timeout: Optional[Seconds] = None,
    ) -> List[BatchResult]:
        """Extends several grants in one request (``POST /heartbeat``), each
        as its :meth:`heartbeat` would; ``owner`` and ``ttl`` are the
        defaults of the items. Results, retries and errors as
        :meth:`acquire_batch`: a grant that is gone is a :class:`LeaseLost`
        in its place."""
        defaults: Dict[str, Any] = {}
        if owner is not None:
            defaults["owner"] = owner
        if ttl is not None:
            defaults["ttlMs"] = to_millis(ttl, "ttl")
        bodies = []
        for item in items:
            body: Dict[str, Any] = {"jobId": item.job_id, "token": item.token}
            if item.owner is not None:
                body["owner"] = item.owner
            if item.ttl is not None:
                body["ttlMs"] = to_millis(item.ttl, "ttl")
            bodies.append(body)
        return self._batch("/heartbeat", defaults, bodies, retry_for, timeout)

    # Reading.

    def get(self, job_id: str, *, retry_for: Optional[Seconds] = None) -> Lease:
        """The lease of ``job_id``; :class:`NotFound` when it has none."""
        return self._call("GET", f"/leases/{_segment(job_id)}", retry_for=retry_for, parse=Lease.from_json)

    def list(
        self,
        *,
        state: Optional[str] = None,
        owner: Optional[str] = None,
        prefix: Optional[str] = None,
        paused: Optional[bool] = None,
        overdue: Optional[bool] = None,
        alerting: Optional[bool] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        retry_for: Optional[Seconds] = None,
    ) -> LeasePage:
        """One page of leases sorted by job id (``GET /leases``); pass the
        page's ``next_cursor`` as ``cursor`` for the next. :meth:`leases`
        walks every page."""
        query = {"state": state, "owner": owner, "prefix": prefix, "paused": paused, "overdue": overdue,
                 "alerting": alerting, "limit": limit, "cursor": cursor}
        return self._call("GET", "/leases", query=query, retry_for=retry_for, parse=LeasePage.from_json)

    def leases(self, *, page_size: Optional[int] = None, **filters: Any) -> Iterator[Lease]:
        """Every lease that matches the filters of :meth:`list` (``state``,
        ``owner``, ``prefix``, ``paused``, ``overdue``, ``alerting``), page after page of
        ``page_size``."""
        cursor: Optional[str] = None
        while True:
            page = self.list(limit=page_size, cursor=cursor, **filters)
            yield from page.leases
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def runs(self, job_id: str, *, limit: Optional[int] = None, retry_for: Optional[Seconds] = None) -> List[Run]:
        """The run history of ``job_id``, newest first (``GET
        /leases/{jobId}/runs``)."""
        return self._call("GET", f"/leases/{_segment(job_id)}/runs", query={"limit": limit}, retry_for=retry_for, parse=lambda data: [Run.from_json(item) for item in data["runs"]])

    def recent_runs(
        self,
        *,
        outcomes: Optional[List[str]] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        retry_for: Optional[Seconds] = None,
    ) -> RunPage:
        """One page of the newest runs of every job in scope (``GET
        /runs``), optionally only those with one of ``outcomes``."""
        query = {"outcome": ",".join(outcomes) if outcomes else None, "limit": limit, "cursor": cursor}
        return self._call("GET", "/runs", query=query, retry_for=retry_for, parse=RunPage.from_json)

    def stats(self, *, retry_for: Optional[Seconds] = None) -> Stats:
        """Counts of the jobs in scope and of their runs of the last 24 h."""
        return self._call("GET", "/stats", retry_for=retry_for, parse=Stats.from_json)

    def whoami(self, *, retry_for: Optional[Seconds] = None) -> Whoami:
        """The caller's credential (name, role, scopes), or open mode."""
        return self._call("GET", "/whoami", retry_for=retry_for, parse=Whoami.from_json)

    def owed(self, job_ids: Iterable[str], *, retry_for: Optional[Seconds] = None, timeout: Optional[Seconds] = None) -> List[Owed]:
        """The ticks the jobs ``job_ids`` owe (``POST /owed``, role read), in
        job id order, at most one per job; jobs that owe nothing or are
        unknown are absent. Claim each with ``acquire(job_id, owner,
        tick=owed.tick)``. Asks in batches of 1000 ids; no ids, no call."""
        ids = sorted(set(job_ids))
        found: List[Owed] = []
        for start in range(0, len(ids), _OWED_BATCH):
            body = {"jobs": ids[start : start + _OWED_BATCH]}
            found += self._call("POST", "/owed", body=body, retry_for=retry_for, timeout=timeout, parse=lambda data: [Owed.from_json(item) for item in data["owed"]])
        return found

    # Operating (role admin).

    def revoke(self, job_id: str, *, retry_for: Optional[Seconds] = None) -> Lease:
        """Force-releases a held lease: its holder's next heartbeat answers
        :class:`LeaseLost`, and the runner stops the job."""
        return self._call("DELETE", f"/leases/{_segment(job_id)}", retry_for=retry_for, parse=Lease.from_json)

    def pause(self, job_id: str, reason: Optional[str] = None, *, retry_for: Optional[Seconds] = None) -> Lease:
        """Pauses a job: acquires answer :class:`JobPaused` until
        :meth:`resume`."""
        body = {} if reason is None else {"reason": reason}
        return self._call("POST", f"/leases/{_segment(job_id)}/pause", body=body, retry_for=retry_for, parse=Lease.from_json)

    def resume(self, job_id: str, *, retry_for: Optional[Seconds] = None) -> Lease:
        """Resumes a paused job."""
        return self._call("POST", f"/leases/{_segment(job_id)}/resume", body={}, retry_for=retry_for, parse=Lease.from_json)

    def repair(self, job_id: str, reason: Optional[str] = None, *, retry_for: Optional[Seconds] = None) -> Lease:
        """Undoes what ticks later than the server's clock plus its window
        (a replica whose clock was fast) did to the job: a grant of such a
        tick is revoked, their runs are marked ``discarded``, and the last
        completed tick goes back, so later ticks are granted again."""
        body = {} if reason is None else {"reason": reason}
        return self._call("POST", f"/leases/{_segment(job_id)}/repair", body=body, retry_for=retry_for, parse=Lease.from_json)

    def forget_schedule(self, job_id: str, *, retry_for: Optional[Seconds] = None) -> Lease:
        """Forgets the job's schedule: no missed-tick accounting until an
        acquire sends one again."""
        return self._call("DELETE", f"/leases/{_segment(job_id)}/schedule", retry_for=retry_for, parse=Lease.from_json)

    def trigger(
        self,
        job_id: str,
        reason: Optional[str] = None,
        *,
        idempotency_key: Optional[str] = None,
        retry_for: Optional[Seconds] = None,
    ) -> Lease:
        """Run now: the job owes one manual tick, the answer's ``owed_tick``,
        which a replica claims with an acquire of exactly that tick (see
        :meth:`owed`). A trigger while a manual tick is owed answers that
        tick. :class:`JobPaused` for a paused job, :class:`TickAhead` when
        the job's last tick lies ahead of the service's clock.

        Every call sends an ``Idempotency-Key`` (a new one unless
        ``idempotency_key`` is given) and its retries send it again, so a
        retry after no answer or a 503 never owes a second run. Pass your own
        key to retry an intended run across calls or processes; the same key
        with another job or reason raises :class:`IdempotencyKeyReused`."""
        key = idempotency_key if idempotency_key is not None else "leaseapi-python-" + uuid.uuid4().hex
        if not 1 <= len(key) <= 256 or not all(" " <= c <= "~" for c in key):
            raise ValueError(f"idempotency key {key!r} must be 1 to 256 printable ASCII characters")
        body = {} if reason is None else {"reason": reason}
        return self._call("POST", f"/leases/{_segment(job_id)}/trigger", body=body, headers={"Idempotency-Key": key}, retry_for=retry_for, parse=Lease.from_json)

    def cancel_trigger(self, job_id: str, *, retry_for: Optional[Seconds] = None) -> Lease:
        """Forgets the tick the job owes, manual or catch-up (``DELETE
        /leases/{jobId}/trigger``); a grant already made for it runs on
        (:meth:`revoke` stops it)."""
        return self._call("DELETE", f"/leases/{_segment(job_id)}/trigger", retry_for=retry_for, parse=Lease.from_json)

    # Concurrency groups.

    def put_group(self, name: str, limit: int, *, retry_for: Optional[Seconds] = None) -> Group:
        """Creates the concurrency group ``name`` with ``limit`` (1 to
        10000), or changes its limit (``PUT /groups/{name}``, role admin): at
        most ``limit`` of its jobs hold a lease at once. Lowering the limit
        takes no slot away: the slots above it retire as they free."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10000:
            raise ValueError(f"group limit {limit!r} must be an integer from 1 to 10000")
        return self._call("PUT", f"/groups/{_segment(name)}", body={"limit": limit}, retry_for=retry_for, parse=Group.from_json)

    def get_group(self, name: str, *, retry_for: Optional[Seconds] = None) -> Group:
        """The group ``name`` with the grants that hold its slots;
        :class:`NotFound` when there is none."""
        return self._call("GET", f"/groups/{_segment(name)}", retry_for=retry_for, parse=Group.from_json)

    def list_groups(
        self,
        *,
        prefix: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        retry_for: Optional[Seconds] = None,
    ) -> GroupPage:
        """One page of the groups within the caller's scopes, sorted by name
        (``GET /groups``); pass the page's ``next_cursor`` as ``cursor`` for
        the next. :meth:`groups` walks every page."""
        query = {"prefix": prefix, "limit": limit, "cursor": cursor}
        return self._call("GET", "/groups", query=query, retry_for=retry_for, parse=GroupPage.from_json)

    def groups(self, *, prefix: Optional[str] = None, page_size: Optional[int] = None) -> Iterator[Group]:
        """Every group whose name starts with ``prefix``, page after page of
        ``page_size``."""
        cursor: Optional[str] = None
        while True:
            page = self.list_groups(prefix=prefix, limit=page_size, cursor=cursor)
            yield from page.groups
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def delete_group(self, name: str, *, retry_for: Optional[Seconds] = None) -> None:
        """Deletes a group no job is in (role admin). :class:`GroupInUse`
        while a job is in it (the detail names one); :class:`NotFound` when
        there is none, also when a retry follows an attempt that deleted it
        but got no answer back."""
        self._call("DELETE", f"/groups/{_segment(name)}", retry_for=retry_for, parse=_nothing)

    def leave_group(self, job_id: str, *, retry_for: Optional[Seconds] = None) -> Lease:
        """Takes a retired job out of its group (``DELETE
        /leases/{jobId}/group``, role admin), so that the group can be
        deleted; a grant it holds keeps its slot until it ends."""
        return self._call("DELETE", f"/leases/{_segment(job_id)}/group", retry_for=retry_for, parse=Lease.from_json)

    # Alert policies.

    def put_policy(
        self,
        job_id: str,
        *,
        consecutive_failures: Optional[int] = None,
        failure_rate: Optional[FailureRate] = None,
        max_runtime: Optional[Seconds] = None,
        min_runtime: Optional[Seconds] = None,
        missed_ticks: Optional[int] = None,
        recovery_threshold: Optional[int] = None,
        realert_after: Optional[Seconds] = None,
        retry_for: Optional[Seconds] = None,
    ) -> JobPolicy:
        """Sets the alert policy of ``job_id`` (``PUT
        /leases/{jobId}/policy``, role admin), replacing the one it had:
        what is not given is not set. The job is alerting when any
        condition holds: ``consecutive_failures`` failed or expired runs in
        a row, a ``failure_rate``, a run held longer than ``max_runtime``,
        one that succeeded sooner than ``min_runtime``, ``missed_ticks``
        missed ticks in a row; it is ok again after ``recovery_threshold``
        successes in a row (1 when not given) with no condition holding.
        ``realert_after`` repeats ``job.alerting`` while it stays alerting.
        Durations are seconds (or a timedelta). The policy is decided at
        once, so the answer may already be alerting.

        At least one condition is needed. :class:`InvalidRequest` names the
        field of a value out of bounds (counts 1 to 100, ``failure_rate.runs``
        1 to 64, runtimes at most 7 days, ``realert_after`` 1 minute to 30
        days); :class:`NotFound` for a job that has no lease yet."""
        body: Dict[str, Any] = {}
        for key, value in (("consecutiveFailures", consecutive_failures), ("missedTicks", missed_ticks), ("recoveryThreshold", recovery_threshold)):
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"{key} {value!r} must be an integer")
                body[key] = value
        if failure_rate is not None:
            if not isinstance(failure_rate, FailureRate):
                raise ValueError(f"failure_rate {failure_rate!r} must be a FailureRate(threshold, runs)")
            body["failureRate"] = {"threshold": failure_rate.threshold, "runs": failure_rate.runs}
        for key, seconds in (("maxRuntimeMs", max_runtime), ("minRuntimeMs", min_runtime), ("realertAfterMs", realert_after)):
            if seconds is not None:
                body[key] = to_millis(seconds, key[: -len("Ms")])
        if not body.keys() - {"recoveryThreshold", "realertAfterMs"}:
            raise ValueError("a policy needs at least one of consecutive_failures, failure_rate, max_runtime, min_runtime, missed_ticks")
        return self._call("PUT", f"/leases/{_segment(job_id)}/policy", body=body, retry_for=retry_for, parse=JobPolicy.from_json)

    def policy(self, job_id: str, *, retry_for: Optional[Seconds] = None) -> JobPolicy:
        """The alert policy of ``job_id`` and where it stands (``GET
        /leases/{jobId}/policy``); :class:`PolicyNotFound` when the job has
        none, :class:`NotFound` when there is no such job."""
        return self._call("GET", f"/leases/{_segment(job_id)}/policy", retry_for=retry_for, parse=JobPolicy.from_json)

    def delete_policy(self, job_id: str, *, retry_for: Optional[Seconds] = None) -> None:
        """Removes the alert policy of ``job_id`` (role admin), telling no
        webhook; :class:`PolicyNotFound` when it has none, also when a retry
        follows an attempt that removed it but got no answer back."""
        self._call("DELETE", f"/leases/{_segment(job_id)}/policy", retry_for=retry_for, parse=_nothing)

    # Credentials and webhooks (role admin, within the caller's scopes).

    def create_credential(
        self,
        name: str,
        role: str,
        scopes: Iterable[str],
        *,
        rate_per_second: Optional[float] = None,
        retry_for: Optional[Seconds] = None,
    ) -> Credential:
        """Creates a credential; its ``token`` (``<id>.<secret>``) is in this
        answer only. ``role`` is ``read``, ``lease`` or ``admin``; ``scopes``
        ``["*"]`` or job id prefixes ending in ``:`` or ``.``;
        ``rate_per_second`` None takes the server's limit, 0 none.
        :class:`CredentialExists` when one of this name and scopes exists.
        Retried only after answers that say nothing was done: after no
        answer or 503 ``unavailable`` the credential may exist (see
        :meth:`credentials`)."""
        body: Dict[str, Any] = {"name": name, "role": role, "scopes": list(scopes)}
        if rate_per_second is not None:
            body["ratePerSecond"] = rate_per_second
        return self._call("POST", "/credentials", body=body, retry_for=retry_for, idempotent=False, parse=Credential.from_json)

    def credentials(self, *, retry_for: Optional[Seconds] = None) -> List[Credential]:
        """The credentials within the caller's scopes, by name; never a
        token."""
        return self._call("GET", "/credentials", retry_for=retry_for, parse=lambda data: [Credential.from_json(item) for item in data["credentials"]])

    def delete_credential(self, credential_id: str, *, retry_for: Optional[Seconds] = None) -> None:
        """Revokes a credential (``lk_...``): at once on the instance that
        answers, within 5 s on the others. :class:`NotFound` when it does not
        exist or lies outside the caller's scopes, and also when a retry
        follows an attempt that revoked it but got no answer back."""
        self._call("DELETE", f"/credentials/{_segment(credential_id)}", retry_for=retry_for, parse=_nothing)

    def create_webhook(
        self,
        url: str,
        events: Iterable[str],
        scopes: Iterable[str],
        *,
        format: Optional[str] = None,
        retry_for: Optional[Seconds] = None,
    ) -> Webhook:
        """Subscribes ``url`` to ``events`` (``run.failed``, ``run.missed``,
        ``job.overdue``, ``job.alerting``, ``job.ok``, ...: see
        :data:`WEBHOOK_EVENTS`) of the jobs in ``scopes``; its signing
        ``secret`` is in this answer only. ``format`` is ``standard`` (the
        server's default) or ``slack``. An address that is not globally
        reachable is refused unless the server allows private ones.
        Retried only after answers that say nothing was done: after no
        answer or 503 ``unavailable`` the webhook may exist (see
        :meth:`webhooks`), and a second create would make a second one."""
        body: Dict[str, Any] = {"url": url, "events": list(events), "scopes": list(scopes)}
        if format is not None:
            body["format"] = format
        return self._call("POST", "/webhooks", body=body, retry_for=retry_for, idempotent=False, parse=Webhook.from_json)

    def webhooks(self, *, retry_for: Optional[Seconds] = None) -> List[Webhook]:
        """The webhooks within the caller's scopes, by id, each with its
        newest delivery attempt; URLs redacted, never a secret."""
        return self._call("GET", "/webhooks", retry_for=retry_for, parse=lambda data: [Webhook.from_json(item) for item in data["webhooks"]])

    def delete_webhook(self, webhook_id: str, *, retry_for: Optional[Seconds] = None) -> None:
        """Deletes a webhook (``wh_...``) with the events still waiting for
        it and its log. :class:`NotFound` as :meth:`delete_credential`."""
        self._call("DELETE", f"/webhooks/{_segment(webhook_id)}", retry_for=retry_for, parse=_nothing)

    def webhook_deliveries(self, webhook_id: str, *, retry_for: Optional[Seconds] = None) -> List[WebhookDelivery]:
        """The last 100 delivery attempts of a webhook, newest first."""
        return self._call("GET", f"/webhooks/{_segment(webhook_id)}/deliveries", retry_for=retry_for, parse=lambda data: [WebhookDelivery.from_json(item) for item in data["deliveries"]])

    # The transport.

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Optional[Dict[str, Any]] = None,
        headers: Optional[Mapping[str, str]] = None,
        retry_for: Optional[Seconds] = None,
        timeout: Optional[Seconds] = None,
        idempotent: bool = True,
        parse: Callable[[Dict[str, Any]], T],
    ) -> T:
        """Sends one call, retrying what may be retried until its retry
        deadline (see retrying), and returns the JSON object of its 2xx
        answer, read by parse."""
        if query:
            pairs = [(k, _query_value(v)) for k, v in query.items() if v is not None]
            if pairs:
                path += "?" + urllib.parse.urlencode(pairs)
        data, request_id = self._exchange(method, path, body, headers, retry_for, timeout, idempotent)
        try:
            return parse(data)
        except (KeyError, TypeError, ValueError) as err:
            raise errors.ProtocolError(f"{method} {path}: an answer the client cannot read ({type(err).__name__}: {err})", request_id=request_id) from err

    def _exchange(
        self,
        method: str,
        path: str,
        body: Optional[Dict[str, Any]],
        headers: Optional[Mapping[str, str]],
        retry_for: Optional[Seconds],
        timeout: Optional[Seconds],
        idempotent: bool = True,
    ) -> Tuple[Dict[str, Any], Optional[str]]:
        """Sends one call with its retries; returns the JSON object of its
        2xx answer and the answer's request id."""
        window = self.retry_for if retry_for is None else to_seconds(retry_for)
        request_timeout = self.timeout if timeout is None else to_seconds(timeout)
        return retrying(lambda: self._once(method, path, body, headers, request_timeout), window, self._log, f"{method} {path}", idempotent=idempotent)

    def _batch(self, path: str, defaults: Dict[str, Any], items: List[Dict[str, Any]], retry_for: Optional[Seconds], timeout: Optional[Seconds]) -> List[BatchResult]:
        """Sends the items of a batch route with the defaults, at most
        MAX_BATCH_ITEMS a request, and sends the items answered 429 or 503
        again, together, after their backoff, until the retry window ends."""
        seen: Dict[str, int] = {}
        for i, item in enumerate(items):
            _segment(item["jobId"])
            if item["jobId"] in seen:
                raise ValueError(f"items {seen[item['jobId']]} and {i} are both job {item['jobId']!r}; send each job once per batch")
            seen[item["jobId"]] = i
        deadline = time.monotonic() + (self.retry_for if retry_for is None else to_seconds(retry_for))
        results: List[Any] = [None] * len(items)
        pending = list(range(len(items)))
        backoff = _MIN_BACKOFF
        while True:
            for start in range(0, len(pending), MAX_BATCH_ITEMS):
                chunk = pending[start : start + MAX_BATCH_ITEMS]
                body = dict(defaults, items=[items[i] for i in chunk])
                data, request_id = self._exchange("POST", path, body, None, max(0.0, deadline - time.monotonic()), timeout)
                answers = _batch_results("POST", path, data, [items[i]["jobId"] for i in chunk], request_id)
                for i, answer in zip(chunk, answers):
                    results[i] = answer
            again = [i for i in pending if isinstance(results[i], (errors.RateLimited, errors.Unavailable))]
            if not again:
                return results
            wait = max(_jitter(backoff), max(results[i].retry_after or 0.0 for i in again))
            if time.monotonic() + wait >= deadline:
                return results
            self._log.warning("leaseapi POST %s: %d of %d items failed, retrying them in %.2fs: %s", path, len(again), len(pending), wait, results[again[0]])
            time.sleep(wait)
            backoff = min(2 * backoff, _MAX_BACKOFF)
            pending = again

    def _once(self, method: str, path: str, body: Optional[Dict[str, Any]], extra_headers: Optional[Mapping[str, str]], timeout: float) -> Tuple[Dict[str, Any], Optional[str]]:
        headers = {"Accept": "application/json, application/problem+json", "User-Agent": self._user_agent}
        headers.update(extra_headers or {})
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        if self._token is not None:
            headers["Authorization"] = "Bearer " + self._token
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with self._opener.open(request, timeout=timeout) as response:
                status, answer_headers, payload = response.status, response.headers, response.read()
        except urllib.error.HTTPError as err:
            with err:
                status, answer_headers, payload = err.code, err.headers, err.read()
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            reason = getattr(err, "reason", err)
            raise errors.ConnectionFailed(f"{method} {self.url}{path}: {reason}") from err
        if self._on_exchange is not None:
            self._on_exchange(Exchange(method, path, body, status, {k.lower(): v for k, v in answer_headers.items()}, payload))
        request_id = answer_headers.get("X-Request-Id")
        if status == 204:
            return {}, request_id  # a delete: nothing to read
        if 200 <= status < 300:
            try:
                parsed = json.loads(payload)
            except ValueError as err:
                raise errors.ProtocolError(f"{method} {path}: {status} with a body that is not JSON", status=status, request_id=request_id) from err
            if not isinstance(parsed, dict):
                raise errors.ProtocolError(f"{method} {path}: {status} with a body that is not a JSON object", status=status, request_id=request_id)
            return parsed, request_id
        raise _problem(method, path, status, answer_headers, payload, request_id)


def check_schedule_options(schedule: Optional[str], grace: Optional[Seconds], catch_up: Optional[str], catch_up_window: Optional[Seconds]) -> None:
    """Raises ValueError for acquire options the service would refuse:
    grace and the catch-up policy are registered with a schedule."""
    if schedule is None and (grace is not None or catch_up is not None or catch_up_window is not None):
        raise ValueError("grace, catch_up and catch_up_window need a schedule")
    if catch_up not in (None, "none", "latest"):
        raise ValueError(f"catch_up {catch_up!r} must be 'none' or 'latest'")


def retrying(attempt: Callable[[], T], window: float, log: logging.Logger, what: str, *, idempotent: bool = True) -> T:
    """Calls attempt() until it returns, retrying 429, 503, a trigger whose
    Idempotency-Key is still in flight, and calls that got no answer after
    their Retry-After (else a jittered backoff) for up to window seconds;
    then raises the last error. A call that is not idempotent is retried
    only after answers that say nothing was done (429, 503 ``overloaded``)."""
    deadline = time.monotonic() + window
    backoff = _MIN_BACKOFF
    while True:
        try:
            return attempt()
        except (errors.RateLimited, errors.Unavailable, errors.IdempotencyKeyInFlight, errors.ConnectionFailed) as err:
            if not idempotent and not (isinstance(err, errors.RateLimited) or err.code == "overloaded"):
                raise
            wait = max(_jitter(backoff), err.retry_after or 0.0)
            if time.monotonic() + wait >= deadline:
                raise
            log.warning("leaseapi %s failed, retrying in %.2fs: %s", what, wait, err)
            time.sleep(wait)
            backoff = min(2 * backoff, _MAX_BACKOFF)


def _problem(method: str, path: str, status: int, headers: Mapping[str, str], payload: bytes, request_id: Optional[str]) -> errors.LeaseError:
    """The error an answer that is not 2xx stands for."""
    try:
        problem = json.loads(payload)
    except ValueError:
        problem = None
    text = payload[:200].decode("utf-8", "replace").strip()
    return _problem_error(method, path, status, problem, text, _retry_after(headers.get("Retry-After")), request_id)


def _problem_error(method: str, path: str, status: int, problem: Any, text: str, retry_after: Optional[float], request_id: Optional[str]) -> errors.LeaseError:
    """The error of the problem document ``problem`` answered with status
    (a call's answer, or one item's in a batch); ``text`` stands in for a
    document that is not leaseapi's."""
    if not isinstance(problem, dict) or not isinstance(problem.get("code"), str):
        # Not leaseapi's problem document: a proxy or load balancer answered.
        text = text or http.client.responses.get(status, "")
        return errors.error_class(None, status)(f"{method} {path}: {text}", status=status, retry_after=retry_after, request_id=request_id)
    lease = None
    if isinstance(problem.get("lease"), dict):
        try:
            lease = Lease.from_json(problem["lease"])
        except (KeyError, TypeError, ValueError) as err:
            return errors.ProtocolError(f"{method} {path}: {status} with a lease the client cannot read: {err}", status=status, request_id=request_id)
    code = problem["code"]
    err = errors.error_class(code, status)(
        str(problem.get("detail") or problem.get("title") or code),
        code=code,
        status=status,
        title=problem.get("title"),
        lease=lease,
        retry_after=retry_after,
        request_id=request_id,
    )
    if isinstance(err, errors.GroupFull) and isinstance(problem.get("group"), dict):
        try:
            err.group = Group.from_json(problem["group"])
        except (KeyError, TypeError, ValueError):
            pass  # a group the client cannot read: the refusal stands without it
    if isinstance(err, errors.TickAhead) and isinstance(problem.get("now"), str):
        try:
            err.now = parse_time(problem["now"])
        except ValueError:
            pass  # a time the client cannot represent: the refusal stands without it
    return err


def _batch_results(method: str, path: str, data: Dict[str, Any], job_ids: Sequence[str], request_id: Optional[str]) -> List[BatchResult]:
    """The results of a batch's answer, one per job of job_ids in order: a
    lease, or the error its single call would have raised. An answer that
    does not match the items is a ProtocolError."""
    try:
        results = data["results"]
        if not isinstance(results, list) or len(results) != len(job_ids):
            raise ValueError(f"{len(job_ids)} items sent, {len(results) if isinstance(results, list) else 'no list of'} results answered")
        out: List[BatchResult] = []
        for job_id, result in zip(job_ids, results):
            if result["jobId"] != job_id:
                raise ValueError(f"result for job {result['jobId']!r} where job {job_id!r} was sent")
            status = result["status"]
            if status == 200:
                out.append(Lease.from_json(result["lease"]))
            else:
                retry = result.get("retryAfter")
                retry_after = float(retry) if isinstance(retry, int) and not isinstance(retry, bool) and retry > 0 else None
                out.append(_problem_error(method, path, int(status), result.get("problem"), "", retry_after, request_id))
        return out
    except (KeyError, TypeError, ValueError) as err:
        raise errors.ProtocolError(f"{method} {path}: an answer the client cannot read ({type(err).__name__}: {err})", request_id=request_id) from err


def _acquire_fields(
    owner: Optional[str],
    ttl: Optional[Seconds],
    tick: Optional[datetime],
    nearest_tick: bool,
    schedule: Optional[str],
    grace: Optional[Seconds],
    catch_up: Optional[str],
    catch_up_window: Optional[Seconds],
    group: Optional[str],
    min_interval: Optional[Seconds] = None,
) -> Dict[str, Any]:
    """The JSON fields of an acquire that are given: a single call's body,
    a batch's defaults or one of its items."""
    if tick is not None and nearest_tick:
        raise ValueError("pass tick or nearest_tick, not both")
    body: Dict[str, Any] = {}
    if owner is not None:
        body["owner"] = owner
    if ttl is not None:
        body["ttlMs"] = to_millis(ttl, "ttl")
    if tick is not None:
        body["tick"] = format_time(tick)
    if nearest_tick:
        body["nearestTick"] = True
    if schedule is not None:
        body["schedule"] = schedule
    if grace is not None:
        body["graceMs"] = to_millis(grace, "grace")
    if catch_up is not None:
        body["catchUp"] = catch_up
    if catch_up_window is not None:
        body["catchUpWindowMs"] = to_millis(catch_up_window, "catch up window")
    if group is not None:
        body["group"] = group
    if min_interval is not None:
        body["minIntervalMs"] = min_interval_millis(min_interval)
    return body


#: The longest minimum interval between two grants of a job: 31 days.
MAX_MIN_INTERVAL = 31 * 24 * 3600.0


def min_interval_millis(value: Seconds) -> int:
    """A minimum interval as the whole milliseconds the API takes: 0 (none),
    or 1 ms to 31 days."""
    seconds = to_seconds(value)
    if seconds == 0:
        return 0
    if not 0.001 <= seconds <= MAX_MIN_INTERVAL:
        raise ValueError(f"min interval {value!r} must be 0 (none) or from 1 millisecond to 31 days")
    return to_millis(seconds, "min interval")


def _pick(value: Optional[T], default: Optional[T]) -> Optional[T]:
    return default if value is None else value


def _nothing(data: Dict[str, Any]) -> None:
    """The parse of an answer with no body (204)."""
    return None


def _retry_after(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: leaseapi sends seconds; back off instead
    return seconds if seconds >= 0 else None


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _segment(job_id: str) -> str:
    if not job_id:
        raise ValueError("job id must not be empty")
    return urllib.parse.quote(job_id, safe=":.-_")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """leaseapi never redirects an API call; a redirect is an answer (an
    error) rather than a second request carrying the token elsewhere."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None
