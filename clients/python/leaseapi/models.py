"""What the leaseapi service answers, as typed values.

Times are timezone-aware ``datetime`` values in UTC (the service sends RFC
3339 with millisecond precision); durations are seconds (``float``). Every
value keeps the JSON it was read from in ``raw``, so fields that a newer
service adds are not lost.

A time that ``datetime`` cannot represent (year 0000 or after 9999, an
offset that moves it out of years 1-9999, or text that is not RFC 3339) is
an error of that field only, never of the answer: the attribute is None,
``field_errors`` maps its name (``"last_completed_tick"``) to what was
wrong, and ``raw`` keeps the text as sent. A list with such a lease still
returns every lease.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Mapping, Optional, Union

__all__ = [
    "Lease",
    "Run",
    "LeasePage",
    "RunPage",
    "Stats",
    "Whoami",
    "Owed",
    "Group",
    "GroupHolder",
    "GroupPage",
    "Credential",
    "Webhook",
    "WebhookDelivery",
    "FailureRate",
    "JobPolicy",
    "WEBHOOK_EVENTS",
    "ALERT_REASONS",
]

Seconds = Union[float, int, timedelta]

#: The events a webhook can subscribe to, as api/openapi.yaml names them (a
#: test holds the two equal).
WEBHOOK_EVENTS = (
    "run.failed",
    "run.expired",
    "run.missed",
    "job.overdue",
    "run.succeeded",
    "job.recovered",
    "job.missed",
    "job.alerting",
    "job.ok",
)

#: The reasons an alert policy gives for a job that is alerting, in the
#: order the service lists them.
ALERT_REASONS = ("failures", "failure_rate", "runtime_exceeded", "runtime_too_short", "missed")


def parse_time(value: str) -> datetime:
    """Reads an RFC 3339 time (``2026-11-30T07:00:00.000Z``) as an aware
    datetime in UTC."""
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    return datetime.fromisoformat(text).astimezone(timezone.utc)


def format_time(value: datetime) -> str:
    """Writes an aware datetime as RFC 3339 in UTC with milliseconds, the
    service's format. A naive datetime is refused: its zone would be a guess."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"time {value!r} has no time zone: pass an aware datetime (e.g. tzinfo=timezone.utc)")
    utc = value.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def to_millis(value: Seconds, what: str) -> int:
    """Seconds (or a timedelta) as the whole milliseconds the API takes."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    millis = round(seconds * 1000)
    if millis < 1:
        raise ValueError(f"{what} {value!r} must be at least 1 millisecond")
    return millis


def to_seconds(value: Seconds) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _time(data: Mapping[str, Any], key: str, field_errors: Dict[str, str], attr: str) -> Optional[datetime]:
    """The time of data[key], or None; a value that is not a time this
    client can represent is recorded in field_errors[attr] instead."""
    value = data.get(key)
    if value is None:
        return None
    try:
        return parse_time(value)
    except (TypeError, ValueError, OverflowError, AttributeError) as err:
        field_errors[attr] = f"{key} {value!r} is not a time this client can represent: {err}"
        return None


def _int(data: Mapping[str, Any], key: str) -> Optional[int]:
    value = data.get(key)
    return None if value is None else int(value)


def _seconds(data: Mapping[str, Any], key: str) -> Optional[float]:
    value = data.get(key)
    return None if value is None else value / 1000


@dataclasses.dataclass(frozen=True)
class Lease:
    """The lease of a job: who holds it (or held it last), its fencing token
    and state (computed with the service's clock), the tick of the grant and
    the job's schedule and pause."""

    job_id: str
    owner: str
    #: Fencing token of the current or last grant: pass it to the systems the
    #: job writes to.
    token: int
    #: The database's WAL timeline when the token was written (1 until a
    #: standby is first promoted); None when the service does not know.
    timeline: Optional[int]
    #: ``held``, ``released``, ``expired`` or ``revoked``.
    state: str
    #: acquired_at, renewed_at and expires_at are None only when
    #: field_errors names them.
    acquired_at: Optional[datetime]
    renewed_at: Optional[datetime]
    expires_at: Optional[datetime]
    released_at: Optional[datetime]
    #: TTL of the last grant or renewal, in seconds.
    ttl: float
    #: The tick the current or last grant was for.
    tick: Optional[datetime]
    last_completed_tick: Optional[datetime]
    last_outcome: Optional[str]
    schedule: Optional[str]
    #: The effective grace of the schedule, in seconds.
    grace: Optional[float]
    next_tick: Optional[datetime]
    paused: bool
    paused_at: Optional[datetime]
    paused_by: Optional[str]
    paused_reason: Optional[str]
    missed_ticks: int
    skipped_ticks: int
    revoked_by: Optional[str]
    #: ``none`` or ``latest``: whether a missed tick is owed once afterwards.
    catch_up: str
    #: How old a missed tick may be and still be owed, in seconds.
    catch_up_window: float
    #: The tick the job owes (claim it with an acquire of exactly that tick);
    #: None when it owes nothing.
    owed_tick: Optional[datetime]
    #: ``catch-up`` or ``manual`` when a tick is owed.
    owed_reason: Optional[str]
    #: The concurrency group the job is in; None for none.
    group: Optional[str]
    #: The slot of its group the current grant took, and the group's
    #: fencing token of that grant (strictly increasing per group: pass it
    #: to what the group's holders share); None when the grant took none.
    slot: Optional[int]
    slot_token: Optional[int]
    #: True while the job's alert policy says it is alerting (False without
    #: a policy), and the reasons of the current alerting episode (empty
    #: while not alerting); see :meth:`Client.policy`.
    alerting: bool
    alert_reasons: List[str]
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)
    #: The attributes that could not be read, by name, and why (they are
    #: None; ``raw`` keeps the text as sent). Empty for a lease read whole.
    field_errors: Dict[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Lease":
        errs: Dict[str, str] = {}
        return cls(
            job_id=data["jobId"],
            owner=data["owner"],
            token=int(data["token"]),
            timeline=data.get("timeline"),
            state=data["state"],
            acquired_at=_time(data, "acquiredAt", errs, "acquired_at"),
            renewed_at=_time(data, "renewedAt", errs, "renewed_at"),
            expires_at=_time(data, "expiresAt", errs, "expires_at"),
            released_at=_time(data, "releasedAt", errs, "released_at"),
            ttl=data["ttlMs"] / 1000,
            tick=_time(data, "tick", errs, "tick"),
            last_completed_tick=_time(data, "lastCompletedTick", errs, "last_completed_tick"),
            last_outcome=data.get("lastOutcome"),
            schedule=data.get("schedule"),
            grace=_seconds(data, "graceMs"),
            next_tick=_time(data, "nextTick", errs, "next_tick"),
            paused=bool(data.get("paused", False)),
            paused_at=_time(data, "pausedAt", errs, "paused_at"),
            paused_by=data.get("pausedBy"),
            paused_reason=data.get("pausedReason"),
            missed_ticks=int(data.get("missedTicks", 0)),
            skipped_ticks=int(data.get("skippedTicks", 0)),
            revoked_by=data.get("revokedBy"),
            catch_up=data.get("catchUp", "none"),
            catch_up_window=data.get("catchUpWindowMs", 86_400_000) / 1000,
            owed_tick=_time(data, "owedTick", errs, "owed_tick"),
            owed_reason=data.get("owedReason"),
            group=data.get("group"),
            slot=_int(data, "slot"),
            slot_token=_int(data, "slotToken"),
            alerting=bool(data.get("alerting", False)),
            alert_reasons=list(data.get("alertReasons") or []),
            raw=dict(data),
            field_errors=errs,
        )


@dataclasses.dataclass(frozen=True)
class Run:
    """One grant of a job's lease, or one missed tick (then ``token``,
    ``owner``, ``started_at`` and ``duration`` are None)."""

    job_id: str
    token: Optional[int]
    owner: Optional[str]
    tick: Optional[datetime]
    started_at: Optional[datetime]
    ended_at: Optional[datetime]
    #: ``running``, ``succeeded``, ``failed``, ``expired``, ``revoked``,
    #: ``missed`` or ``discarded`` (set aside by a repair: its tick lay
    #: ahead of the server's clock).
    outcome: str
    #: Seconds from start to end; None while running and for a missed run.
    duration: Optional[float]
    revoked_by: Optional[str]
    #: ``schedule``, ``catch-up`` or ``manual``: what started the run.
    trigger: str
    #: Who triggered a manual run, when the service knows.
    triggered_by: Optional[str]
    #: The concurrency group the grant was made in, the slot it took and
    #: its slot token; None for none.
    group: Optional[str]
    slot: Optional[int]
    slot_token: Optional[int]
    #: True for a missed run whose group had every slot in use at the end
    #: of the tick's grace.
    group_full: bool
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)
    #: As Lease.field_errors.
    field_errors: Dict[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Run":
        token = data.get("token")
        errs: Dict[str, str] = {}
        return cls(
            job_id=data["jobId"],
            token=None if token is None else int(token),
            owner=data.get("owner"),
            tick=_time(data, "tick", errs, "tick"),
            started_at=_time(data, "startedAt", errs, "started_at"),
            ended_at=_time(data, "endedAt", errs, "ended_at"),
            outcome=data["outcome"],
            duration=_seconds(data, "durationMs"),
            revoked_by=data.get("revokedBy"),
            trigger=data.get("trigger", "schedule"),
            triggered_by=data.get("triggeredBy"),
            group=data.get("group"),
            slot=_int(data, "slot"),
            slot_token=_int(data, "slotToken"),
            group_full=bool(data.get("groupFull", False)),
            raw=dict(data),
            field_errors=errs,
        )


@dataclasses.dataclass(frozen=True)
class LeasePage:
    """One page of ``GET /leases``; ``next_cursor`` is None on the last."""

    leases: List[Lease]
    next_cursor: Optional[str]
    server_time: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LeasePage":
        return cls(
            leases=[Lease.from_json(item) for item in data["leases"]],
            next_cursor=data.get("nextCursor"),
            server_time=parse_time(data["serverTime"]),
        )


@dataclasses.dataclass(frozen=True)
class RunPage:
    """One page of ``GET /runs``; ``next_cursor`` is None on the last."""

    runs: List[Run]
    next_cursor: Optional[str]
    server_time: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunPage":
        return cls(
            runs=[Run.from_json(item) for item in data["runs"]],
            next_cursor=data.get("nextCursor"),
            server_time=parse_time(data["serverTime"]),
        )


@dataclasses.dataclass(frozen=True)
class Stats:
    """``GET /stats``: the leases by state, the paused and overdue jobs, and
    the runs of the last 24 hours by outcome."""

    leases: Dict[str, int]
    paused: int
    overdue: int
    runs_24h: Dict[str, int]
    server_time: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Stats":
        return cls(
            leases=dict(data["leases"]),
            paused=int(data["paused"]),
            overdue=int(data["overdue"]),
            runs_24h=dict(data["runs24h"]),
            server_time=parse_time(data["serverTime"]),
        )


@dataclasses.dataclass(frozen=True)
class Whoami:
    """``GET /whoami``: the caller's credential, or ``open`` when the service
    needs none."""

    open: bool
    name: Optional[str]
    role: Optional[str]
    scopes: List[str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Whoami":
        return cls(
            open=bool(data.get("open", False)),
            name=data.get("name"),
            role=data.get("role"),
            scopes=list(data.get("scopes", [])),
        )


@dataclasses.dataclass(frozen=True)
class Owed:
    """A tick a job owes (``POST /owed``): claim it with an acquire of
    exactly ``tick``."""

    job_id: str
    #: None only when field_errors names it.
    tick: Optional[datetime]
    #: ``manual`` (a trigger) or ``catch-up`` (the job's ``catch_up`` is
    #: ``latest`` and a tick was missed).
    reason: str
    #: Who triggered a manual tick, and why, when the service knows.
    triggered_by: Optional[str]
    trigger_reason: Optional[str]
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)
    #: As Lease.field_errors.
    field_errors: Dict[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Owed":
        errs: Dict[str, str] = {}
        return cls(
            job_id=data["jobId"],
            tick=_time(data, "tick", errs, "tick"),
            reason=data["reason"],
            triggered_by=data.get("triggeredBy"),
            trigger_reason=data.get("triggerReason"),
            raw=dict(data),
            field_errors=errs,
        )


@dataclasses.dataclass(frozen=True)
class GroupHolder:
    """A grant that holds a slot of a concurrency group."""

    job_id: str
    owner: str
    #: The job's fencing token of the grant.
    token: int
    slot: int
    #: The group's fencing token of the grant.
    slot_token: int
    #: When the slot frees by itself: the grant's expiry (a heartbeat moves
    #: it), or for a revoked grant the expiry it had when it was revoked.
    #: None only when field_errors names it.
    expires_at: Optional[datetime]
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)
    #: As Lease.field_errors.
    field_errors: Dict[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "GroupHolder":
        errs: Dict[str, str] = {}
        return cls(
            job_id=data["jobId"],
            owner=data["owner"],
            token=int(data["token"]),
            slot=int(data["slot"]),
            slot_token=int(data["slotToken"]),
            expires_at=_time(data, "expiresAt", errs, "expires_at"),
            raw=dict(data),
            field_errors=errs,
        )


@dataclasses.dataclass(frozen=True)
class Group:
    """A concurrency group (``/groups/{name}``): at most ``limit`` of its
    jobs hold a lease at once, each grant in one of its slots."""

    name: str
    limit: int
    #: Slots in use; above ``limit`` for a while after the limit was lowered.
    held: int
    #: The grants in the group's slots, by slot (in a
    #: :class:`~leaseapi.errors.GroupFull` refusal, at most the first 10).
    holders: List[GroupHolder]
    #: The credential that created the group; None when the API was open.
    created_by: Optional[str]
    #: None only when field_errors names it.
    created_at: Optional[datetime]
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)
    #: As Lease.field_errors; a time of a holder is in its own.
    field_errors: Dict[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Group":
        errs: Dict[str, str] = {}
        return cls(
            name=data["name"],
            limit=int(data["limit"]),
            held=int(data["held"]),
            holders=[GroupHolder.from_json(h) for h in data["holders"]],
            created_by=data.get("createdBy"),
            created_at=_time(data, "createdAt", errs, "created_at"),
            raw=dict(data),
            field_errors=errs,
        )


@dataclasses.dataclass(frozen=True)
class GroupPage:
    """One page of ``GET /groups``; ``next_cursor`` is None on the last."""

    groups: List[Group]
    next_cursor: Optional[str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "GroupPage":
        return cls(groups=[Group.from_json(g) for g in data["groups"]], next_cursor=data.get("nextCursor"))


@dataclasses.dataclass(frozen=True)
class Credential:
    """A credential (``/credentials``); never its secret, except ``token``
    in the answer of the create."""

    #: ``lk_`` and 12 characters; the id in ``DELETE /credentials/{id}``.
    id: str
    name: str
    #: ``read``, ``lease`` or ``admin``.
    role: str
    #: ``*``, or job id prefixes ending in ``:`` or ``.``.
    scopes: List[str]
    #: Acquires and reads per second per instance; None: the server's
    #: LEASEAPI_RATE_LIMIT; 0: no limit.
    rate_per_second: Optional[float]
    #: None only when field_errors names it.
    created_at: Optional[datetime]
    #: The bearer token ``<id>.<secret>``: only in the answer of
    #: :meth:`Client.create_credential`, None otherwise.
    token: Optional[str] = dataclasses.field(repr=False)
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)
    #: As Lease.field_errors.
    field_errors: Dict[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Credential":
        errs: Dict[str, str] = {}
        rate = data.get("ratePerSecond")
        return cls(
            id=data["id"],
            name=data["name"],
            role=data["role"],
            scopes=list(data["scopes"]),
            rate_per_second=None if rate is None else float(rate),
            created_at=_time(data, "createdAt", errs, "created_at"),
            token=data.get("token"),
            raw=_without(data, "token"),
            field_errors=errs,
        )


@dataclasses.dataclass(frozen=True)
class WebhookDelivery:
    """One attempt at delivering an event to a webhook."""

    #: The event's ``webhook-id``, the same on every attempt.
    event_id: str
    #: One of WEBHOOK_EVENTS: ``run.failed``, ``job.alerting``, ``job.ok``, ...
    event_type: str
    job_id: str
    attempt: int
    #: None only when field_errors names it.
    at: Optional[datetime]
    #: The receiver's HTTP status; None when no answer came.
    status: Optional[int]
    #: Why the attempt failed without an answer (or that a redirect is not
    #: followed); None otherwise.
    error: Optional[str]
    #: The receiver answered 2xx.
    delivered: bool
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)
    #: As Lease.field_errors.
    field_errors: Dict[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "WebhookDelivery":
        errs: Dict[str, str] = {}
        status = data.get("status")
        return cls(
            event_id=data["eventId"],
            event_type=data["eventType"],
            job_id=data["jobId"],
            attempt=int(data["attempt"]),
            at=_time(data, "at", errs, "at"),
            status=None if status is None else int(status),
            error=data.get("error"),
            delivered=bool(data["delivered"]),
            raw=dict(data),
            field_errors=errs,
        )


@dataclasses.dataclass(frozen=True)
class Webhook:
    """A webhook (``/webhooks``): where the events of the jobs in its scopes
    are POSTed. ``url`` is redacted to its scheme and host."""

    #: ``wh_`` and 12 characters.
    id: str
    url: str
    events: List[str]
    scopes: List[str]
    #: ``standard`` (signed Standard Webhooks JSON) or ``slack``.
    format: str
    #: The name of the credential that created it; None when the API was open.
    created_by: Optional[str]
    #: None only when field_errors names it.
    created_at: Optional[datetime]
    #: The newest delivery attempt; None before the first.
    last_delivery: Optional[WebhookDelivery]
    #: The signing secret ``whsec_...``: only in the answer of
    #: :meth:`Client.create_webhook`, None otherwise.
    secret: Optional[str] = dataclasses.field(repr=False)
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)
    #: As Lease.field_errors; a time of ``last_delivery`` is in its own.
    field_errors: Dict[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Webhook":
        errs: Dict[str, str] = {}
        last = data.get("lastDelivery")
        return cls(
            id=data["id"],
            url=data["url"],
            events=list(data["events"]),
            scopes=list(data["scopes"]),
            format=data["format"],
            created_by=data.get("createdBy"),
            created_at=_time(data, "createdAt", errs, "created_at"),
            last_delivery=None if last is None else WebhookDelivery.from_json(last),
            secret=data.get("secret"),
            raw=_without(data, "secret"),
            field_errors=errs,
        )


@dataclasses.dataclass(frozen=True)
class FailureRate:
    """A failure-rate condition of an alert policy: alerting when at least
    ``threshold`` (more than 0, at most 1) of the newest ``runs`` (1 to 64)
    finished runs failed or expired. Fewer than ``runs`` runs decide
    nothing."""

    threshold: float
    runs: int


@dataclasses.dataclass(frozen=True)
class JobPolicy:
    """A job's alert policy and where it stands (``/leases/{jobId}/policy``).

    The conditions not set are None; durations are seconds. ``status`` is
    ``ok`` or ``alerting``; ``alert_reasons`` are the conditions that held
    during the current alerting episode (empty while ok)."""

    job_id: str
    #: Alerting after that many failed or expired runs in a row.
    consecutive_failures: Optional[int]
    failure_rate: Optional[FailureRate]
    #: Alerting on a run held longer than this, while it is still held.
    max_runtime: Optional[float]
    #: Alerting on a run that succeeded sooner than this.
    min_runtime: Optional[float]
    #: Alerting after that many missed ticks in a row.
    missed_ticks: Optional[int]
    #: How many successes in a row, with no condition holding, bring an
    #: alerting job back to ok.
    recovery_threshold: int
    #: How often ``job.alerting`` is repeated while the job stays alerting;
    #: None for never.
    realert_after: Optional[float]
    #: ``ok`` or ``alerting``.
    status: str
    alert_reasons: List[str]
    #: When the status last changed (when the policy was set, at first).
    #: None only when field_errors names it.
    status_since: Optional[datetime]
    #: When ``job.alerting`` was last told; None while ok.
    last_alert_at: Optional[datetime]
    #: When the policy was set, and by which credential (None when the API
    #: was open).
    updated_at: Optional[datetime]
    updated_by: Optional[str]
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)
    #: As Lease.field_errors.
    field_errors: Dict[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def alerting(self) -> bool:
        """Whether the job is alerting."""
        return self.status == "alerting"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "JobPolicy":
        errs: Dict[str, str] = {}
        rate = data.get("failureRate")
        return cls(
            job_id=data["jobId"],
            consecutive_failures=_int(data, "consecutiveFailures"),
            failure_rate=None if rate is None else FailureRate(threshold=float(rate["threshold"]), runs=int(rate["runs"])),
            max_runtime=_seconds(data, "maxRuntimeMs"),
            min_runtime=_seconds(data, "minRuntimeMs"),
            missed_ticks=_int(data, "missedTicks"),
            recovery_threshold=int(data.get("recoveryThreshold", 1)),
            realert_after=_seconds(data, "realertAfterMs"),
            status=data["status"],
            alert_reasons=list(data.get("alertReasons") or []),
            status_since=_time(data, "statusSince", errs, "status_since"),
            last_alert_at=_time(data, "lastAlertAt", errs, "last_alert_at"),
            updated_at=_time(data, "updatedAt", errs, "updated_at"),
            updated_by=data.get("updatedBy"),
            raw=dict(data),
            field_errors=errs,
        )


def _without(data: Mapping[str, Any], secret: str) -> Dict[str, Any]:
    """data without its secret field, so that ``raw`` (kept for fields a
    newer service adds) never holds a second copy of a secret."""
    return {k: v for k, v in data.items() if k != secret}
