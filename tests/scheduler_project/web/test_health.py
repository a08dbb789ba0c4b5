"""GET /health: per-component status, 503 only for critical components, real processes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from scheduler_project.web import health
from tasks.models import Process
from tests.conftest import process_env, wait_for
from tests.factories import RunFactory


def alive(
    role: str, *, seen_ago: float = 0.0, stopped: bool = False, sandbox: str = "bwrap"
) -> Process:
    now = timezone.now()
    return Process.objects.create(
        name=f"{role}:test:{Process.objects.count()}",
        role=role,
        host="test",
        pid=1,
        started_at=now - timedelta(minutes=5),
        last_seen_at=now - timedelta(seconds=seen_ago),
        stopped_at=now if stopped else None,
        sandbox=sandbox if role == "worker" else "",
        sandbox_error="" if sandbox else "bubblewrap (bwrap) is not installed",
    )


@pytest.fixture
def every_role(db):
    return [alive(role) for role in health.ROLES]


def test_healthy_when_every_role_is_alive(client, every_role):
    response = client.get("/health")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok"
    assert set(body["components"]) >= {"database", "scheduler", "worker", "reviewer", "queue"}
    worker = body["components"]["worker"]
    assert worker["status"] == "ok" and worker["alive"] == 1
    assert worker["processes"][0]["name"] == every_role[1].name
    assert worker["last_seen"]


def test_503_when_a_role_has_no_live_process(client, db):
    alive("scheduler")
    alive("reviewer")
    alive("worker", seen_ago=60)  # stale heartbeat
    alive("worker", stopped=True)  # stopped cleanly
    response = client.get("/health")
    assert response.status_code == 503
    worker = response.json()["components"]["worker"]
    assert worker["status"] == "down" and worker["alive"] == 0
    assert worker["last_seen"] is not None  # when the last one was seen, for the on-call
    assert response.json()["components"]["scheduler"]["status"] == "ok"


def test_queue_down_past_the_start_sla(client, every_role):
    RunFactory(execute_at=timezone.now() - timedelta(seconds=30))
    with override_settings(TASKS_START_SLA_SECONDS=10):
        response = client.get("/health")
    assert response.status_code == 503
    queue = response.json()["components"]["queue"]
    assert queue["status"] == "down" and queue["oldest_due_seconds"] >= 30


def test_a_backfilled_run_waits_from_its_backfill_not_its_occurrence(client, every_role):
    now = timezone.now()
    week_ago = RunFactory(execute_at=now - timedelta(days=7), scheduled_at=now - timedelta(days=7))
    week_ago.backfill = True
    week_ago.save(update_fields=["backfill"])
    with override_settings(TASKS_START_SLA_SECONDS=10):
        response = client.get("/health")
        assert response.status_code == 200, response.json()
        assert response.json()["components"]["queue"]["oldest_due_seconds"] < 10
        # Backfilled a minute ago and not started since: that wait counts.
        type(week_ago).objects.filter(pk=week_ago.pk).update(created_at=now - timedelta(minutes=1))
        queue = client.get("/health").json()["components"]["queue"]
    assert queue["status"] == "down" and 60 <= queue["oldest_due_seconds"] < 120


def test_a_soft_warning_does_not_fail_the_probe(client, every_role, monkeypatch):
    def warn(self) -> None:
        raise health.ServiceWarning("deliveries are slow")

    monkeypatch.setattr(health.NotificationsCheck, "run", warn)
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "warning"
    assert response.json()["components"]["notifications"]["status"] == "warning"


def test_a_failing_non_critical_check_is_only_a_warning(client, every_role, monkeypatch):
    def broken(self) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(health.NotificationsCheck, "run", broken)
    assert client.get("/health").status_code == 200


def test_unapplied_migrations_fail_the_database(client, every_role, monkeypatch):
    class Executor:
        def __init__(self, connection: object) -> None:
            self.loader = type("L", (), {"graph": type("G", (), {"leaf_nodes": lambda s: []})()})()

        def migration_plan(self, targets: object) -> list:
            return [(type("M", (), {"app_label": "tasks", "name": "0099_future"})(), False)]

    monkeypatch.setattr(health, "MigrationExecutor", Executor)
    monkeypatch.setattr(health, "_migrations_ok_until", 0.0)
    response = client.get("/health")
    assert response.status_code == 503
    database = response.json()["components"]["database"]
    assert database["unapplied_migrations"] == ["tasks.0099_future"]


def test_liveness_checks_nothing(client, db):
    assert client.get("/health/live").json() == {"status": "ok"}


@pytest.mark.processes
def test_health_follows_the_only_worker_going_and_coming_back(processes, client):
    """SIGKILL the only worker: /health turns 503 once its heartbeat is older than the dead-after
    window; a new worker turns it back to 200."""
    dead_after = 3.0
    env = process_env(TASKS_HEARTBEAT_SECONDS="0.5")
    processes.start("runscheduler", env=env)
    processes.start("runreviewer", env=env)
    worker = processes.start("runworker", "--concurrency", "1", env=env)

    def status() -> int:
        return client.get("/health").status_code

    with override_settings(REVIEWERS_PROCESS_DEAD_AFTER_SECONDS=dead_after):
        wait_for(lambda: status() == 200, timeout=30)
        worker.kill()  # no goodbye: only the stale heartbeat tells
        worker.wait()
        killed = timezone.now()
        wait_for(lambda: status() == 503, timeout=dead_after + 5)
        took = (timezone.now() - killed).total_seconds()
        assert took <= dead_after + 2, took
        assert client.get("/health").json()["components"]["worker"]["status"] == "down"
        processes.start("runworker", "--concurrency", "1", env=env)
        wait_for(lambda: status() == 200, timeout=30)


def test_an_old_pending_notification_is_a_warning_not_a_failure(client, every_role):
    from notifications.models import Channel, Notification

    run = RunFactory(status="succeeded", finished_at=timezone.now())
    channel = Channel.objects.create(owner=run.owner, kind="email", config={"address": "a@b.c"})
    Notification.objects.create(
        channel=channel,
        run=run,
        task=run.task,
        attempt=1,
        event="succeeded",
        retry_until=timezone.now(),
        created_at=timezone.now() - timedelta(hours=1),
    )
    response = client.get("/health")
    assert response.status_code == 200
    notifications = response.json()["components"]["notifications"]
    assert notifications["status"] == "warning" and notifications["oldest_pending_seconds"] > 3000
