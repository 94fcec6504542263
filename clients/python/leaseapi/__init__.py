"""leaseapi: leases for cron jobs that run on every replica.

``Client`` talks to a leaseapi service; ``Runner`` runs a job under a lease
with heartbeats and a local deadline; ``leased`` decorates the function an
APScheduler (or any scheduler) runs at every tick, and ``leaseapi.celery``
does the same for Celery beat. Errors are ``LeaseError`` subclasses with
``code``, ``status``, ``detail`` and ``lease``.
"""

from .client import AcquireItem, BatchResult, Client, Exchange, HeartbeatItem
from .decorator import leased
from . import errors as _errors
from .errors import *  # noqa: F401,F403 - every error class, listed in errors.__all__
from . import models as _models
from .models import *  # noqa: F401,F403 - every answer's type, listed in models.__all__
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
    "AcquireItem",
    "HeartbeatItem",
    "BatchResult",
    "leased",
    "Runner",
    "RunContext",
    "RunReport",
    "current_run",
    "default_owner",
    *_models.__all__,
    "RunStopped",
    "DeadlinePassed",
    "MaxRunTimeExceeded",
    "ShuttingDown",
    "Abandoned",
    *_errors.__all__,
]

__version__ = "0.1.0"
