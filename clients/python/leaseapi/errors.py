"""Errors of the leaseapi client.

Every error the client raises is a :class:`LeaseError`. An answer of the
service (an RFC 9457 ``application/problem+json`` document) raises the
subclass of its ``code``; a conflict (409) carries the lease it is about.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Dict, Optional, Type

if TYPE_CHECKING:
    from .models import Group, Lease

__all__ = [
    "LeaseError",
    "NotAcquired",
    "LeaseHeld",
    "TickDone",
    "JobPaused",
    "TickAhead",
    "GroupFull",
    "TooSoon",
    "LeaseLost",
    "InvalidRequest",
    "FeatureDisabled",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "PolicyNotFound",
    "CredentialExists",
    "GroupInUse",
    "IdempotencyKeyReused",
    "IdempotencyKeyInFlight",
    "RateLimited",
    "Unavailable",
    "ServerError",
    "ConnectionFailed",
    "ProtocolError",
]


class LeaseError(Exception):
    """An error of a leaseapi call.

    ``code`` is the problem's machine code (``lease_held``, ``tick_done``,
    ...), ``None`` when the service did not answer (:class:`ConnectionFailed`)
    or answered something that is not a problem (:class:`ProtocolError`).
    ``status`` is the HTTP status, ``detail`` what to change (4xx) or what
    happened, ``lease`` the lease a conflict is about, ``retry_after`` the
    seconds of the ``Retry-After`` header, ``request_id`` the answer's
    ``X-Request-Id`` (quote it when you ask the operators).
    """

    #: The problem code this class stands for; None for the base classes.
    default_code: Optional[str] = None

    def __init__(
        self,
        detail: str,
        *,
        code: Optional[str] = None,
        status: Optional[int] = None,
        title: Optional[str] = None,
        lease: Optional["Lease"] = None,
        retry_after: Optional[float] = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(detail)
        self.code = code if code is not None else self.default_code
        self.status = status
        self.title = title
        self.detail = detail
        self.lease = lease
        self.retry_after = retry_after
        self.request_id = request_id

    def __str__(self) -> str:
        parts = []
        if self.status is not None:
            parts.append(str(self.status))
        if self.code:
            parts.append(self.code)
        head = " ".join(parts)
        text = f"{head}: {self.detail}" if head else self.detail
        if self.request_id:
            text += f" (request id {self.request_id})"
        return text


class NotAcquired(LeaseError):
    """The acquire was refused for a reason that means "skip this tick":
    another replica runs it (:class:`LeaseHeld`), it ran already
    (:class:`TickDone`), the job is paused (:class:`JobPaused`), the tick
    lies ahead of the service's clock (:class:`TickAhead`), the job's
    previous run started less than the acquire's ``min_interval`` ago
    (:class:`TooSoon`), or every slot of the job's concurrency group is in
    use (:class:`GroupFull`; the runner retries it while the tick may still
    start)."""


class LeaseHeld(NotAcquired):
    """409 ``lease_held``: another owner, or this owner for another tick,
    holds the lease; ``retry_after`` is the seconds until it expires."""

    default_code = "lease_held"


class TickDone(NotAcquired):
    """409 ``tick_done``: the tick is at or before the job's last completed
    tick."""

    default_code = "tick_done"


class JobPaused(NotAcquired):
    """409 ``job_paused``: an operator paused the job."""

    default_code = "job_paused"


class TickAhead(NotAcquired):
    """409 ``tick_ahead``: the tick lies later than the service's clock plus
    ``LEASEAPI_MAX_TICK_AHEAD``: this host's clock is fast. ``now`` is the
    service's clock when it refused (an aware datetime in UTC, or None when
    the answer did not carry one it could read); there is no
    ``retry_after``: fix the clock (NTP). Nothing was written."""

    default_code = "tick_ahead"
    #: The service's clock when it refused the tick.
    now: Optional[datetime] = None

    def clock_fast(self, local_now: datetime) -> Optional[float]:
        """How many seconds this host's clock at ``local_now`` runs ahead of
        the service's (a little more, since the answer took time), or None
        without ``now``."""
        return None if self.now is None else (local_now - self.now).total_seconds()


class GroupFull(NotAcquired):
    """409 ``group_full``: every slot of the job's concurrency group is in
    use. ``group`` is the group at the refusal (with up to 10 holders; None
    when the answer did not carry one the client could read),
    ``retry_after`` the seconds until the first slot in use frees by itself
    (at least 1), ``lease`` the job's lease when it has one. Nothing was
    written. :class:`~leaseapi.Runner` retries it after ``retry_after``,
    with jitter, while the tick is within its grace."""

    default_code = "group_full"
    #: The group at the refusal.
    group: Optional["Group"] = None


class TooSoon(NotAcquired):
    """409 ``too_soon``: the job's previous grant started less than the
    acquire's ``min_interval`` ago (by the service's clock), so the run it
    asked for is another replica's, just done. ``lease`` is the job's lease
    (its ``acquired_at`` is when that run started), ``retry_after`` the
    seconds until the interval ends (at least 1). Nothing was written."""

    default_code = "too_soon"


class LeaseLost(LeaseError):
    """409 ``lease_lost``: owner or token no longer match a grant that may be
    used (revoked, expired and taken over, or released)."""

    default_code = "lease_lost"


class InvalidRequest(LeaseError):
    """400 ``invalid_request`` (also 413, 415, and 405 from a service older
    than the client): ``detail`` says what to change."""

    default_code = "invalid_request"


class FeatureDisabled(InvalidRequest):
    """400 ``feature_disabled``: the request sends a field whose rule the
    service's database is not finalized for yet (``min_interval`` during an
    upgrade from a release that does not know it). ``detail`` says what the
    operator does; until then, send the request without the field. Not
    retried."""

    default_code = "feature_disabled"


class Unauthorized(LeaseError):
    """401 ``unauthorized``: the bearer token is missing, unknown or revoked."""

    default_code = "unauthorized"


class Forbidden(LeaseError):
    """403 ``forbidden``: the credential's role is too weak, or the job lies
    outside its scopes (answered before any lookup; the detail names the
    scopes)."""

    default_code = "forbidden"


class NotFound(LeaseError):
    """404 ``not_found``: the job has no lease."""

    default_code = "not_found"


class PolicyNotFound(NotFound):
    """404 ``policy_not_found``: the job has no alert policy (a job that
    does not exist is :class:`NotFound`)."""

    default_code = "policy_not_found"


class CredentialExists(LeaseError):
    """409 ``credential_exists``: a credential of this name and the same
    scopes exists (its token cannot be shown again; delete it or pick another
    name)."""

    default_code = "credential_exists"


class GroupInUse(LeaseError):
    """409 ``group_in_use``: a job is still in the group, so it cannot be
    deleted; the detail names one. Take it out first
    (:meth:`~leaseapi.Client.leave_group`, or an acquire with
    ``group=""``)."""

    default_code = "group_in_use"


class IdempotencyKeyReused(LeaseError):
    """422 ``idempotency_key_reused``: the trigger's Idempotency-Key was sent
    with another job or body within 24 hours; send a fresh key per intended
    run."""

    default_code = "idempotency_key_reused"


class IdempotencyKeyInFlight(LeaseError):
    """409 ``idempotency_key_in_flight``: the first request with this
    Idempotency-Key is still being answered; retried until the call's retry
    deadline."""

    default_code = "idempotency_key_in_flight"


class RateLimited(LeaseError):
    """429 ``rate_limited``: nothing was done; retried after ``Retry-After``
    until the call's retry deadline."""

    default_code = "rate_limited"


