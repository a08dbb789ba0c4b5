"""The timeline: a task's runs, or every run the user may see, as bars over a time range, to see
overlaps and gaps. Server-rendered SVG, nothing fetched from elsewhere.

`GET timeline/?task=<id>&since=<time>&until=<time>` (times as the run list's date range takes
them; the range defaults to the last 24 hours, `hours=1|24|168` picks a preset ending now);
`key=<id>` or `rate_key=<id>` instead of `task` draws the runs of one concurrency or rate key
(a key the user may see: theirs, their teams' or a global one), across its tasks. Runs come
through the run admin's scoped queryset (tasks/admin/scope.py). Each task gets a band of
lanes; a run that overlaps an earlier run of the same task goes to the next lane of the band, so
two overlapping runs show as two bars whose spans overlap. At most MAX_BARS runs, the earliest
started, and the page says when there were more.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

import tasks.admin.display as display
from accounts import access
from tasks.admin.lists import parse_instant, parse_uuid
from tasks.admin.scope import is_operator
from tasks.models import Run
from tasks.transitions import limits

MAX_BARS = 500
PRESETS = (1, 24, 168)  # hours: the last hour, day, week
# A run is found by its start (run_started_at_idx) no earlier than this before the range: one
# that started longer ago than this and still ran in the range is not drawn.
LOOKBACK = timedelta(days=7)
WIDTH = 1200  # the drawing's own units; it scales to the page's width
LABELS = 220  # the task names' column
LANE = 16  # one lane's height
BAR = 12
TICKS = 6
# What a bar shows: the run's times and status, its task's name (not the task's JSON fields).
SHOWN_FIELDS = (
    "id",
    "task_id",
    "status",
    "scheduled_at",
    "started_at",
    "finished_at",
    "task__name",
)
KEY_KINDS = {"key": limits.CONCURRENCY, "rate_key": limits.RATE}  # ?key= / ?rate_key=


@dataclass(frozen=True)
class Bar:
    run_id: Any
    url: str
    x: float
    y: int
    width: float
    tone: str
    title: str


@dataclass(frozen=True)
class Band:
    label: str
    url: str
    y: int
    height: int


class RunTimeline(admin.ModelAdmin):
    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.timeline_view)
        return [path("timeline/", view, name="tasks_run_timeline"), *super().get_urls()]

    def timeline_view(self, request: HttpRequest) -> HttpResponse:
        now = timezone.now()
        errors: list[str] = []
        since, until = _range(request, now, errors)
        task_id = None
        if request.GET.get("task"):
            task_id = parse_uuid(request.GET["task"])
            if task_id is None:
                errors.append(f"task: not a task id: {request.GET['task']!r}")
        key_param, key = _key(request, errors)
        kept = [("task", str(task_id))] if task_id else []
        if key is not None:
            kept.append((key_param, str(key.pk)))
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": "Timeline",
            "opts": self.model._meta,
            "since": timezone.localtime(since).strftime("%Y-%m-%d %H:%M"),
            "until": timezone.localtime(until).strftime("%Y-%m-%d %H:%M"),
            "task_id": task_id or "",
            "key": key,
            "key_noun": KEY_KINDS[key_param].noun if key is not None else "",
            "key_url": _key_url(key_param, key) if is_operator(request.user) else "",
            "kept": kept,
            "kept_query": f"{urlencode(kept)}&" if kept else "",
            "presets": PRESETS,
            "zone": timezone.get_current_timezone_name(),
            "errors": errors,
        }
        if errors:
            return TemplateResponse(request, "admin/tasks/run/timeline.html", context, status=400)
        runs = self.get_queryset(request)  # scoped: only runs the user may see
        if task_id is not None:
            runs = runs.filter(task_id=task_id)
        if key is not None:
            runs = runs.filter(**{KEY_KINDS[key_param].run_column: key.pk})
        found = _in_range(runs, since, until)
        context.update(draw(found[:MAX_BARS], since=since, until=until, now=now))
        context["cut"] = len(found) > MAX_BARS
        context["max_bars"] = MAX_BARS
        if task_id is not None:
            context["task_name"] = next((r.task.name or str(r.task_id) for r in found), "")
        return TemplateResponse(request, "admin/tasks/run/timeline.html", context)


def _key(request: HttpRequest, errors: list[str]) -> tuple[str, Any]:
    """The concurrency or rate key the timeline is of (`key` or `rate_key`), if one is asked
    for; a key the user may not see is a 404, as another's object is everywhere in the admin."""
    for param, kind in KEY_KINDS.items():
        text = request.GET.get(param, "")
        if not text:
            continue
        if not text.isdigit():
            errors.append(f"{param}: not a key id: {text!r}")
            return param, None
        keys = kind.model.objects.all()
        if not is_operator(request.user):
            keys = keys.filter(access.visible_q(request.user) | Q(owner__isnull=True))
        key = keys.filter(pk=int(text)).first()
        if key is None:
            raise Http404(f"No such {kind.noun}.")
        return param, key
    return "key", None


def _key_url(param: str, key: Any) -> str:
    if key is None:
        return ""
    return reverse(f"admin:tasks_{KEY_KINDS[param].model._meta.model_name}_change", args=[key.pk])


def timeline_url(param: str, key_id: int) -> str:
    """The timeline of one key's runs (`param`: "key" or "rate_key"), for the key's pages."""
    return f"{reverse('admin:tasks_run_timeline')}?{param}={key_id}"


