"""Every task and run response, built by PostgreSQL, matches the served OpenAPI schema.

The serializers describe the shape and json_sql.py writes it: schemathesis' response checks
hold each to the other, over real rows in every state that changes the output (nulls, attempts,
executables, paused and finished tasks), for each read and for the writes that return a task or
a run. The fuzz tests (tests/system/test_fuzz.py) do the same with generated requests.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import schemathesis
from django.core.files.base import ContentFile
from django.core.wsgi import get_wsgi_application
from rest_framework_simplejwt.tokens import RefreshToken
from schemathesis import checks as core_checks
from schemathesis.specs.openapi import checks as openapi_checks

from tasks import schedules
from tasks.models import Attempt
from tests.factories import RunFactory, TaskFactory

# In-process WSGI requests close the connection when they end, as in the fuzz tests.
pytestmark = pytest.mark.django_db(transaction=True)

CHECKS = [
    core_checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
]
NOW = datetime.now(UTC)


@pytest.fixture
def schema() -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())


@pytest.fixture
def rows(user, settings, tmp_path) -> dict:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.SCHEDULER_WRITE_RATE = ""
    every_minute = schedules.normalize({"type": "interval", "every": 60}, now=NOW)
    recurring = TaskFactory(
        owner=user,
        schedule=every_minute,
        schedule_type="interval",
        next_unplanned_at=NOW + timedelta(minutes=1),
        timeout=2.5,
        dedup_key="k",
        notify=[{"channel": "c", "events": ["failed"]}],
    )
    binary = TaskFactory(owner=user, kind="executable", payload={"args": ["-v"]}, status="paused")
    binary.executable.save("tool.sh", ContentFile(b"#!/bin/sh\n"), save=True)
    plain = TaskFactory(owner=user)
    failed = RunFactory(
        task=recurring,
        scheduled_at=NOW - timedelta(minutes=1),
        status="failed",
        attempt=2,
        worker="w-1",
        started_at=NOW - timedelta(seconds=50),
        finished_at=NOW - timedelta(seconds=49),
        exit_code=3,
        http_status=502,
        output="out \u2028",
        error="boom",
    )
    Attempt.objects.create(
        run=failed,
        number=1,
        worker="w-1",
        started_at=None,
        finished_at=NOW,
        outcome="failed",
        error="lost",
    )
    Attempt.objects.create(
        run=failed,
        number=2,
        worker="w-1",
        started_at=NOW,
        finished_at=NOW,
        outcome="timed_out",
        exit_code=3,
        http_status=502,
    )
    pending = RunFactory(task=recurring, scheduled_at=NOW + timedelta(seconds=20))
    RunFactory(task=plain, scheduled_at=NOW + timedelta(hours=1))
    return {"tasks": [recurring, binary, plain], "runs": [failed, pending]}


def _check(schema, user, method: str, path: str, expect: int, **case) -> dict:
    token = str(RefreshToken.for_user(user).access_token)
    operation = schema[path][method]
    response = operation.Case(**case).call(headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == expect, response.content[:500]
    operation.Case(**case).validate_response(response, checks=CHECKS)
    return response.json()


def test_reads_match_the_schema(schema, user, rows) -> None:
    page = _check(schema, user, "GET", "/api/v1/tasks", 200, query={"page_size": 2})
    assert page["count"] == 3 and len(page["results"]) == 2
    _check(schema, user, "GET", "/tasks", 200)
    for task in rows["tasks"]:
        found = _check(
            schema, user, "GET", "/api/v1/tasks/{id}", 200, path_parameters={"id": str(task.pk)}
        )
        assert found["id"] == str(task.pk)
        _check(schema, user, "GET", "/task/{id}", 200, path_parameters={"id": str(task.pk)})
        _check(schema, user, "GET", "/task", 200, query={"id": str(task.pk)})
        _check(
            schema,
            user,
            "GET",
            "/api/v1/tasks/{id}/runs",
            200,
            path_parameters={"id": str(task.pk)},
        )
    for run in rows["runs"]:
        _check(schema, user, "GET", "/api/v1/runs/{id}", 200, path_parameters={"id": str(run.pk)})
    runs = _check(schema, user, "GET", "/api/v1/runs", 200, query={"status": "failed"})
    assert [run["id"] for run in runs["results"]] == [str(rows["runs"][0].pk)]


def test_writes_that_return_a_task_or_a_run_match_the_schema(schema, user, rows) -> None:
    recurring, _, plain = rows["tasks"]
    failed, pending = rows["runs"]
    body = {
        "kind": "handler",
        "payload": {"name": "noop"},
        "timeout": 3,
        "schedule": {"type": "interval", "every": 300},
    }
    created = _check(
        schema, user, "POST", "/api/v1/tasks", 201, body=body, media_type="application/json"
    )
    task_path = {"id": created["id"]}
    _check(
        schema,
        user,
        "PATCH",
        "/api/v1/tasks/{id}",
        200,
        path_parameters=task_path,
        body={"name": "renamed"},
        media_type="application/json",
    )
    for action in ("pause", "resume"):
        _check(
            schema, user, "POST", f"/api/v1/tasks/{{id}}/{action}", 200, path_parameters=task_path
        )
    _check(
        schema,
        user,
        "POST",
        "/api/v1/tasks/{id}/run-now",
        201,
        path_parameters={"id": str(plain.pk)},
    )
    _check(
        schema,
        user,
        "POST",
        "/api/v1/tasks/{id}/skip-next",
        200,
        path_parameters={"id": str(recurring.pk)},
    )
    _check(
        schema, user, "POST", "/api/v1/runs/{id}/retry", 200, path_parameters={"id": str(failed.pk)}
    )
    _check(
        schema,
        user,
        "POST",
        "/api/v1/runs/{id}/cancel",
        200,
        path_parameters={"id": str(pending.pk)},
    )


def test_the_calendar_feeds_match_the_schema(schema, user, rows) -> None:
    recurring = rows["tasks"][0]
    url = _check(schema, user, "GET", "/api/v1/calendar-feed", 200)["url"]
    token = url.split("token=")[1]
    _feed(schema, "/api/v1/calendar.ics", 200, query={"token": token})
    task = {"id": str(recurring.pk)}
    _feed(
        schema, "/api/v1/tasks/{id}/calendar.ics", 200, path_parameters=task, query={"token": token}
    )
    rotated = _check(schema, user, "POST", "/api/v1/calendar-feed/rotate", 200)["url"]
    assert rotated != url
    _feed(
        schema, "/api/v1/tasks/{id}/calendar.ics", 404, path_parameters=task, query={"token": token}
    )
    _feed(schema, "/api/v1/calendar.ics", 404, query={"token": token})


def _feed(schema, path: str, expect: int, **case) -> None:
    """An `.ics` route as a calendar app calls it: no Authorization header."""
    operation = schema[path]["GET"]
    response = operation.Case(**case).call(headers={"Accept": "text/calendar"})
    assert response.status_code == expect, response.content[:500]
    operation.Case(**case).validate_response(response, checks=CHECKS)
