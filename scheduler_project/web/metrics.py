"""GET /metrics: Prometheus text format (docs/api.md, Operations; docs/operations.md, Metrics).

Run, queue and process figures are read from PostgreSQL at scrape time by `DatabaseCollector`,
so they are the same whichever API process answers and however many workers write them. Each
query is bounded: partial indexes for the queue, a small counters table for the totals, the
newest runs of a short window for lateness. Nothing counts the history table.
"""

from __future__ import annotations

import hmac
import logging
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.http import HttpRequest, HttpResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from scheduler_project.sql import queries
from scheduler_project.web import request_metrics
from tasks.db import is_unavailable
from tasks.events import ALERTS, SKIP_KINDS
from tasks.models import HEALTHS, Attempt, Task
from tasks.outages import DATABASE

logger = logging.getLogger(__name__)

ROLES = ("scheduler", "worker", "reviewer")
# Every label value a counter can take is exported from the first scrape, at 0 until counted:
# a series that first appears at 1 is no increase() to Prometheus, so the first rescue or failure
# would fire no alert.
LOOP_ROLES = (*ROLES, "notifier")
FINISHED_OUTCOMES = ("succeeded", "failed", "cancelled")
SKIP_REASON_LABELS = SKIP_KINDS
LATENESS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# Lateness is measured over at most this many of the newest runs per final status in the window:
# the scrape costs the same at ten runs a minute as at ten thousand a second.
LATENESS_SAMPLE = 5000

# One scan per partial index: each branch's WHERE matches run_claimable_idx or run_running_idx
# exactly, so neither reads the history.
_DEPTH_SQL = """
SELECT status, priority, count(*) FROM tasks_run
 WHERE status IN ('scheduled', 'waiting_for_resource') GROUP BY status, priority
UNION ALL
SELECT status, priority, count(*) FROM tasks_run WHERE status = 'running' GROUP BY status, priority
"""
# A backfilled run, due long ago by design, has waited since the backfill made it.
_DUE_SQL = """
SELECT count(*),
       coalesce(extract(epoch FROM now() - min(CASE WHEN backfill THEN created_at
                                                    ELSE execute_at END)), 0)::float8
  FROM tasks_run
 WHERE status IN ('scheduled', 'waiting_for_resource') AND execute_at <= now()
"""
# The busiest keys of each kind (tasks/sql/limits.sql, `busiest_*`), at most KEY_METRICS_TOP
# of them, so the series stay bounded however many keys users create; the due count capped at
# KEY_WAITING_CAP.
KEY_METRICS_TOP = 50
KEY_WAITING_CAP = 100_000
# run_running_idx, then the flag: only running runs are read.
_ZOMBIE_SQL = "SELECT count(*) FROM tasks_run WHERE status = 'running' AND zombie_since IS NOT NULL"
# Each count one partial index's range (workflow_run_running_idx, workflow_expect_idx).
_WORKFLOWS_SQL = """
SELECT (SELECT count(*) FROM tasks_workflowrun WHERE status = 'running'),
       (SELECT count(*) FROM tasks_workflow
         WHERE (expect ? 'success_within' OR health = 'overdue') AND health = 'overdue')
"""
_COUNTERS_SQL = """
SELECT metric, kind, outcome, sum(value)::bigint FROM tasks_runcounter GROUP BY 1, 2, 3
"""
# One row per task with expectations (tasks_taskhealth), not per task or run.
_HEALTH_SQL = """
SELECT h.health, count(*) FROM tasks_taskhealth h JOIN tasks_task t ON t.id = h.task_id
 WHERE t.status IN ('active', 'paused') GROUP BY h.health
"""
# The newest runs per status through run_finished_idx, read backwards and cut off.
# now() (the scrape transaction's start), not clock_timestamp(): only a stable value can bound
# an index scan; a volatile one would be a filter and the scan would walk the whole history.
# A backfilled run is due long ago by design (replayed history): no start lateness.
_LATENESS_SQL = """
WITH late AS (
    (SELECT greatest(0, extract(epoch FROM started_at - execute_at))::float8 AS s FROM tasks_run
      WHERE status = 'succeeded' AND started_at IS NOT NULL AND NOT backfill
        AND finished_at >= now() - make_interval(secs => %(window)s)
      ORDER BY finished_at DESC LIMIT %(sample)s)
    UNION ALL
    (SELECT greatest(0, extract(epoch FROM started_at - execute_at))::float8 FROM tasks_run
      WHERE status = 'failed' AND started_at IS NOT NULL AND NOT backfill
        AND finished_at >= now() - make_interval(secs => %(window)s)
      ORDER BY finished_at DESC LIMIT %(sample)s)
)
SELECT array(SELECT (SELECT count(*) FROM late WHERE s <= b.le)
               FROM unnest(%(buckets)s::float8[]) WITH ORDINALITY AS b(le, i) ORDER BY b.i),
       (SELECT count(*) FROM late), (SELECT coalesce(sum(s), 0) FROM late)
"""
_PROCESSES_SQL = """
SELECT role, extract(epoch FROM clock_timestamp() - max(last_seen_at))::float8,
       count(*) FILTER (WHERE stopped_at IS NULL
                          AND last_seen_at >= clock_timestamp() - make_interval(secs => %(dead)s))
  FROM tasks_process GROUP BY role
"""


