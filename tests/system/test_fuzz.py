"""Schemathesis against the served OpenAPI schema.

Every operation of `/api/schema/` gets FUZZ_EXAMPLES generated requests that fit the schema
(positive) and as many that do not (negative), sent in-process through the WSGI application with
a valid token. Half of the generated ids are swapped for ids of objects the user really owns
(fresh ones for each operation), so the actions, updates and deletes reach real rows rather than
only answering 404. Every response must be no server error and match the schema: status code,
content type, headers and body. The run is bounded (examples per operation, no shrinking) and
asserts its own volume: at least MIN_REQUESTS requests in all.

schemathesis's pytest plugin (`schema.parametrize()`) does not work with pytest 9, so the
operations are driven with its strategies and Hypothesis directly.
"""

from __future__ import annotations

import ipaddress
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import schemathesis
from django.core.files.base import ContentFile
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from rest_framework_simplejwt.tokens import RefreshToken
from schemathesis import checks as core_checks
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi import checks as openapi_checks

from notifications.models import Notification
from scheduler_project import outbound_http as http
from tasks import schedules
from tests.factories import RunFactory, TaskFactory, UserFactory
from tests.notifications.conftest import ChannelFactory

pytestmark = pytest.mark.fuzz

FUZZ_EXAMPLES = 40  # per operation and generation mode
MIN_REQUESTS = 2000
CHECKS = [
    core_checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_headers_conformance,
    openapi_checks.response_schema_conformance,
]
# /health answers 503 by design while no scheduler/worker/reviewer runs (as here): that is the
# probe's documented answer, not a server error. Its body must still match the schema.
PROBE_CHECKS = CHECKS[1:]
STATS: dict[str, Any] = {"requests": 0, "seconds": 0.0, "statuses": Counter(), "modes": set()}


@pytest.fixture
def fuzz_settings(settings, tmp_path, monkeypatch) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.SCHEDULER_WRITE_RATE = ""  # 429 is tested on its own; here it would only hide paths
    settings.SCHEDULER_OUTBOUND_ALLOW = []

    # No DNS from a test: host names resolve to a public address, IP literals to themselves.
    def resolve(host: str, port: int) -> list[Any]:
        try:
            return [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            return [ipaddress.ip_address("93.184.215.14")]

    monkeypatch.setattr(http, "_resolve", resolve)


def seed(user: Any) -> dict[str, list[str]]:
    """Objects of every kind the user owns, in the states the actions care about."""
    now = datetime.now(UTC)
    every_minute = schedules.normalize({"type": "interval", "every": 60}, now=now)
    tasks = [
        TaskFactory(owner=user),
        TaskFactory(owner=user, schedule=every_minute, schedule_type="interval"),
        TaskFactory(
            owner=user, kind="http", payload={"method": "GET", "url": "http://93.184.215.14/"}
        ),
        TaskFactory(
            owner=user,
            kind="executable",
            payload={"args": [], "env": {}},
            executable=ContentFile(b"#!/bin/sh\necho hi\n", name="job.sh"),
        ),
    ]
    runs = [
        RunFactory(task=tasks[0], scheduled_at=now + timedelta(hours=1)),
        RunFactory(task=tasks[1], status="failed", finished_at=now, attempt=1),
        RunFactory(task=tasks[2], status="succeeded", finished_at=now, attempt=1),
    ]
    channels = [
        ChannelFactory(owner=user, kind="email", config={"address": "ops@example.com"}),
        ChannelFactory(
            owner=user, config={"url": "http://93.184.215.14/hook"}, secrets={"secret": "s"}
        ),
    ]
    notification = Notification.objects.create(
        channel=channels[1],
        run=runs[1],
        task=tasks[1],
        attempt=1,
        event="failed",
        retry_until=now + timedelta(hours=1),
    )
    return {
        "task": [str(t.id) for t in tasks],
        "run": [str(r.id) for r in runs],
        "channel": [str(c.id) for c in channels],
        "notification": [str(notification.id)],
    }


def kind_of(path: str) -> str:
    for prefix, kind in (
        ("/api/v1/runs/", "run"),
        ("/api/v1/channels/", "channel"),
        ("/api/v1/notifications/", "notification"),
    ):
        if path.startswith(prefix):
            return kind
    return "task"


def use_real_ids(case: Any, ids: dict[str, list[str]]) -> None:
    """Replace about half of the generated ids (decided by the id itself) with owned ones."""
    kind = kind_of(case.operation.path)

    def swap(value: Any) -> Any:
        text = str(value)
        if sum(map(ord, text)) % 2:
            return value
        return ids[kind][sum(map(ord, text)) // 2 % len(ids[kind])]

    if case.path_parameters and "id" in case.path_parameters:
        case.path_parameters["id"] = swap(case.path_parameters["id"])
    if case.query and "id" in case.query:
        case.query["id"] = swap(case.query["id"])
    if isinstance(case.body, dict) and "task_id" in case.body:
        case.body["task_id"] = swap(case.body["task_id"])


def fuzz_operation(operation: Any, mode: GenerationMode, token: str, ids: dict) -> None:
    checks = PROBE_CHECKS if operation.path == "/health" else CHECKS

    @given(case=operation.as_strategy(mode))
    @hypothesis_settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        use_real_ids(case, ids)
        start = time.monotonic()
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        STATS["seconds"] += time.monotonic() - start
        STATS["requests"] += 1
        STATS["statuses"][response.status_code] += 1
        try:
            case.validate_response(response, checks=checks)
        except (AssertionError, BaseExceptionGroup) as exc:
            curl = case.as_curl_command(headers={"Authorization": "Bearer ..."})
            raise AssertionError(f"{exc}\n{curl}\n{response.content[:300]!r}") from None

    try:
        run()
    except Unsatisfiable:
        pass  # nothing to negate: an operation without parameters or body


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_answers_as_documented(transactional_db, fuzz_settings, mode) -> None:
    user = UserFactory()
    token = str(RefreshToken.for_user(user).access_token)
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
    failures: dict[str, str] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        try:
            fuzz_operation(operation, mode, token, seed(user))
        except (Exception, BaseExceptionGroup) as exc:
            failures[operation.label] = str(exc)[:2000]
    STATS["modes"].add(mode)
    report = "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
    assert not failures, report


def test_enough_requests_were_made() -> None:
    """Runs after the fuzz test above in both modes (module order); `-s` shows the figures."""
    if len(STATS["modes"]) < 2:
        pytest.skip("the fuzz test above did not run in both modes")
    print(
        f"\nfuzz: {STATS['requests']} requests in {STATS['seconds']:.1f}s of request time; "
        f"statuses {dict(sorted(STATS['statuses'].items()))}"
    )
    assert STATS["requests"] >= MIN_REQUESTS
