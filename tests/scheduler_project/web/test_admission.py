"""The admission middleware's decisions, in-process: what the gunicorn worker reports as the
request's queue wait against the budget (a real server: test_admission_server.py)."""

from __future__ import annotations

import json
import time

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from scheduler_project.gunicorn_worker import QUEUE_WAIT_KEY, QUEUED_AT_KEY
from scheduler_project.web.admission import SHED, AdmissionMiddleware
from tests.conftest import client_for
from tests.factories import UserFactory

SERVED = HttpResponse("served")


def admit(path: str, waited: float | None) -> HttpResponse:
    request = RequestFactory().get(path)
    if waited is not None:
        request.META[QUEUE_WAIT_KEY] = waited

    def view(request: HttpRequest) -> HttpResponse:
        return SERVED

    return AdmissionMiddleware(view)(request)


def shed(reason: str) -> float:
    return SHED.labels(reason)._value.get()


@pytest.mark.parametrize("waited", [None, 0.0, 0.99])
def test_request_within_the_budget_is_served(settings, waited):
    settings.SCHEDULER_QUEUE_BUDGET_SECONDS = 1.0
    assert admit("/api/v1/tasks", waited) is SERVED


def test_request_past_the_budget_is_answered_503_with_retry_after(settings):
    settings.SCHEDULER_QUEUE_BUDGET_SECONDS = 1.5
    before = shed("queue_wait")
    response = admit("/api/v1/tasks", 1.6)
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert json.loads(response.content)["code"] == "overloaded"
    assert shed("queue_wait") == before + 1


@pytest.mark.parametrize("path", ["/health", "/health/live", "/metrics"])
def test_probes_and_scrapes_are_never_shed(settings, path):
    settings.SCHEDULER_QUEUE_BUDGET_SECONDS = 1.0
    assert admit(path, 30.0) is SERVED


def test_a_path_that_only_starts_like_a_probe_is_shed(settings):
    settings.SCHEDULER_QUEUE_BUDGET_SECONDS = 1.0
    assert admit("/healthz", 30.0).status_code == 503


def test_a_budget_of_zero_sheds_nothing(settings):
    settings.SCHEDULER_QUEUE_BUDGET_SECONDS = 0.0
    assert admit("/api/v1/tasks", 30.0) is SERVED


@pytest.mark.django_db
def test_a_request_past_its_deadline_at_a_statement_is_answered_503(settings):
    # A budget that admits the request: only its deadline can turn it away.
    settings.SCHEDULER_QUEUE_BUDGET_SECONDS = 5.0
    settings.SCHEDULER_REQUEST_DEADLINE_SECONDS = 1.5
    client = client_for(UserFactory())
    before = shed("deadline")
    environ = {QUEUE_WAIT_KEY: 1.6, QUEUED_AT_KEY: time.monotonic() - 1.6}
    response = client.get("/api/v1/tasks", **environ)
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "5"
    assert response.json()["code"] == "overloaded"
    assert shed("deadline") == before + 1
    environ = {QUEUE_WAIT_KEY: 0.5, QUEUED_AT_KEY: time.monotonic() - 0.5}
    assert client.get("/api/v1/tasks", **environ).status_code == 200