def _label_rows(cursor: Any, sql: str, params: dict | None = None) -> list[tuple]:
    cursor.execute(sql, params or {})
    return cursor.fetchall()


def queue_metrics(cursor: Any) -> Iterator[Metric]:
    depth = GaugeMetricFamily(
        "scheduler_queue_runs",
        "Runs not finished, by status and priority (queue depth; running included).",
        labels=["status", "priority"],
    )
    waiting = 0
    for status, priority, count in _label_rows(cursor, _DEPTH_SQL):
        depth.add_metric([status, str(priority)], count)
        waiting += count if status == "waiting_for_resource" else 0
    yield depth
    yield GaugeMetricFamily(
        "scheduler_runs_waiting_for_resource",
        "Runs due for longer than TASKS_START_SLA_SECONDS that no worker has started yet.",
        value=waiting,
    )
    yield GaugeMetricFamily(
        "scheduler_runs_zombie",
        "Running executables that used no CPU and wrote nothing for TASKS_ZOMBIE_AFTER_SECONDS.",
        value=_label_rows(cursor, _ZOMBIE_SQL)[0][0],
    )
    running_workflows, overdue_workflows = _label_rows(cursor, _WORKFLOWS_SQL)[0]
    yield GaugeMetricFamily(
        "scheduler_workflow_runs_running", "Workflow runs not ended yet.", value=running_workflows
    )
    yield GaugeMetricFamily(
        "scheduler_workflows_overdue",
        "Workflows whose expect.success_within has lapsed (no workflow run succeeded in time).",
        value=overdue_workflows,
    )
    due, oldest = _label_rows(cursor, _DUE_SQL)[0]
    yield GaugeMetricFamily("scheduler_queue_due_runs", "Runs due now, not started.", value=due)
    yield GaugeMetricFamily(
        "scheduler_queue_oldest_due_age_seconds",
        "How long the oldest due run has waited to start (0 when none is waiting).",
        value=oldest,
    )


# Each kind of limit key's statement (tasks/sql/limits.sql) and gauges, labelled by key and
# owner, in the order of the statement's columns after those two.
_KEY_GAUGES = {
    "busiest_concurrency_keys": [
        ("scheduler_concurrency_key_limit", "A concurrency key's limit."),
        ("scheduler_concurrency_key_running", "Runs of a concurrency key running."),
        (
            "scheduler_concurrency_key_waiting",
            "Runs of a concurrency key due and not started (held by the key or queued).",
        ),
    ],
    "busiest_rate_keys": [
        ("scheduler_rate_limit_limit", "A rate key's limit: starts per window."),
        ("scheduler_rate_limit_window_seconds", "A rate key's window."),
        ("scheduler_rate_limit_used", "Runs of a rate key started in its window now."),
        (
            "scheduler_rate_limit_waiting",
            "Runs of a rate key due and not started (held by the key or queued).",
        ),
    ],
}


def key_metrics(cursor: Any) -> Iterator[Metric]:
    params = {"cap": KEY_WAITING_CAP, "top": KEY_METRICS_TOP}
    for statement, gauges in _KEY_GAUGES.items():
        families = [GaugeMetricFamily(name, text, labels=["key", "owner"]) for name, text in gauges]
        sql = queries("tasks", "limits.sql")[statement]
        for key, owner, *values in _label_rows(cursor, sql, params):
            for family, value in zip(families, values, strict=True):
                family.add_metric([key, owner], value)
        yield from families