def _range(request: HttpRequest, now: datetime, errors: list[str]) -> tuple[datetime, datetime]:
    hours = request.GET.get("hours", "")
    if hours:
        if not hours.isdigit() or int(hours) not in PRESETS:
            errors.append(f"hours: one of {', '.join(map(str, PRESETS))}, not {hours!r}")
            return now - timedelta(hours=24), now
        return now - timedelta(hours=int(hours)), now
    bounds = {"since": now - timedelta(hours=24), "until": now}
    for name in bounds:
        text = request.GET.get(name, "")
        if text.strip():
            at = parse_instant(text)
            if at is None:
                errors.append(f"{name}: not a date or time: {text!r}")
            else:
                bounds[name] = at
    if bounds["until"] <= bounds["since"]:
        errors.append("until: must be after since")
    return bounds["since"], bounds["until"]


def _in_range(runs: QuerySet[Run], since: datetime, until: datetime) -> list[Run]:
    """Runs that were running at some moment of [since, until), earliest started first, at most
    MAX_BARS + 1, in two reads of run_started_at_idx: the runs that started before the range
    (no earlier than LOOKBACK before it) and ended in it or later, or still run; then the runs
    that started in it, as many as are still wanted."""
    shown = runs.select_related("task").only(*SHOWN_FIELDS).order_by("started_at", "id")
    ended_after = Q(finished_at__gt=since) | Q(finished_at__isnull=True, status="running")
    before = list(
        shown.filter(ended_after, started_at__gte=since - LOOKBACK, started_at__lt=since)[
            : MAX_BARS + 1
        ]
    )
    inside = shown.filter(started_at__gte=since, started_at__lt=until)
    return before + list(inside[: MAX_BARS + 1 - len(before)])


def _bars_svg(bars: list[Bar]) -> SafeString:
    """The bars as SVG, written in one pass (through the template, 500 bars took most of the
    page's time). Only the title is text from outside (a task's name); the rest are numbers,
    tones and ids."""
    # Every part below is a number, a tone, an id or escaped.
    return mark_safe(
        "\n".join(
            f'<a href="{escape(b.url)}"><rect class="bar tone-{b.tone}" data-run="{b.run_id}" '
            f'x="{b.x}" y="{b.y}" width="{b.width}" height="{BAR}" rx="2">'
            f"<title>{escape(b.title)}</title></rect></a>"
            for b in bars
        )
    )


def _bands_svg(bands: list[Band], width: int) -> SafeString:
    """Each task's band: its name (a link to the task) and the line under it."""
    # The name is escaped; the rest are numbers and ids.
    return mark_safe(
        "\n".join(
            f'<a href="{escape(band.url)}"><text class="band-label" x="4" y="{band.y + 12}">'
            f"{escape(Truncator(band.label).chars(30))}</text></a>\n"
            f'<line class="band-line" x1="0" y1="{band.y + band.height}" x2="{width}" '
            f'y2="{band.y + band.height}"></line>'
            for band in bands
        )
    )


def draw(runs: list[Run], *, since: datetime, until: datetime, now: datetime) -> dict[str, Any]:
    """The bars, the tasks' bands and the time axis, in the drawing's units."""
    span = (until - since).total_seconds()
    scale = (WIDTH - LABELS) / span

    def x_of(at: datetime) -> float:
        return LABELS + (min(max(at, since), until) - since).total_seconds() * scale

    lanes_of: dict[Any, list[datetime]] = {}  # per task: when each of its lanes is free again
    placed: list[tuple[Run, int, datetime]] = []
    for run in runs:
        assert run.started_at is not None
        end = run.finished_at or now
        lanes = lanes_of.setdefault(run.task_id, [])
        lane = next((i for i, free in enumerate(lanes) if free <= run.started_at), len(lanes))
        if lane == len(lanes):
            lanes.append(end)
        else:
            lanes[lane] = end
        placed.append((run, lane, end))
    bands, top = [], 24
    task_list = reverse("admin:tasks_task_changelist")  # once: a band per task
    band_top: dict[Any, int] = {}
    for run in runs:
        if run.task_id in band_top:
            continue
        band_top[run.task_id] = top
        height = len(lanes_of[run.task_id]) * LANE
        bands.append(
            Band(
                run.task.name or str(run.task_id),
                f"{task_list}{quote(str(run.task_id))}/change/",
                top,
                height,
            )
        )
        top += height + 4
    bars = []
    for run, lane, end in placed:
        x = x_of(run.started_at)  # type: ignore[arg-type]
        width = max(x_of(end) - x, 2.0)  # a run of a second stays visible
        title = (
            f"{run.task.name or run.task_id}: {run.status}, "
            f"{display.local(run.started_at)}, {display.duration(run, now)}"
        )
        tone = display.TONES.get(run.status, "idle")
        url = display.run_url(run.pk)
        y = band_top[run.task_id] + lane * LANE + (LANE - BAR) // 2
        bars.append(Bar(run.pk, url, round(x, 2), y, round(width, 2), tone, title))
    ticks = [
        (
            round(LABELS + i * (WIDTH - LABELS) / TICKS, 2),
            timezone.localtime(since + (until - since) * i / TICKS).strftime("%m-%d %H:%M"),
        )
        for i in range(TICKS + 1)
    ]
    return {
        "bars": bars,
        "bars_svg": _bars_svg(bars),
        "bands_svg": _bands_svg(bands, WIDTH),
        "bands": bands,
        "ticks": ticks,
        "width": WIDTH,
        "labels": LABELS,
        "height": top + 8,
        "bar_height": BAR,
    }
