"""leaseapi: leases for cron jobs that run on every replica.

``Client`` talks to a leaseapi service; ``Runner`` runs a job under a lease
with heartbeats and a local deadline; ``leased`` decorates the function an
APScheduler (or any scheduler) runs at every tick, and ``leaseapi.celery``
does the same for Celery beat. Errors are ``LeaseError`` subclasses with
``code``, ``status``, ``detail`` and ``lease``.
"""

from .client import Client, Exchange
from .decorator import leased
from .errors import (
    ConnectionFailed,
    Forbidden,
    InvalidRequest,
    JobPaused,
    LeaseError,
    LeaseHeld,
    LeaseLost,
    NotAcquired,
    NotFound,
    ProtocolError,
    RateLimited,
    ServerError,
    TickDone,
    Unauthorized,
    Unavailable,
)
from .models import Lease, LeasePage, Run, RunPage, Stats, Whoami
from .runner import (
    Abandoned,
    DeadlinePassed,
    MaxRunTimeExceeded,
    RunContext,
    RunReport,
    Runner,
    RunStopped,
    ShuttingDown,
    current_run,
    default_owner,
)

__all__ = [
    "Client",
    "Exchange",
    "leased",
    "Runner",
    "RunContext",
    "RunReport",
    "current_run",
    "default_owner",
    "Lease",
    "LeasePage",
    "Run",
    "RunPage",
    "Stats",
    "Whoami",
    "LeaseError",
    "NotAcquired",
    "LeaseHeld",
    "TickDone",
    "JobPaused",
    "LeaseLost",
    "InvalidRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "RateLimited",
    "Unavailable",
    "ServerError",
    "ConnectionFailed",
    "ProtocolError",
    "RunStopped",
    "DeadlinePassed",
    "MaxRunTimeExceeded",
    "ShuttingDown",
    "Abandoned",
]

__version__ = "0.1.0"
