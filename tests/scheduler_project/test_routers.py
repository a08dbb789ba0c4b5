"""Read replica routing: only reads of GET/HEAD API requests, never inside a transaction."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpResponse
from django.test import RequestFactory

from scheduler_project.routers import ReplicaReadMiddleware, ReplicaRouter, reading_from_replica
from tasks.models import Run


def route(method: str, path: str) -> tuple[bool, str | None]:
    seen = {}

    def view(request):
        seen["flag"] = reading_from_replica()
        seen["db"] = ReplicaRouter().db_for_read(Run)
        return HttpResponse()

    ReplicaReadMiddleware(view)(getattr(RequestFactory(), method)(path))
    return seen["flag"], seen["db"]


def test_api_gets_read_from_the_replica():
    assert route("get", "/api/v1/tasks") == (True, "replica")
    assert route("head", "/api/v1/runs/1") == (True, "replica")


def test_writes_admin_health_and_metrics_stay_on_the_primary():
    assert route("post", "/api/v1/tasks") == (False, None)
    assert route("get", "/admin/tasks/run/") == (False, None)
    assert route("get", "/health") == (False, None)
    assert route("get", "/metrics") == (False, None)
    assert not reading_from_replica()  # reset after the request
    assert ReplicaRouter().db_for_write(Run) == "default"
    assert ReplicaRouter().allow_migrate("replica", "tasks") is False


def test_reads_inside_a_transaction_use_the_primary(db):
    def view(request):
        with transaction.atomic():
            return HttpResponse(ReplicaRouter().db_for_read(Run) or "default")

    response = ReplicaReadMiddleware(view)(RequestFactory().get("/api/v1/tasks"))
    assert response.content == b"default"