def counter_metrics(cursor: Any) -> Iterator[Metric]:
    finished = CounterMetricFamily(
        "scheduler_runs_finished",
        "Runs that reached a final status through a worker or reviewer, by task kind.",
        labels=["kind", "outcome"],
    )
    attempts = CounterMetricFamily(
        "scheduler_run_attempts",
        "Attempts recorded, by task kind and outcome (`rescued`: taken back from a dead worker).",
        labels=["kind", "outcome"],
    )
    loop_errors = CounterMetricFamily(
        "scheduler_loop_errors",
        "Passes of a role's loop that failed with an unexpected error (logged with its "
        "traceback; the process paused, then went on), by role.",
        labels=["role"],
    )
    skipped = CounterMetricFamily(
        "scheduler_runs_skipped",
        "Occurrences recorded skipped, by reason (misfire, overlap, pause, request: "
        "skip-next; other).",
        labels=["reason"],
    )
    alerts = CounterMetricFamily(
        "scheduler_alerts",
        "Alerts raised by tasks' expectations, by event (reminders included).",
        labels=["event"],
    )
    by_role = dict.fromkeys(LOOP_ROLES, 0)
    # Summed over task kinds: the reason or event is what an alert rule asks about.
    by_reason: dict[str, int] = dict.fromkeys(SKIP_REASON_LABELS, 0)
    by_event: dict[str, int] = dict.fromkeys(ALERTS, 0)
    by_outcome: dict[str, dict[tuple[str, str], int]] = {
        "finished": {(k, o): 0 for k in Task.Kind.values for o in FINISHED_OUTCOMES},
        "attempt": {(k, o): 0 for k in Task.Kind.values for o in Attempt.Outcome.values},
    }
    for metric, kind, outcome, value in _label_rows(cursor, _COUNTERS_SQL):
        if metric == "loop_error":
            by_role[kind] = by_role.get(kind, 0) + value
        elif metric == "skipped":
            by_reason[outcome] = by_reason.get(outcome, 0) + value
        elif metric == "alert":
            by_event[outcome] = by_event.get(outcome, 0) + value
        elif metric in by_outcome:
            counts = by_outcome[metric]
            counts[kind, outcome] = counts.get((kind, outcome), 0) + value
    for family, metric in ((finished, "finished"), (attempts, "attempt")):
        for labels, value in sorted(by_outcome[metric].items()):
            family.add_metric(list(labels), value)
    for role, value in sorted(by_role.items()):
        loop_errors.add_metric([role], value)
    for reason, value in sorted(by_reason.items()):
        skipped.add_metric([reason], value)
    for event, value in sorted(by_event.items()):
        alerts.add_metric([event], value)
    yield finished
    yield attempts
    yield loop_errors
    yield skipped
    yield alerts


def health_metrics(cursor: Any) -> Iterator[Metric]:
    by_health = GaugeMetricFamily(
        "scheduler_tasks_health",
        "Active or paused tasks with expectations, by health (up, late, failing, overdue).",
        labels=["health"],
    )
    counts = dict.fromkeys(HEALTHS, 0) | dict(_label_rows(cursor, _HEALTH_SQL))
    for health in HEALTHS:
        by_health.add_metric([health], counts[health])
    yield by_health


def lateness_metrics(cursor: Any) -> Iterator[Metric]:
    params = {
        "window": settings.SCHEDULER_METRICS_WINDOW_SECONDS,
        "sample": LATENESS_SAMPLE,
        "buckets": list(LATENESS_BUCKETS),
    }
    cumulative, count, total = _label_rows(cursor, _LATENESS_SQL, params)[0]
    buckets = [(repr(le), n) for le, n in zip(LATENESS_BUCKETS, cumulative, strict=True)]
    yield GaugeHistogramMetricFamily(
        "scheduler_run_start_lateness_seconds",
        "Start lateness (started_at - execute_at) of the runs finished in the last "
        "SCHEDULER_METRICS_WINDOW_SECONDS, backfilled runs left out; a gauge histogram: use "
        "histogram_quantile, no rate().",
        buckets=[*buckets, ("+Inf", count)],
        gsum_value=total,
    )


