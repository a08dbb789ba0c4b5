"""The dashboard's figures read from the runs a user may see, for anyone who is not an operator.

The queue samples (tasks.QueueSample) are the whole queue's and cannot be split by owner, so a
user's charts are bucketed aggregates (`date_bin`) of the run admin's own queryset: the same
scoping (tasks/admin/scope.py, accounts/access.py) as the run list every bar links to, so a bar
counts exactly the rows its link lists. The owner's index bounds the read to the user's runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, DateTimeField, DurationField, F, Func, Max, Q, QuerySet, Value
from django.db.models.functions import Cast
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from accounts import access
from tasks.admin.timeline import timeline_url
from tasks.models import CLAIMABLE_STATUSES, TERMINAL_STATUSES, LimitKey, Run, Task
from tasks.transitions import limits

# ?range= → (span, bucket). Each range draws 60 to 96 bars.
RANGES: dict[str, tuple[timedelta, timedelta]] = {
    "1h": (timedelta(hours=1), timedelta(minutes=1)),
    "24h": (timedelta(hours=24), timedelta(minutes=15)),
    "7d": (timedelta(days=7), timedelta(hours=2)),
}
ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)  # date_bin's origin: buckets on round boundaries
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 1000, 190, 56, 12, 14, 44
FINISHED = ("succeeded", "failed")
KEYS_SHOWN = 50  # per kind: the panel is a glance, the API lists them all


class DateBin(Func):
    function = "date_bin"
    output_field = DateTimeField()


@dataclass
class Bar:
    start: datetime
    value: float
    count: int  # the runs behind the bar (its link lists them)
    link: str


def buckets(now: datetime, range_name: str) -> tuple[list[datetime], timedelta]:
    """The starts of the range's buckets, oldest first; the last holds `now`."""
    span, size = RANGES[range_name]
    last = ORIGIN + (now - ORIGIN) // size * size
    n = span // size
    return [last - size * (n - 1 - i) for i in range(n)], size


def visible_runs(runs: QuerySet, user: Any) -> QuerySet:
    """`runs` (the run admin's queryset for `user`, not an operator) read without its join to the
    tasks when the join decides nothing: the user sees their own runs and their teams' runs
    whose task is in a team; with no task in a team that is theirs or one of their teams', that
    is exactly their own runs (a run's owner is its task's). The join hashed the whole tasks
    table for each of the dashboard's figures (60 to 100 ms each over 100,000 tasks)."""
    in_teams = Task.objects.filter(team__isnull=False).filter(
        Q(owner=user) | access.visible_q(user)
    )
    return runs if in_teams.exists() else Run.objects.filter(owner=user)


def live_or_finished_since(since: datetime) -> Q:
    """Unfinished runs, and runs finished since `since`: each branch one index's (the claimable
    and running partial indexes, run_finished_idx), so the planner can read three short
    ranges instead of every row of the user's (the runs table has no started_at index). A run
    that started since `since` is in it: a finished run finished after it started."""
    return (
        Q(status__in=CLAIMABLE_STATUSES)
        | Q(status="running")
        | Q(status__in=TERMINAL_STATUSES, finished_at__gte=since)
    )


def _binned(queryset: QuerySet, field: str, size: timedelta) -> QuerySet:
    return queryset.annotate(
        bucket=DateBin(Value(size, output_field=DurationField()), F(field), Value(ORIGIN))
    ).values("bucket")


def run_list(**filters: str) -> str:
    return f"{reverse('admin:tasks_run_changelist')}?{urlencode(filters)}"


def _window(field: str, start: datetime, size: timedelta) -> dict[str, str]:
    return {f"{field}__gte": start.isoformat(), f"{field}__lt": (start + size).isoformat()}


def run_series(runs: QuerySet, starts: list[datetime], size: timedelta) -> dict[str, list[Bar]]:
    """Starts, finishes, failures and start lateness per bucket of `runs` (already scoped)."""
    begin, end = starts[0], starts[-1] + size
    late = Cast(F("started_at") - F("execute_at"), DurationField())
    started = {
        row["bucket"]: row
        for row in _binned(
            runs.filter(live_or_finished_since(begin), started_at__gte=begin, started_at__lt=end),
            "started_at",
            size,
        )
        .annotate(n=Count("pk"), late_n=Count("pk", filter=Q(backfill=False)))
        .annotate(late=Max(late, filter=Q(backfill=False)))
        .order_by()
    }
    finished = {
        row["bucket"]: row
        for row in _binned(
            runs.filter(status__in=FINISHED, finished_at__gte=begin, finished_at__lt=end),
            "finished_at",
            size,
        )
        .annotate(n=Count("pk"), failed=Count("pk", filter=Q(status="failed")))
        .order_by()
    }
    series: dict[str, list[Bar]] = {"starts": [], "finishes": [], "failures": [], "lateness": []}
    for start in starts:
        s, f = started.get(start, {}), finished.get(start, {})
        on_start, on_finish = (
            _window("started_at", start, size),
            _window("finished_at", start, size),
        )
        series["starts"].append(Bar(start, s.get("n", 0), s.get("n", 0), run_list(**on_start)))
        finishes = run_list(status__in=",".join(FINISHED), **on_finish)
        series["finishes"].append(Bar(start, f.get("n", 0), f.get("n", 0), finishes))
        failures = run_list(status__exact="failed", **on_finish)
        series["failures"].append(Bar(start, f.get("failed", 0), f.get("failed", 0), failures))
        # Backfilled runs are due long ago by design: no lateness, and not behind the bar.
        seconds = max(0.0, s["late"].total_seconds()) if s.get("late") is not None else 0.0
        punctual = run_list(backfill__exact="0", **on_start)
        series["lateness"].append(Bar(start, seconds, s.get("late_n", 0), punctual))
    return series


