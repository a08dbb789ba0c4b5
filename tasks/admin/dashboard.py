"""The admin dashboard (/admin/dashboard/): the queue now, and the last hour drawn as charts.
Operators see the whole queue's; everyone else their own runs' (tasks/admin/dashboard_runs.py).

The charts read the per-minute rows reviewers write (tasks.QueueSample), so the page costs the
same whatever the load; the live figures are a few queries on the partial indexes. Charts are
inline SVG drawn here: no JavaScript, no CDN (operators' networks often have no internet).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db.models import Count, Max, Min, Q
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from tasks.admin import dashboard_runs
from tasks.admin.scope import is_operator
from tasks.db import db_now
from tasks.models import CLAIMABLE_STATUSES, HEALTHS, Process, QueueSample, Run, TaskHealth

WIDTH, HEIGHT, LEFT, BOTTOM = 640, 170, 44, 22
COLOURS = ("#417690", "#ba2121", "#e6a23c", "#70bf2b")


@dataclass
class Series:
    label: str
    values: list[float | None]


def _polylines(values: list[float | None], x: list[float], scale: float) -> list[str]:
    """SVG point lists, broken where a minute has no sample (a gap, not a drop to zero)."""
    lines: list[str] = []
    current: list[str] = []
    for xi, value in zip(x, values, strict=True):
        if value is None:
            if current:
                lines.append(" ".join(current))
            current = []
            continue
        current.append(f"{xi:.1f},{HEIGHT - BOTTOM - value * scale:.1f}")
    if current:
        lines.append(" ".join(current))
    return lines


def line_chart(title: str, minutes: list[datetime], series: list[Series], unit: str) -> SafeString:
    """An SVG line chart of per-minute values; the y axis starts at zero."""
    top = max((v for s in series for v in s.values if v is not None), default=0.0) or 1.0
    scale = (HEIGHT - BOTTOM - 10) / top
    step = (WIDTH - LEFT - 10) / max(1, len(minutes) - 1)
    x = [LEFT + i * step for i in range(len(minutes))]
    parts = [
        format_html(
            '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#999"/>',
            LEFT,
            HEIGHT - BOTTOM,
            WIDTH - 10,
            HEIGHT - BOTTOM,
        ),
        format_html(
            '<line x1="{}" y1="10" x2="{}" y2="{}" stroke="#999"/>', LEFT, LEFT, HEIGHT - BOTTOM
        ),
        format_html(
            '<text x="{}" y="18" font-size="11">{} {}</text>', LEFT + 4, f"{top:.3g}", unit
        ),
        format_html(
            '<text x="{}" y="{}" text-anchor="end" font-size="11">0</text>',
            LEFT - 4,
            HEIGHT - BOTTOM,
        ),
    ]
    if minutes:
        for xi, anchor, minute in ((x[0], "start", minutes[0]), (x[-1], "end", minutes[-1])):
            parts.append(
                format_html(
                    '<text x="{}" y="{}" text-anchor="{}" font-size="11">{}</text>',
                    f"{xi:.1f}",
                    HEIGHT - 6,
                    anchor,
                    minute.strftime("%H:%M UTC"),
                )
            )
    legend = []
    for i, one in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        for points in _polylines(one.values, x, scale):
            parts.append(
                format_html(
                    '<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>',
                    colour,
                    points,
                )
            )
        legend.append(format_html('<span style="color:{}">&#9632; {}</span>', colour, one.label))
    svg = format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img" '
        'aria-label="{}">{}</svg>',
        WIDTH,
        HEIGHT,
        title,
        mark_safe("".join(parts)),
    )
    return format_html(
        "<figure><figcaption><strong>{}</strong> {}</figcaption>{}</figure>",
        title,
        format_html_join(" ", "{}", ((item,) for item in legend)),
        svg,
    )


def last_hour(now: datetime) -> tuple[list[datetime], dict[datetime, QueueSample]]:
    end = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    minutes = [end - timedelta(minutes=59 - i) for i in range(60)]
    rows = QueueSample.objects.filter(minute__gte=minutes[0], minute__lte=end)
    return minutes, {row.minute: row for row in rows}


def own_dashboard(request: HttpRequest, range_name: str) -> HttpResponse:
    """A user's dashboard: counts and charts of the runs they may see, from the runs table (the
    whole queue's samples cannot be split by owner). The run admin's queryset scopes it, so the
    run list each bar links to lists exactly the runs the bar counts."""
    now = db_now()
    runs = dashboard_runs.visible_runs(
        admin.site.get_model_admin(Run).get_queryset(request), request.user
    )
    starts, size = dashboard_runs.buckets(now, range_name)
    series = dashboard_runs.run_series(runs, starts, size)
    context = {
        **admin.site.each_context(request),
        "title": "Your dashboard",
        "now": now,
        "own": True,
        "range": range_name,
        "ranges": list(dashboard_runs.RANGES),
        "states": dashboard_runs.state_counts(runs, starts[0]),
        "charts": dashboard_runs.charts(series, size),
        "keys": dashboard_runs.key_rows(request.user),
    }
    return TemplateResponse(request, "admin/tasks/dashboard.html", context)


def live_figures(now: datetime) -> dict[str, Any]:
    """The queue right now, from the claimable and running partial indexes."""
    claimable = Run.objects.filter(status__in=CLAIMABLE_STATUSES).aggregate(
        scheduled=Count("pk", filter=Q(status="scheduled")),
        waiting=Count("pk", filter=Q(status="waiting_for_resource")),
        due=Count("pk", filter=Q(execute_at__lte=now)),
        oldest_due=Min("execute_at", filter=Q(execute_at__lte=now)),
    )
    running = Run.objects.filter(status="running").count()
    oldest = claimable.pop("oldest_due")
    dead_after = timedelta(seconds=settings.REVIEWERS_PROCESS_DEAD_AFTER_SECONDS)
    roles = (
        Process.objects.filter(stopped_at__isnull=True, last_seen_at__gte=now - dead_after)
        .values("role")
        .annotate(alive=Count("pk"), last=Max("last_seen_at"))
    )
    # Tasks with expectations by health (one row each in tasks_taskhealth), not yet ended.
    health = dict(
        TaskHealth.objects.filter(task__status__in=["active", "paused"])
        .exclude(health=TaskHealth.Health.UP)
        .values_list("health")
        .annotate(n=Count("pk"))
    )
    return {
        **claimable,
        "health": [(h, health.get(h, 0)) for h in HEALTHS if h != TaskHealth.Health.UP],
        "running": running,
        "oldest_due_seconds": (now - oldest).total_seconds() if oldest else 0.0,
        "roles": {row["role"]: row["alive"] for row in roles},
    }


ROLES = ("scheduler", "worker", "reviewer")


def dashboard_view(request: HttpRequest) -> HttpResponse:
    range_name = request.GET.get("range", "1h")
    if range_name not in dashboard_runs.RANGES:
        choices = ", ".join(dashboard_runs.RANGES)
        return HttpResponseBadRequest(f"range: must be one of {choices}.")
    if not is_operator(request.user):
        return own_dashboard(request, range_name)
    now = db_now()
    minutes, samples = last_hour(now)

    def column(name: str) -> list[float | None]:
        return [
            getattr(samples[m], name)
            if m in samples and getattr(samples[m], name) is not None
            else None
            for m in minutes
        ]

    charts = [
        line_chart(
            "Queue depth",
            minutes,
            [
                Series("due", column("due")),
                Series("waiting for resource", column("waiting_for_resource")),
                Series("running", column("running")),
            ],
            "runs",
        ),
        line_chart(
            "Start lateness",
            minutes,
            [
                Series("p50", column("lateness_p50")),
                Series("p99", column("lateness_p99")),
                Series("max", column("lateness_max")),
            ],
            "s",
        ),
        line_chart(
            "Throughput",
            minutes,
            [Series("finished", column("finished")), Series("failed", column("failed"))],
            "runs/min",
        ),
    ]
    live = live_figures(now)
    context = {
        **admin.site.each_context(request),
        "title": "Scheduler dashboard",
        "range": "1h",
        "now": now,
        "live": live,
        "roles": [(role, live["roles"].get(role, 0)) for role in ROLES],
        "charts": charts,
        "sampled_minutes": len(samples),
        "finished_last_hour": sum(s.finished for s in samples.values()),
        "failed_last_hour": sum(s.failed for s in samples.values()),
        "sla": settings.TASKS_START_SLA_SECONDS,
    }
    return TemplateResponse(request, "admin/tasks/dashboard.html", context)
