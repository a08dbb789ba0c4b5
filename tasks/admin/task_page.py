"""A task's admin page reads first: a summary above the form (what the task is, how it is, what
it will do and what it did), the form below it to edit every field.

The summary: name, status and health badges; the schedule in words with its next five fire
times in the task's zone and the viewer's; expectations, keys and limits; calendars and
exclusions; the last PAGE_STRIP runs as a strip of squares, each a link to its run; then those
runs as a table with duration and error. The task is the one the page's scoped queryset found
(tasks/admin/scope.py), its runs read in one query (tasks/admin/strips.py).
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

import tasks.admin.display as display
from tasks import expectations, occurrences, schedule_describe
from tasks.admin.strips import PAGE_STRIP, recent_runs
from tasks.models import Calendar, Task, TaskHealth

ERROR_SHOWN = 300  # characters of a run's error in the table; its page has all of it


class TaskSummaryPage(admin.ModelAdmin):
    change_form_template = "admin/tasks/task/change_form.html"

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        """Read once per GET: the summary, the backfill button and the form each ask for the
        task (its queryset probes the runs index three times per read)."""
        if request.method != "GET":
            return super().get_object(request, object_id, from_field)
        read: dict[Any, Any] = request.__dict__.setdefault("_tasks_read", {})
        if (object_id, from_field) not in read:
            read[object_id, from_field] = super().get_object(request, object_id, from_field)
        return read[object_id, from_field]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        task = self.get_object(request, object_id)  # scoped: another user's task is a 404
        context = {**(extra_context or {})}
        if task is not None and request.method == "GET":
            context["summary"] = summary(task, now=timezone.now())
        return super().change_view(request, object_id, form_url, context)


def summary(task: Task, *, now: datetime) -> dict[str, Any]:
    """What the page shows above the form, ready for the template."""
    zone = zoneinfo.ZoneInfo(task.schedule.get("timezone") or "UTC")
    runs = recent_runs([task.pk], now=now, count=PAGE_STRIP)[task.pk]
    return {
        "status": display.badge(task.status),
        "health": display.badge(expectations.health_of(task)),
        "schedule": schedule_describe.describe(task.schedule) or task.schedule_type,
        "zone": zone.key,
        "viewer_zone": timezone.get_current_timezone_name(),
        "fire_times": [
            (at.astimezone(zone).strftime("%a %Y-%m-%d %H:%M:%S %Z"), display.local(at))
            for at in occurrences.next_runs(task, now=now, count=5)
        ],
        "expectations": _expectations(task),
        "limits": _limits(task),
        "exclusions": _exclusions(task),
        "strip": display.strip(runs),
        "runs": [
            {
                "id": run.pk,
                "url": display.run_url(run.pk),
                "scheduled_at": display.local(run.scheduled_at),
                "status": display.badge(run.status),
                "attempt": f"{run.attempt}/{run.max_attempts}",
                "started_at": display.local(run.started_at),
                "duration": display.duration(run, now),
                "error": _first_line(run.error),
            }
            for run in runs
        ],
    }


def _first_line(error: str) -> str:
    line = error.strip().splitlines()[-1] if error.strip() else ""  # a traceback's last line
    return line if len(line) <= ERROR_SHOWN else line[:ERROR_SHOWN] + "…"


def _seconds(value: Any) -> str:
    return display.span(float(value)) if value is not None else "-"


def _expectations(task: Task) -> list[tuple[str, str]]:
    expect = task.expect or {}
    rows: list[tuple[str, str]] = []
    if expect.get("start_within") is not None:
        rows.append(("starts within", _seconds(expect["start_within"]) + " of its time"))
    duration = expect.get("duration") or {}
    if duration:
        rows.append(
            ("runs for", f"{_seconds(duration.get('min'))} to {_seconds(duration.get('max'))}")
        )
    if expect.get("failure_streak") is not None:
        rows.append(("fails at most", f"{expect['failure_streak']} times in a row"))
    if expect.get("success_within") is not None:
        rows.append(("succeeds within", _seconds(expect["success_within"])))
    if expect.get("repeat_every") is not None:
        rows.append(("alerts again every", _seconds(expect["repeat_every"])))
    try:
        state = task.health_state
    except TaskHealth.DoesNotExist:
        return rows
    rows.append(("failures in a row", str(state.failures)))
    rows.append(("last success", display.local(state.succeeded_at)))
    rows.append(("health since", display.local(state.changed_at)))
    return rows


def _limits(task: Task) -> list[tuple[str, str]]:
    rows = [
        ("priority", str(task.priority)),
        ("attempts", f"at most {task.max_attempts}"),
        (
            "backoff",
            f"{_seconds(task.retry_backoff_base)} doubling, at most "
            f"{_seconds(task.retry_backoff_cap)}",
        ),
        ("timeout", _seconds(task.timeout) if task.timeout else "none"),
    ]
    if task.dedup_key:
        rows.append(("dedup key", task.dedup_key))
    if task.concurrency:
        limit = task.concurrency
        rows.append(
            (
                "concurrency key",
                f"{limit.get('key')}: at most {limit.get('limit')} "
                f"running ({limit.get('scope') or 'user'})",
            )
        )
    if task.rate_limit:
        limit = task.rate_limit
        rows.append(
            (
                "rate limit key",
                f"{limit.get('key')}: at most {limit.get('limit')} "
                f"starts per {_seconds(limit.get('per'))} ({limit.get('scope') or 'user'})",
            )
        )
    if task.resources:
        rows.append(("resources", ", ".join(f"{k}={v}" for k, v in sorted(task.resources.items()))))
    rows.append(("on zombie", task.on_zombie))
    return rows


def _exclusions(task: Task) -> list[tuple[str, str]]:
    schedule = task.schedule
    rows: list[tuple[str, str]] = []
    ids = [str(i) for i in schedule.get("exclude") or []]
    if ids:
        # A schedule names its owner's calendars only (the API checks it when saved).
        found = Calendar.objects.filter(pk__in=ids, owner_id=task.owner_id)
        names = {str(pk): name for pk, name in found.values_list("pk", "name")}
        rows.append(("calendars", ", ".join(names.get(i, f"{i} (gone)") for i in ids)))
    for window in schedule.get("exclude_windows") or []:
        rows.append(("window off", f"{window.get('start')} to {window.get('end')}"))
    if schedule.get("exdates"):
        rows.append(("dates off", ", ".join(str(d) for d in schedule["exdates"])))
    return rows
