"""What the replica programs of the tests share: a client whose exchanges
go to a JSON lines file (checked against the spec by the test), and the
record of the runs a replica made."""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Dict

import leaseapi
from leaseapi.models import format_time


class JSONLines:
    """Appends JSON objects to a file, one per line, from any thread."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "a", buffering=1)
        self._lock = threading.Lock()

    def write(self, obj: Dict[str, Any]) -> None:
        line = json.dumps(obj)
        with self._lock:
            self._file.write(line + "\n")


def client_from_env() -> leaseapi.Client:
    exchanges = JSONLines(os.environ["TEST_EXCHANGES"])

    def on_exchange(e: leaseapi.Exchange) -> None:
        exchanges.write(
            {"method": e.method, "path": e.path, "requestBody": e.request_body, "status": e.status, "headers": e.headers, "body": e.body.decode("utf-8", "replace")}
        )

    return leaseapi.Client(os.environ["TEST_LEASEAPI_URL"], os.environ["TEST_LEASEAPI_TOKEN"], on_exchange=on_exchange)


def record_run(records: JSONLines, event: str) -> None:
    """Records an event of the run the caller is part of."""
    run = leaseapi.current_run()
    assert run is not None, "record_run outside a run"
    records.write({"event": event, "job": run.job_id, "tick": format_time(run.tick) if run.tick else None, "token": run.token, "owner": run.owner, "pid": os.getpid()})