def process_metrics(cursor: Any) -> Iterator[Metric]:
    age = GaugeMetricFamily(
        "scheduler_role_last_heartbeat_age_seconds",
        "Seconds since the most recent heartbeat of any process of the role.",
        labels=["role"],
    )
    alive = GaugeMetricFamily(
        "scheduler_role_processes_alive",
        "Processes of the role seen within REVIEWERS_PROCESS_DEAD_AFTER_SECONDS.",
        labels=["role"],
    )
    params = {"dead": settings.REVIEWERS_PROCESS_DEAD_AFTER_SECONDS}
    seen = {
        role: (last, count) for role, last, count in _label_rows(cursor, _PROCESSES_SQL, params)
    }
    for role in ROLES:
        last, count = seen.get(role, (None, 0))
        if last is not None:
            age.add_metric([role], last)
        alive.add_metric([role], count)
    yield age
    yield alive


def notification_metrics() -> list[Metric]:
    """Notifications by channel kind and status, created within the window; pending backlog.

    The notifications app may be absent or not migrated yet: then this yields nothing.
    """
    try:
        from notifications.models import Notification
    except ImportError:
        return []
    from django.db.models import Count, Min
    from django.utils import timezone

    since = timezone.now() - timedelta(seconds=settings.SCHEDULER_METRICS_WINDOW_SECONDS)
    recent = GaugeMetricFamily(
        "scheduler_notifications_recent",
        "Notifications created in the last SCHEDULER_METRICS_WINDOW_SECONDS, by channel kind "
        "and status (pending, sent, failed).",
        labels=["channel_kind", "status"],
    )
    try:
        with transaction.atomic():  # a savepoint: a missing table must not poison the scrape
            rows = (
                Notification.objects.filter(id__gte=uuid7_floor(since))
                .values_list("channel__kind", "status")
                .annotate(n=Count("pk"))
                .order_by()
            )
            for kind, status, n in rows:
                recent.add_metric([str(kind), str(status)], n)
            pending = Notification.objects.filter(status="pending").aggregate(
                n=Count("pk"), oldest=Min("created_at")
            )
    except Exception as exc:  # not migrated, or its fields differ: metrics must still answer
        logger.warning("notification metrics unavailable: %s", exc)
        return []
    oldest = pending["oldest"]
    return [
        recent,
        GaugeMetricFamily(
            "scheduler_notifications_pending",
            "Notifications not yet delivered.",
            value=pending["n"],
        ),
        GaugeMetricFamily(
            "scheduler_notifications_oldest_pending_age_seconds",
            "Age of the oldest notification not yet delivered (0 when none).",
            value=(timezone.now() - oldest).total_seconds() if oldest else 0.0,
        ),
    ]


def uuid7_floor(moment: datetime) -> uuid.UUID:
    """The smallest UUIDv7 of `moment`'s millisecond. Notification ids are UUIDv7 (tasks.ids):
    "created since" becomes a primary-key range scan, where created_at has no index."""
    return uuid.UUID(int=int(moment.timestamp() * 1000) << 80)


class DatabaseCollector(Collector):
    """Reads every run, queue and process figure from PostgreSQL when Prometheus scrapes."""

    def collect(self) -> Iterator[Metric]:
        families: list[Metric] = []
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                # A slow scrape must fail fast rather than pile up behind a busy database.
                cursor.execute("SET LOCAL statement_timeout = '5s'")
                for source in (
                    queue_metrics,
                    key_metrics,
                    counter_metrics,
                    health_metrics,
                    lateness_metrics,
                    process_metrics,
                ):
                    families.extend(source(cursor))
                families.extend(notification_metrics())
            up = 1
        except DatabaseError as exc:
            if is_unavailable(exc):
                DATABASE.failed(exc, what="metrics scrape")  # logged once per outage
            else:
                logger.warning("metrics: database unavailable: %s", exc)
            families, up = [], 0
        yield GaugeMetricFamily(
            "scheduler_database_up", "1 when /metrics could read PostgreSQL.", value=up
        )
        yield from families


def registry() -> CollectorRegistry:
    """A registry for one scrape: database figures plus the API request metrics."""
    scrape = CollectorRegistry(auto_describe=False)
    scrape.register(DatabaseCollector())
    if request_metrics.MULTIPROC_DIR:
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(scrape)
    else:
        scrape.register(_Forward(request_metrics.REGISTRY))
    return scrape


class _Forward(Collector):
    def __init__(self, source: CollectorRegistry) -> None:
        self.source = source

    def collect(self) -> Iterable[Metric]:
        return self.source.collect()


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus scrape endpoint; needs `Bearer SCHEDULER_METRICS_TOKEN` when one is set."""
    token = settings.SCHEDULER_METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            response = HttpResponse("missing or invalid metrics token\n", status=401)
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