def state_counts(runs: QuerySet, since: datetime) -> list[tuple[str, int, str]]:
    """Runs per state: every unfinished one, and those finished since `since`; each with the
    run list's link to them."""
    counts = dict(
        runs.filter(live_or_finished_since(since))
        .values_list("status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    rows = []
    for status, label in Run.Status.choices:
        filters = {"status__exact": status}
        if status in TERMINAL_STATUSES:
            filters["finished_at__gte"] = since.isoformat()
            label = f"{label} (in range)"
        rows.append((label, counts.get(status, 0), run_list(**filters)))
    return rows


def _label(moment: datetime, size: timedelta) -> str:
    return moment.strftime("%H:%M" if size < timedelta(hours=1) else "%a %H:%M")


def bar_chart(title: str, bars: list[Bar], size: timedelta, unit: str, colour: str) -> SafeString:
    """An SVG bar chart, one linked bar per bucket; y axis from zero with a mid tick, x axis
    labelled every sixth of the range (UTC)."""
    top = max((b.value for b in bars), default=0.0) or 1.0
    plot_h, plot_w = HEIGHT - TOP - BOTTOM, WIDTH - LEFT - RIGHT
    step = plot_w / max(1, len(bars))
    base = TOP + plot_h
    parts = [
        format_html(
            '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#999"/>', LEFT, base, WIDTH - RIGHT, base
        ),
        format_html('<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#999"/>', LEFT, TOP, LEFT, base),
    ]
    # A count's axis has no half run: its middle tick only where it is a whole number.
    whole = unit != "runs" or top % 2 == 0
    for fraction in (0.0, 0.5, 1.0) if whole else (0.0, 1.0):
        y = base - plot_h * fraction
        parts.append(
            format_html(
                '<text x="{}" y="{}" text-anchor="end" font-size="11">{}</text>',
                LEFT - 4,
                f"{y + 4:.1f}",
                f"{top * fraction:.3g}",
            )
        )
    parts.append(
        format_html(
            '<text x="12" y="{}" font-size="11" transform="rotate(-90 12 {})" '
            'text-anchor="middle">{}</text>',
            TOP + plot_h / 2,
            TOP + plot_h / 2,
            unit,
        )
    )
    every = max(1, len(bars) // 6)
    for i, bar in enumerate(bars):
        x = LEFT + i * step
        if i % every == 0:
            parts.append(
                format_html(
                    '<text x="{}" y="{}" font-size="11">{}</text>',
                    f"{x:.1f}",
                    base + 16,
                    _label(bar.start, size),
                )
            )
        if not bar.count:
            continue
        h = max(1.0, plot_h * bar.value / top)
        parts.append(
            format_html(
                '<a href="{}" class="bar"><rect x="{}" y="{}" width="{}" height="{}" fill="{}">'
                "<title>{} from {}: {} {} ({} runs)</title></rect></a>",
                bar.link,
                f"{x + 0.5:.1f}",
                f"{base - h:.1f}",
                f"{max(1.0, step - 1):.1f}",
                f"{h:.1f}",
                colour,
                title,
                bar.start.strftime("%Y-%m-%d %H:%M UTC"),
                f"{bar.value:.3g}",
                unit,
                bar.count,
            )
        )
    parts.append(
        format_html(
            '<text x="{}" y="{}" text-anchor="middle" font-size="11">'
            "time (UTC), one bar per {}</text>",
            LEFT + plot_w / 2,
            HEIGHT - 6,
            _bucket_words(size),
        )
    )
    svg = format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" width="100%" '
        'style="max-width:{}px" role="img" aria-label="{}">{}</svg>',
        WIDTH,
        HEIGHT,
        WIDTH,
        title,
        mark_safe("".join(parts)),
    )
    total = sum(b.count for b in bars)
    return format_html(
        "<figure><figcaption><strong>{}</strong> ({} runs)</figcaption>{}</figure>",
        title,
        total,
        svg,
    )


def _bucket_words(size: timedelta) -> str:
    minutes = int(size.total_seconds() // 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h"


def charts(series: dict[str, list[Bar]], size: timedelta) -> list[SafeString]:
    return [
        bar_chart("Starts", series["starts"], size, "runs", "#417690"),
        bar_chart("Finishes", series["finishes"], size, "runs", "#70bf2b"),
        bar_chart("Failures", series["failures"], size, "runs", "#ba2121"),
        bar_chart(
            "Start lateness (max, backfills left out)", series["lateness"], size, "s", "#e6a23c"
        ),
    ]


@dataclass
class KeyRow:
    kind: str
    name: str
    using: int  # concurrency: running now; rate: starts in the window
    waiting: int  # claimable runs due
    limit: str
    timeline: str = ""  # the key's runs over time (tasks/admin/timeline.py)


def key_rows(user: object) -> list[KeyRow]:
    """The concurrency and rate keys the user may see (theirs, their teams', the global ones),
    as the API lists them (limits.visible_keys), with the counts the claim keeps."""
    rows = [
        KeyRow(
            "concurrency",
            _name(key),
            key.running,
            key.waiting,
            f"{key.max_running} running",
            timeline_url("key", key.pk),
        )
        for key in limits.visible_keys(limits.CONCURRENCY, user)[:KEYS_SHOWN]
    ]
    rows += [
        KeyRow(
            "rate",
            _name(key),
            key.used,
            key.waiting,
            f"{key.rate_limit} per {key.per_seconds} s",
            timeline_url("rate_key", key.pk),
        )
        for key in limits.visible_keys(limits.RATE, user)[:KEYS_SHOWN]
    ]
    return rows


def _name(key: LimitKey) -> str:
    return f"{key.name} (global)" if key.owner_id is None else key.name
