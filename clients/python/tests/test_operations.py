"""The client covers api/openapi.yaml: every operation has a method (a new
operation in the spec fails here until the client has it), and every
problem code has its error class."""

from __future__ import annotations

from spec import METHODS, Spec

import leaseapi
from leaseapi import errors

# Operations that are not the client's: the probes (for orchestrators), the
# metrics (for Prometheus), the spec itself and the console (for browsers).
NOT_CLIENT = {"healthz", "readyz", "metrics", "openapi", "consoleRedirect", "consoleRedirectSlash", "consoleAsset"}


def _operation_ids(spec: Spec) -> set:
    return {op["operationId"] for item in spec.doc["paths"].values() for method, op in item.items() if method in METHODS}


def test_every_operation_has_a_method(spec: Spec) -> None:
    ids = _operation_ids(spec)
    missing = ids - NOT_CLIENT - set(leaseapi.Client.OPERATIONS)
    assert not missing, f"operations of api/openapi.yaml without a method in Client.OPERATIONS: {sorted(missing)}"
    gone = (set(leaseapi.Client.OPERATIONS) | NOT_CLIENT) - ids
    assert not gone, f"operations no longer in api/openapi.yaml: {sorted(gone)}"
    for operation, name in leaseapi.Client.OPERATIONS.items():
        assert callable(getattr(leaseapi.Client, name, None)), f"{operation}: Client.{name} does not exist"


def test_every_problem_code_has_its_error(spec: Spec) -> None:
    codes = set(spec.doc["components"]["schemas"]["Problem"]["properties"]["code"]["enum"])
    for code in codes:
        cls = errors.error_class(code, 400)
        assert cls is not errors.LeaseError, f"problem code {code!r} has no error class"
        assert cls.default_code in (code, "invalid_request", "unavailable"), f"{code!r} maps to {cls.__name__}"


def test_webhook_events_are_the_spec_s(spec: Spec) -> None:
    assert list(leaseapi.WEBHOOK_EVENTS) == spec.doc["components"]["schemas"]["WebhookEventType"]["enum"]


def test_alert_reasons_are_the_spec_s(spec: Spec) -> None:
    assert list(leaseapi.ALERT_REASONS) == spec.doc["components"]["schemas"]["AlertReason"]["enum"]
