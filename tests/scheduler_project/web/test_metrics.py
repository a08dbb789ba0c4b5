"""GET /metrics: token, figures read from PostgreSQL, API request metrics across processes."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import requests
from django.test import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tasks.events import ALERTS, SKIP_KINDS
from tasks.models import Attempt, ConcurrencyKey, Process, RateKey, Task, Workflow, WorkflowRun
from tasks.transitions import claim
from tests.factories import RunFactory, TaskFactory, UserFactory


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(text: str, name: str, **labels: str) -> float | None:
    return samples(text).get((name, frozenset(labels.items())))


def scrape(client, **headers: str) -> str:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    return response.content.decode()


@override_settings(SCHEDULER_METRICS_TOKEN="s3cret-token")
def test_token_is_required_when_set(client, db):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert "scheduler_database_up 1.0" in scrape(client, HTTP_AUTHORIZATION="Bearer s3cret-token")


@override_settings(SCHEDULER_METRICS_TOKEN="")
def test_open_when_no_token(client, db):
    assert client.get("/metrics").status_code == 200


def test_queue_depth_by_status_and_priority(client, db):
    now = timezone.now()
    RunFactory(priority=9, execute_at=now - timedelta(seconds=3))
    RunFactory(priority=9, execute_at=now + timedelta(hours=1))
    RunFactory(priority=1, status="waiting_for_resource", execute_at=now - timedelta(minutes=1))
    RunFactory(priority=5, status="succeeded", finished_at=now)  # history: not queue depth
    text = scrape(client)
    assert value(text, "scheduler_queue_runs", status="scheduled", priority="9") == 2
    assert value(text, "scheduler_queue_runs", status="waiting_for_resource", priority="1") == 1
    assert value(text, "scheduler_queue_runs", status="succeeded", priority="5") is None
    assert value(text, "scheduler_runs_waiting_for_resource") == 1
    assert value(text, "scheduler_queue_due_runs") == 2
    assert value(text, "scheduler_queue_oldest_due_age_seconds") >= 60


def test_concurrency_keys_show_their_limit_running_and_due_runs(client, db):
    owner = UserFactory()
    key = ConcurrencyKey.objects.create(owner=owner, name="db", max_running=2)
    ConcurrencyKey.objects.create(name="crm", max_running=7)  # global, idle
    task = TaskFactory(owner=owner, concurrency_key=key)
    now = timezone.now()
    for seconds in (1, 2, 3):
        RunFactory(task=task, execute_at=now - timedelta(seconds=seconds), **task.requests)
    RunFactory(task=task, execute_at=now + timedelta(hours=1), **task.requests)  # not due
    claim.claim_runs(worker="w1", limit=10, prefetch_seconds=0, owner_cap=0)
    text = scrape(client)
    labels = {"key": "db", "owner": str(owner.pk)}
    assert value(text, "scheduler_concurrency_key_limit", **labels) == 2
    assert value(text, "scheduler_concurrency_key_running", **labels) == 2
    assert value(text, "scheduler_concurrency_key_waiting", **labels) == 1
    assert value(text, "scheduler_concurrency_key_limit", key="crm", owner="global") == 7


def test_rate_keys_show_their_limit_window_use_and_due_runs(client, db):
    owner = UserFactory()
    key = RateKey.objects.create(owner=owner, name="crm-api", rate_limit=2, per_seconds=60)
    task = TaskFactory(owner=owner, rate_key=key)
    now = timezone.now()
    for seconds in (1, 2, 3):
        RunFactory(task=task, execute_at=now - timedelta(seconds=seconds), **task.requests)
    claim.claim_runs(worker="w1", limit=10, prefetch_seconds=0, owner_cap=0)
    text = scrape(client)
    labels = {"key": "crm-api", "owner": str(owner.pk)}
    assert value(text, "scheduler_rate_limit_limit", **labels) == 2
    assert value(text, "scheduler_rate_limit_window_seconds", **labels) == 60
    assert value(text, "scheduler_rate_limit_used", **labels) == 2
    assert value(text, "scheduler_rate_limit_waiting", **labels) == 1


def test_finished_runs_and_attempts_are_counted_by_the_outcome_batch(client, db):
    task = TaskFactory(kind="handler")
    for _ in range(3):
        RunFactory(task=task, execute_at=timezone.now() - timedelta(seconds=1), max_attempts=2)
    claimed = claim.claim_runs(worker="w1", limit=10, prefetch_seconds=0, owner_cap=0)
    assert len(claimed) == 3
    outcomes = [
        claim.Outcome(
            run_id=claimed[0].id,
            attempt=1,
            status="succeeded",
            attempt_outcome="succeeded",
            started_at=claimed[0].claimed_at,
        ),
        claim.Outcome(
            run_id=claimed[1].id,
            attempt=1,
            status="succeeded",
            attempt_outcome="succeeded",
            started_at=claimed[1].claimed_at,
        ),
        claim.Outcome(
            run_id=claimed[2].id,
            attempt=1,
            status="scheduled",
            attempt_outcome="failed",
            started_at=claimed[2].claimed_at,
            retry_in=60.0,
        ),
    ]
    claim.record_outcomes(worker="w1", outcomes=outcomes)
    # A late duplicate of an outcome is fenced out, and so is its count.
    claim.record_outcomes(worker="w1", outcomes=outcomes[:1])
    text = scrape(client)
    assert value(text, "scheduler_runs_finished_total", kind="handler", outcome="succeeded") == 2
    assert value(text, "scheduler_run_attempts_total", kind="handler", outcome="succeeded") == 2
    assert value(text, "scheduler_run_attempts_total", kind="handler", outcome="failed") == 1
    # Lateness: both succeeded runs finished within the window.
    assert value(text, "scheduler_run_start_lateness_seconds_gcount") == 2
    assert value(text, "scheduler_run_start_lateness_seconds_bucket", le="+Inf") == 2


def test_rescues_are_counted(client, db):
    from tasks.transitions.rescue import rescue_stuck_runs

    stale = timezone.now() - timedelta(minutes=5)
    RunFactory(
        status="running",
        worker="gone",
        attempt=1,
        max_attempts=1,
        started_at=stale,
        heartbeat_at=stale,
    )
    RunFactory(
        status="running",
        worker="gone",
        attempt=1,
        max_attempts=3,
        started_at=stale,
        heartbeat_at=stale,
    )
    rescue_stuck_runs(after_seconds=10)
    text = scrape(client)
    assert value(text, "scheduler_run_attempts_total", kind="handler", outcome="rescued") == 2
    assert value(text, "scheduler_runs_finished_total", kind="handler", outcome="failed") == 1


def test_every_counter_is_exported_at_zero_for_every_label_value_before_any_count(client, db):
    # increase() sees no rise in a series that first appears at 1: the first rescue must find
    # its series already there, at 0, or "Workers dying" never fires on it. The label values
    # are the vocabularies' (a new outcome, skip reason or alert event is one more series).
    text = scrape(client)
    kinds = Task.Kind.values
    expected = {
        "scheduler_run_attempts": [
            {"kind": kind, "outcome": outcome}
            for kind in kinds
            for outcome in Attempt.Outcome.values
        ],
        "scheduler_runs_finished": [
            {"kind": kind, "outcome": outcome}
            for kind in kinds
            for outcome in ("succeeded", "failed", "cancelled")
        ],
        "scheduler_runs_skipped": [{"reason": reason} for reason in SKIP_KINDS],
        "scheduler_alerts": [{"event": event} for event in ALERTS],
        "scheduler_loop_errors": [
            {"role": role} for role in ("scheduler", "worker", "reviewer", "notifier")
        ],
    }
    assert {"rescued", "failed"} <= set(Attempt.Outcome.values) and "upstream" in SKIP_KINDS
    counters = {f.name: f for f in text_string_to_metric_families(text) if f.type == "counter"}
    # The API's own counters live in this process and count other tests' requests: requests by
    # route and status once seen, every shed reason from the start.
    assert set(counters) == {*expected, "scheduler_api_requests", "scheduler_api_shed_requests"}
    for name, label_sets in expected.items():
        shown = {
            frozenset(sample.labels.items()): sample.value
            for sample in counters[name].samples
            if sample.name == f"{name}_total"
        }
        assert shown == {frozenset(labels.items()): 0 for labels in label_sets}, name
    shed = counters["scheduler_api_shed_requests"].samples
    assert {s.labels["reason"] for s in shed if s.name.endswith("_total")} == {
        "queue_wait",
        "deadline",
        "client_gone",
    }


def test_heartbeat_age_and_alive_processes_by_role(client, db):
    now = timezone.now()
    Process.objects.create(
        name="w",
        role="worker",
        host="h",
        pid=1,
        started_at=now,
        last_seen_at=now - timedelta(seconds=4),
    )
    text = scrape(client)
    assert 3.5 <= value(text, "scheduler_role_last_heartbeat_age_seconds", role="worker") < 30
    assert value(text, "scheduler_role_processes_alive", role="worker") == 1
    assert value(text, "scheduler_role_processes_alive", role="scheduler") == 0


def test_api_requests_are_counted_by_route_pattern(client, db):
    before = scrape(client)
    route = "api/v1/runs/<uuid:pk>"
    old = value(before, "scheduler_api_requests_total", route=route, method="GET", status="401")
    for _ in range(3):
        client.get(f"/api/v1/runs/{TaskFactory().pk}")  # no token: 401
    text = scrape(client)
    new = value(text, "scheduler_api_requests_total", route=route, method="GET", status="401")
    assert new == (old or 0) + 3
    assert not re.search(r'route="[^"]*[0-9a-f]{8}-', text)  # no raw ids as label values
    count = value(text, "scheduler_api_request_duration_seconds_count", route=route, method="GET")
    assert count >= 3


@pytest.mark.processes
def test_request_counts_are_exact_across_gunicorn_workers(gunicorn, tmp_path):
    """Four gunicorn workers answer at once; every scrape, whichever worker serves it, reports
    the sum over all of them (prometheus_client multiprocess mode)."""
    multiproc = tmp_path / "prometheus"
    base = gunicorn(workers=4, PROMETHEUS_MULTIPROC_DIR=str(multiproc))
    labels = {"route": "health", "method": "GET", "status": "503"}  # no role process runs here

    def total() -> float:
        text = requests.get(f"{base}/metrics", timeout=5).text
        return value(text, "scheduler_api_requests_total", **labels) or 0.0

    before = total()
    with ThreadPoolExecutor(max_workers=8) as pool:  # concurrent: several workers must answer
        codes = list(
            pool.map(lambda _: requests.get(f"{base}/health", timeout=10).status_code, range(80))
        )
    assert codes == [503] * 80
    pids = {path.stem.rsplit("_", 1)[-1] for path in multiproc.glob("counter_*.db")}
    assert len(pids) >= 2, pids
    assert [total() for _ in range(6)] == [before + 80] * 6


def test_notifications_by_channel_kind_and_status(client, db):
    from notifications.models import Channel, Notification

    run = RunFactory(status="succeeded", finished_at=timezone.now())
    channel = Channel.objects.create(owner=run.owner, kind="email", config={"address": "a@b.c"})
    for event in ("succeeded", "failed"):
        Notification.objects.create(
            channel=channel,
            run=run,
            task=run.task,
            attempt=1,
            event=event,
            retry_until=timezone.now(),
        )
    text = scrape(client)
    assert (
        value(text, "scheduler_notifications_recent", channel_kind="email", status="pending") == 2
    )
    assert value(text, "scheduler_notifications_pending") == 2


def test_backfilled_runs_are_kept_out_of_start_lateness(client, db):
    now = timezone.now()
    days_ago = now - timedelta(days=9)
    RunFactory(
        status="succeeded", execute_at=now - timedelta(seconds=2), started_at=now, finished_at=now
    )
    # Due nine days ago by design: replayed history, not a run that started late.
    RunFactory(
        status="succeeded",
        execute_at=days_ago,
        scheduled_at=days_ago,
        started_at=now,
        finished_at=now,
        backfill=True,
    )
    text = scrape(client)
    assert value(text, "scheduler_run_start_lateness_seconds_gcount") == 1
    assert value(text, "scheduler_run_start_lateness_seconds_gsum") == pytest.approx(2, abs=0.01)


def test_a_backfilled_run_waits_from_when_it_was_made(client, db):
    """The "Runs start late" alert reads the oldest due run's wait: a backfill made just now of
    runs due days ago has not waited days."""
    days_ago = timezone.now() - timedelta(days=9)
    RunFactory(scheduled_at=days_ago, execute_at=days_ago, backfill=True)
    text = scrape(client)
    assert value(text, "scheduler_queue_due_runs") == 1
    assert value(text, "scheduler_queue_oldest_due_age_seconds") < 60


def test_workflow_gauges_count_running_workflow_runs_and_overdue_workflows(client, db):
    owner = UserFactory()
    steps = [{"id": "a", "task": {"kind": "handler", "payload": {"name": "noop"}}}]
    quiet = Workflow.objects.create(owner=owner, name="quiet", steps=steps)
    late = Workflow.objects.create(
        owner=owner, name="late", steps=steps, expect={"success_within": 60}, health="overdue"
    )
    now = timezone.now()
    for workflow, status in ((quiet, "running"), (late, "running"), (late, "succeeded")):
        WorkflowRun.objects.create(
            workflow=workflow,
            owner=owner,
            status=status,
            started_at=now,
            finished_at=None if status == "running" else now,
        )
    text = scrape(client)
    assert value(text, "scheduler_workflow_runs_running") == 2
    assert value(text, "scheduler_workflows_overdue") == 1
