"""`python -m bench admin`: the server time of every console page over 1,000,000 runs and
100,000 tasks (bench/admin_data.py), p50 and p95, beside the floor from the same run: a trivial
admin page (the password-changed page: the session read, the admin's permission check and its
base template, nothing of ours) timed in the same rounds.

In process through Django's test client (the whole request: middleware, view, queries,
template; no network). Each round requests every page once, in the same order, so a busy
moment of a shared machine falls on all pages alike; the first round is a warm-up, not counted.
The data set takes minutes to write: `--keep-db` keeps the scratch database and `--reuse-db`
times over a kept one (migrated forward first, so an index added since is built on it).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from bench import admin_data
from tasks.audit_log import AuditEntry
from tasks.models import Calendar, ConcurrencyKey, Run, Task
from tasks.workflow_models import Workflow, WorkflowRun

FLOOR = "/admin/password_change/done/"
OP, USER = "operator", "user"

# (label, who, url): the url's {names} are filled from `targets`.
PAGES: list[tuple[str, str, str]] = [
    ("tasks: default", OP, "/admin/tasks/task/"),
    ("tasks: page 50", OP, "/admin/tasks/task/?p={task_page}"),
    ("tasks: search by name", OP, "/admin/tasks/task/?q=bench+task+4242"),
    ("tasks: search by id", OP, "/admin/tasks/task/?q={task}"),
    ("tasks: status=paused", OP, "/admin/tasks/task/?status__exact=paused"),
    ("tasks: cancelled shown", OP, "/admin/tasks/task/?cancelled=shown"),
    (
        "tasks: kind, priority, schedule",
        OP,
        "/admin/tasks/task/?kind__exact=handler&priority=9&schedule_type=cron",
    ),
    ("tasks: health=late", OP, "/admin/tasks/task/?health=late"),
    ("tasks: one owner", OP, "/admin/tasks/task/?owner={user_id}"),
    ("tasks: owner, last run failed", OP, "/admin/tasks/task/?owner={user_id}&last_run=failed"),
    ("task page: busy task", OP, "/admin/tasks/task/{busy_task}/change/"),
    ("task page: quiet task", OP, "/admin/tasks/task/{task}/change/"),
    ("runs: no filter", OP, "/admin/tasks/run/"),
    ("runs: page 50", OP, "/admin/tasks/run/?p={run_page}"),
    ("runs: status=failed", OP, "/admin/tasks/run/?status__exact=failed"),
    ("runs: status=running", OP, "/admin/tasks/run/?status__exact=running"),
    ("runs: status=scheduled", OP, "/admin/tasks/run/?status__exact=scheduled"),
    ("runs: scheduled today", OP, "/admin/tasks/run/?scheduled_at__gte={today}"),
    (
        "runs: scheduled range, failed",
        OP,
        "/admin/tasks/run/?status__exact=failed"
        "&scheduled_at__gte={week_ago}&scheduled_at__lt={today}",
    ),
    (
        "runs: started in last hour",
        OP,
        "/admin/tasks/run/?started_at__gte={hour_ago}&started_at__lt={now}",
    ),
    (
        "runs: started 2 h, 6 days ago",
        OP,
        "/admin/tasks/run/?started_at__gte={six_days_ago}&started_at__lt={six_days_ago_2h}",
    ),
    (
        "runs: started 1 h, a year ago",
        OP,
        "/admin/tasks/run/?started_at__gte={year_ago}&started_at__lt={year_ago_1h}",
    ),
    (
        "runs: started, not backfilled",
        OP,
        "/admin/tasks/run/?backfill__exact=0"
        "&started_at__gte={six_days_ago}&started_at__lt={six_days_ago_2h}",
    ),
    (
        "runs: finished 2 h, 6 days ago",
        OP,
        "/admin/tasks/run/?status__in=succeeded,failed"
        "&finished_at__gte={six_days_ago}&finished_at__lt={six_days_ago_2h}",
    ),
    (
        "runs: failed, finished since",
        OP,
        "/admin/tasks/run/?status__exact=failed&finished_at__gte={day_ago}",
    ),
    ("runs: one task", OP, "/admin/tasks/run/?task__id__exact={busy_task}"),
    ("runs: one owner", OP, "/admin/tasks/run/?owner={user_id}"),
    ("runs: search by task name", OP, "/admin/tasks/run/?q=bench+task+77"),
    ("runs: search by run id", OP, "/admin/tasks/run/?q={run}"),
    ("run page: failed run", OP, "/admin/tasks/run/{run}/change/"),
    ("dashboard 1 h", OP, "/admin/dashboard/?range=1h"),
    ("dashboard 24 h", OP, "/admin/dashboard/?range=24h"),
    ("dashboard 7 d", OP, "/admin/dashboard/?range=7d"),
    ("timeline: all, 24 h", OP, "/admin/tasks/run/timeline/"),
    ("timeline: all, 7 d", OP, "/admin/tasks/run/timeline/?hours=168"),
    ("timeline: one task, 7 d", OP, "/admin/tasks/run/timeline/?task={busy_task}&hours=168"),
    ("timeline: one key, 24 h", OP, "/admin/tasks/run/timeline/?key={key}"),
    ("timeline: one key, 7 d", OP, "/admin/tasks/run/timeline/?key={key}&hours=168"),
    ("workflows", OP, "/admin/tasks/workflow/"),
    ("workflow page", OP, "/admin/tasks/workflow/{workflow}/change/"),
    ("workflow runs", OP, "/admin/tasks/workflowrun/"),
    ("workflow run page", OP, "/admin/tasks/workflowrun/{workflow_run}/change/"),
    ("audit: list", OP, "/admin/tasks/auditentry/"),
    ("audit: action filter", OP, "/admin/tasks/auditentry/?action__exact=update"),
    ("audit: one month", OP, "/admin/tasks/auditentry/?at__gte={month_start}&at__lt={month_end}"),
    ("audit: search", OP, "/admin/tasks/auditentry/?q=bench+task+4242"),
    ("calendars", OP, "/admin/tasks/calendar/"),
    ("calendar page", OP, "/admin/tasks/calendar/{calendar}/change/"),
    ("concurrency keys", OP, "/admin/tasks/concurrencykey/"),
    ("concurrency key page", OP, "/admin/tasks/concurrencykey/{key}/change/"),
    ("rate keys", OP, "/admin/tasks/ratekey/"),
    ("user: tasks", USER, "/admin/tasks/task/"),
    ("user: task page", USER, "/admin/tasks/task/{user_task}/change/"),
    ("user: runs", USER, "/admin/tasks/run/"),
    ("user: runs, status=failed", USER, "/admin/tasks/run/?status__exact=failed"),
    (
        "user: runs, started 2 h",
        USER,
        "/admin/tasks/run/?started_at__gte={six_days_ago}&started_at__lt={six_days_ago_2h}",
    ),
    ("user: run page", USER, "/admin/tasks/run/{user_run}/change/"),
    ("user: dashboard 1 h", USER, "/admin/dashboard/?range=1h"),
    ("user: dashboard 24 h", USER, "/admin/dashboard/?range=24h"),
    ("user: dashboard 7 d", USER, "/admin/dashboard/?range=7d"),
    ("user: timeline, 24 h", USER, "/admin/tasks/run/timeline/"),
    ("user: timeline, one key", USER, "/admin/tasks/run/timeline/?key={user_key}"),
    ("user: audit", USER, "/admin/tasks/auditentry/"),
    ("user: workflows", USER, "/admin/tasks/workflow/"),
]


@dataclass
class Timing:
    label: str
    url: str
    client: Client
    ms: list[float] = field(default_factory=list)
    queries: int = 0

    def p(self, q: int) -> float:
        if len(self.ms) < 2:
            return self.ms[0]
        return statistics.quantiles(self.ms, n=100, method="inclusive")[q - 1]


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def targets(operator: Any, user: Any) -> dict[str, Any]:
    """The ids and times the pages' URLs name."""
    now = datetime.now(UTC).replace(microsecond=0)
    tasks = Task.objects.filter(name__startswith=admin_data.NAME_PREFIX)
    busy = tasks.order_by("id").values_list("id", flat=True)[:100]
    failed = Run.objects.filter(status="failed").order_by("-id")
    key = ConcurrencyKey.objects.filter(owner=operator).order_by("id").first()
    user_key = ConcurrencyKey.objects.filter(owner=user).order_by("id").first()
    first_audit = AuditEntry.objects.order_by("id").first()
    month = ((first_audit.at if first_audit else now) + timedelta(days=40)).replace(day=1)
    # Page 50 (or the last page of a small data set: the smoke test's).
    task_page = min(50, max(1, tasks.count() // 50 - 1))
    run_page = min(50, max(1, Run.objects.count() // 50 - 1))
    return {
        "task_page": task_page,
        "run_page": run_page,
        "task": tasks.order_by("-id").values_list("id", flat=True).first(),
        "busy_task": busy[1],
        "user_task": tasks.filter(owner=user).order_by("id").values_list("id", flat=True).first(),
        "user_id": user.pk,
        "run": failed.values_list("id", flat=True).first(),
        "user_run": failed.filter(owner=user).values_list("id", flat=True).first(),
        "key": key.pk if key else 0,
        "user_key": user_key.pk if user_key else 0,
        "workflow": Workflow.objects.order_by("id").values_list("id", flat=True).first(),
        "workflow_run": WorkflowRun.objects.order_by("id").values_list("id", flat=True).first(),
        "calendar": Calendar.objects.order_by("id").values_list("id", flat=True).first(),
        "now": _iso(now),
        "today": now.strftime("%Y-%m-%d"),
        "hour_ago": _iso(now - timedelta(hours=1)),
        "day_ago": _iso(now - timedelta(days=1)),
        "week_ago": (now - timedelta(days=7)).strftime("%Y-%m-%d"),
        "six_days_ago": _iso(now - timedelta(days=6)),
        "six_days_ago_2h": _iso(now - timedelta(days=6) + timedelta(hours=2)),
        "year_ago": _iso(now - timedelta(days=364)),
        "year_ago_1h": _iso(now - timedelta(days=364) + timedelta(hours=1)),
        "month_start": month.strftime("%Y-%m-%d"),
        "month_end": (month + timedelta(days=31)).replace(day=1).strftime("%Y-%m-%d"),
    }


def test_hosts() -> Any:
    """The test client's host allowed, for the API calls that make workflows and the pages."""
    return override_settings(ALLOWED_HOSTS=[*settings.ALLOWED_HOSTS, "testserver"])


def populate(runs: int, *, tasks: int = admin_data.TASKS, write: Any = print) -> None:
    admin_data.populate(runs, tasks=tasks, write=write)


def measure(repeat: int, *, only: str = "", write: Any = print) -> None:
    operator, user = admin_data.users()
    clients = {OP: Client(), USER: Client()}
    clients[OP].force_login(operator)
    clients[USER].force_login(user)
    names = targets(operator, user)
    floor = Timing("floor (password-changed page)", FLOOR, clients[OP])
    pages = [floor] + [
        Timing(label, url.format(**names), clients[who])
        for label, who, url in PAGES
        if only.lower() in label.lower()
    ]
    for round_number in range(repeat + 1):
        for page in pages:
            connection.queries_log.clear()  # the log keeps 9,000: counted per request
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = page.client.get(page.url)
                elapsed = (time.perf_counter() - started) * 1000
            assert response.status_code == 200, (page.url, response.status_code)
            if round_number:
                page.ms.append(elapsed)
            page.queries = len(queries)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    write(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load}, ")
    write(f"{repeat} rounds (after a warm-up round); server time in ms\n")
    write(f"| {'page':34} | {'p50':>7} | {'p95':>7} | {'queries':>7} |")
    write(f"| {'-' * 34} | {'-' * 7} | {'-' * 7} | {'-' * 7} |")
    for page in pages:
        mark = " !" if page.p(95) >= 200 else ""
        write(
            f"| {page.label:34} | {page.p(50):7.1f} | {page.p(95):7.1f}{mark} | {page.queries:7d} |"
        )
    slow = [page.label for page in pages if page.p(95) >= 200]
    write(f"\npages at or over 200 ms p95: {', '.join(slow) or 'none'}")
