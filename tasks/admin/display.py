"""How the console shows a status, a health, a duration, a time and a strip of runs: one home
for the colours and formats of every admin page (static/tasks/admin_console.css draws them).

A colour is a tone, not a status: `ok` green, `bad` red, `busy` blue, `wait` amber, `idle` grey,
`off` light grey; every badge and square also carries its word (title or text), never colour
alone.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import datetime, timedelta
from uuid import UUID

from django.contrib.admin.utils import quote
from django.urls import get_script_prefix, reverse
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from tasks.models import Attempt, Run

TONES = {
    # Run.Status
    "succeeded": "ok",
    "failed": "bad",
    "running": "busy",
    "scheduled": "idle",
    "waiting_for_resource": "wait",
    "cancelled": "off",
    "skipped": "off",
    # Attempt.Outcome (the others as above)
    "timed_out": "bad",
    "rescued": "wait",
    "released": "idle",
    # Task.Status (failed and cancelled as above)
    "active": "ok",
    "paused": "wait",
    "completed": "idle",
    # TaskHealth.Health
    "up": "ok",
    "late": "wait",
    "failing": "bad",
    "overdue": "bad",
}


def badge(value: str) -> SafeString:
    """`value` as a coloured pill with its word in it."""
    return format_html(
        '<span class="badge tone-{}">{}</span>', TONES.get(value, "idle"), value.replace("_", " ")
    )


def local(at: datetime | None) -> str:
    """`at` in the viewer's zone (the one accounts.preferences activated), with the zone shown."""
    if at is None:
        return "-"
    return timezone.localtime(at).strftime("%Y-%m-%d %H:%M:%S %Z")


def span(seconds: float) -> str:
    """A length of time in words a person reads at a glance: 850 ms, 12.3 s, 4 m 05 s, 2 h 10 m."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} m {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} m"
    return f"{hours // 24} d {hours % 24} h"


def duration(run: Run | Attempt, now: datetime | None = None) -> str:
    """Started to finished; a running run's so far (with "so far"); "-" when it never started."""
    if run.started_at is None:
        return "-"
    if run.finished_at is not None:
        return span((run.finished_at - run.started_at) / timedelta(seconds=1))
    if isinstance(run, Run) and run.status == Run.Status.RUNNING:
        now = now or timezone.now()
        return span(max((now - run.started_at) / timedelta(seconds=1), 0)) + " so far"
    return "-"


def run_url(run_id: object) -> str:
    """The run's admin page: the run list's URL and the id, as the admin's own URL pattern has
    it (strips and timelines link hundreds of runs a page; reversing each took a third of it)."""
    shown = str(run_id) if isinstance(run_id, UUID) else quote(str(run_id))  # a uuid needs none
    return f"{_run_list(get_script_prefix())}{shown}/change/"


@functools.cache
def _run_list(script_prefix: str) -> str:
    return reverse("admin:tasks_run_changelist")


def strip(runs: Iterable[Run]) -> SafeString:
    """The runs (newest first) as a row of coloured squares, oldest left as Airflow's grid reads,
    each a link to its run titled with its status and time. Written out in one pass (a task list
    page draws a thousand squares); a status is one of the Run.Status words, a time digits."""
    squares = "".join(
        f'<a class="sq tone-{TONES.get(run.status, "idle")}" href="{run_url(run.pk)}" '
        f'title="{escape(run.status)} {escape(local(run.scheduled_at))}"></a>'
        for run in reversed(list(runs))
    )
    if not squares:
        return SafeString("-")
    return mark_safe(f'<span class="run-strip">{squares}</span>')  # each part escaped or ours