class Unavailable(LeaseError):
    """503 ``unavailable`` (the outcome of a write is unknown) or
    ``overloaded`` (nothing was done); retried after ``Retry-After`` until the
    call's retry deadline."""

    default_code = "unavailable"


class ServerError(LeaseError):
    """500 ``internal``, or another 5xx: not retried."""

    default_code = "internal"


class ConnectionFailed(LeaseError):
    """leaseapi did not answer (connection refused, reset, timed out, TLS
    failure); retried until the call's retry deadline. The outcome of a write
    is unknown, and retrying it is safe."""


class ProtocolError(LeaseError):
    """leaseapi answered something the client cannot read (not JSON, not a
    problem document, a lease without its fields)."""


_BY_CODE: Dict[str, Type[LeaseError]] = {
    "lease_held": LeaseHeld,
    "tick_done": TickDone,
    "job_paused": JobPaused,
    "tick_ahead": TickAhead,
    "group_full": GroupFull,
    "too_soon": TooSoon,
    "group_in_use": GroupInUse,
    "lease_lost": LeaseLost,
    "invalid_request": InvalidRequest,
    "feature_disabled": FeatureDisabled,
    # A route that does not take the method: this client's paths and
    # methods are the spec's, so only a service older than the client says it.
    "method_not_allowed": InvalidRequest,
    "payload_too_large": InvalidRequest,
    "unsupported_media_type": InvalidRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "policy_not_found": PolicyNotFound,
    "credential_exists": CredentialExists,
    "idempotency_key_reused": IdempotencyKeyReused,
    "idempotency_key_in_flight": IdempotencyKeyInFlight,
    "rate_limited": RateLimited,
    "unavailable": Unavailable,
    "overloaded": Unavailable,
    "internal": ServerError,
}

_BY_STATUS: Dict[int, Type[LeaseError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    429: RateLimited,
    503: Unavailable,
}


def error_class(code: Optional[str], status: int) -> Type[LeaseError]:
    """The class of a problem with this code and HTTP status."""
    if code is not None and code in _BY_CODE:
        return _BY_CODE[code]
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status >= 500:
        return ServerError
    return LeaseError
