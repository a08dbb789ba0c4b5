"""What a task has done and will do next, as the ORM reads it: the admin, the list filters and
the list's ordering. The API's JSON reads the same definitions in SQL (tasks/api/json_sql.py).

A task's runs split in two at a time `now`. Its *next runs* are the occurrences planned but not
begun, due at `now` or later: claimable, never attempted. Every other run is in its *history*
(`runs`, newest occurrence first): those that have begun (started at least once, a pending
retry too, or ended without starting: skipped, cancelled) and those due but still waiting for a
worker. Its *last run* is its latest begun run, by `scheduled_at`, that happened: a skip of an
occurrence still ahead has not.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.db.models import Case, Exists, F, OuterRef, Q, QuerySet, Subquery, When
from django.db.models.functions import Least, Now

from tasks.models import CLAIMABLE_STATUSES, Run, Task

RECENT_RUNS = 20  # a task's `runs` in the API, and its runs on its admin page


def upcoming(now: datetime) -> Q:
    """Runs that are next runs at `now`: planned, not begun, not due yet."""
    return Q(status__in=CLAIMABLE_STATUSES, attempt=0, scheduled_at__gte=now)


def recent_runs(task_id: UUID, *, now: datetime, count: int = RECENT_RUNS) -> QuerySet[Run]:
    """The task's history at `now`, newest first, `count` of it: by the (task, scheduled_at)
    index read backwards, past only the few runs planned ahead."""
    history = Run.objects.filter(task_id=task_id).exclude(upcoming(now))
    return history.order_by("-scheduled_at")[:count]


# A run that happened: started, or ended without starting once its time came (a skip of an
# occurrence still ahead, skip-next's, has not happened yet).
HAPPENED = Q(attempt__gt=0) | Q(finished_at__isnull=False, scheduled_at__lte=Now())


def last_run(field: str) -> Subquery:
    """`field` of each task's (OuterRef "pk") latest run that happened, for annotate() or
    alias()."""
    latest = Run.objects.filter(HAPPENED, task_id=OuterRef("pk")).order_by("-scheduled_at")
    return Subquery(latest.values(field)[:1])


def last_run_failed() -> Case:
    """last_run("status") of each task (OuterRef "pk") that has a failed run, NULL for the
    others, for alias() and a filter on "failed": the same tasks as filtering last_run("status"),
    since a task whose last run failed has a failed run. Only a task with one (found by
    run_failed_task_idx, an index-only probe of a few pages) is looked up for its last run, not
    every task (the probe of the (task, scheduled_at) index that reads the run)."""
    failed = Run.objects.filter(task_id=OuterRef("pk"), status=Run.Status.FAILED)
    return Case(When(Exists(failed), then=last_run("status")), default=None)


def next_run_at(now: datetime) -> Case:
    """Each active task's next fire time, `next_runs[0]` as occurrences.next_runs computes it: its
    earliest occurrence planned but not begun (due at `now` or later), or else the planner's
    cursor, the first occurrence not planned yet. NULL for a task that is not active."""
    pending = Run.objects.filter(upcoming(now), task_id=OuterRef("pk")).order_by("scheduled_at")
    earliest = Subquery(pending.values("scheduled_at")[:1])
    return Case(
        When(status=Task.Status.ACTIVE, then=Least(earliest, F("next_unplanned_at"))),
        default=None,
    )
