"""Changes to an existing task: update, pause, resume, cancel, run now, skip next.

Each locks the task's row first (FOR UPDATE): two changes of one task run one after the other,
and the scheduler, which locks due tasks with SKIP LOCKED, plans it before or after, never
during. Runs withdrawn or skipped are locked too; workers claim with SKIP LOCKED.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import date, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Q, Value
from django.db.models.functions import Least
from django.utils import timezone

from tasks import audit, counters, events, expectations, outbox, schedules, task_fields
from tasks import occurrences as planning
from tasks.db import RUN_DUE_CHANNEL, TASK_CHANGED_CHANNEL, notify
from tasks.exceptions import Conflict
from tasks.models import CLAIMABLE_STATUSES, ENDED, Run, Task
from tasks.transitions import limits
from tasks.transitions.completion import complete_finished_tasks
from tasks.transitions.creation import TASK_FIELDS, apply_fields, first_fire_at, plan_now
from tasks.transitions.run_actions import cancel_running

SKIPPED_ON_REQUEST = "skipped on request"


def _lock(task: Task) -> Task:
    return Task.objects.select_for_update().get(pk=task.pk)


def _lock_all(tasks: list[Task]) -> list[Task]:
    """The tasks' rows locked (FOR UPDATE, in id order so two batches cannot deadlock), fresh,
    in the order given."""
    ids = [task.pk for task in tasks]
    locked = {t.pk: t for t in Task.objects.select_for_update().filter(pk__in=ids).order_by("pk")}
    missing = [pk for pk in ids if pk not in locked]
    if missing:
        raise Task.DoesNotExist(f"no task {missing[0]}")
    return [locked[pk] for pk in ids]


def _unstarted_runs(task: Task):
    # Never-attempted runs only: a pending retry keeps its place and its attempt history.
    return Run.objects.filter(task=task, status__in=CLAIMABLE_STATUSES, attempt=0)


def _unplan(task: Task, *, excluded_from: datetime | None = None) -> None:
    """Withdraw occurrences planned but not started, so they can be planned again later; with
    `excluded_from`, also the ones recorded skipped by an exclusion from then on (a calendar
    changed: they may run now, or be excluded for another reason)."""
    _unplan_all([task], excluded_from=excluded_from)


def _unplan_all(tasks: list[Task], *, excluded_from: datetime | None = None) -> None:
    """_unplan for each of the tasks, with one read and one delete of their runs.

    An extra run-now run is withdrawn too, but it is no occurrence of the schedule: it never
    counted against runs_planned (max_runs) and must not become next_unplanned_at.
    """
    if not tasks:
        return
    runs = Run.objects.filter(task__in=tasks, status__in=CLAIMABLE_STATUSES, attempt=0)
    if excluded_from is not None:
        runs = Run.objects.filter(
            Q(pk__in=runs.values("pk"))
            | Q(
                task__in=tasks,
                status=Run.Status.SKIPPED,
                skip_kind="exclusion",
                scheduled_at__gte=excluded_from,
            )
        )
    # Locked first (workers claim with SKIP LOCKED), so what is counted is what is deleted.
    withdrawn = list(
        runs.select_for_update()
        .order_by("pk")
        .values_list("pk", "task_id", "scheduled_at", "backfill")
    )
    if not withdrawn:
        return
    Run.objects.filter(pk__in=[pk for pk, _, _, _ in withdrawn]).delete()
    by_task: dict = {}
    for _, task_id, at, backfilled in withdrawn:
        # A backfilled run is withdrawn too (a pause stops it), but it is no planned occurrence:
        # it never counted against runs_planned and lies before the planner's cursor.
        if not backfilled:
            by_task.setdefault(task_id, []).append(at)
    withdrawing = [task for task in tasks if task.pk in by_task]
    calendars = planning.load_calendars([task.schedule for task in withdrawing])
    for task in withdrawing:
        off = planning.days_off(planning.exclusions_of(task.schedule, calendars))
        occurrences = [at for at in by_task[task.pk] if _is_occurrence(task.schedule, at, off)]
        task.runs_planned = max(0, task.runs_planned - len(occurrences))
        earliest = min(occurrences, default=None)
        if earliest is not None and (
            task.next_unplanned_at is None or earliest < task.next_unplanned_at
        ):
            task.next_unplanned_at = earliest


def _days_off(task: Task) -> Callable[[date], bool] | None:
    """The holidays of the task's calendars, which its business days skip (no query without)."""
    calendars = planning.load_calendars([task.schedule])
    return planning.days_off(planning.exclusions_of(task.schedule, calendars))


def _is_occurrence(schedule: dict, at: datetime, off: Callable[[date], bool] | None) -> bool:
    following = schedules.fire_times(schedule, after=at - timedelta(microseconds=1), days_off=off)
    return next(iter(following), None) == at


def _written_fields(datas: list[dict]) -> list[str]:
    """The columns an update of these data can change: what apply_fields sets from them and,
    for a new schedule, the planning state. Writing only these equals saving the whole row,
    as no other writer can change the locked rows meanwhile; each column is a CASE over the
    batch, so writing all of them was most of a large batch's time."""
    given = {name for data in datas for name in data}
    fields = [name for name in TASK_FIELDS if name in given]
    if any(data.get("executable") is not None for data in datas):
        fields.append("executable")
    if "concurrency" in given:
        fields += ["concurrency", "concurrency_key"]
    if "rate_limit" in given:
        fields += ["rate_limit", "rate_key"]
    if "resources" in given:
        fields += ["cpu_millis", "memory_bytes"]
    if "schedule" in given:
        fields += ["schedule", "schedule_type", "next_unplanned_at", "runs_planned", "status"]
    return [*fields, "updated_at"]


def update_task(*, task: Task, data: dict, now: datetime) -> Task:
    """Apply a change to every run not yet started, atomically.

    Raises Conflict when a one-time task's run is in flight: the change would alter it.
    """
    return update_tasks(changes=[(task, data)], now=now)[0]


def update_tasks(*, changes: list[tuple[Task, dict]], now: datetime) -> list[Task]:
    """update_task for many tasks at once (each with its own data), in one transaction and a
    fixed handful of statements however many tasks: the rows locked together, their unstarted
    runs withdrawn together, the tasks written and replanned in one pass. All or nothing: a
    Conflict of any task changes none."""
    if not changes:
        return []
    with transaction.atomic():
        tasks = _lock_all([task for task, _ in changes])
        datas = [data for _, data in changes]
        ids = [task.pk for task in tasks]
        running = set(
            Run.objects.filter(task_id__in=ids, status=Run.Status.RUNNING).values_list(
                "task_id", flat=True
            )
        )
        for task in tasks:
            if task.pk in running and task.schedule_type == "once":
                raise Conflict("the task's run is running; wait for it or cancel it first")
            if task.status == Task.Status.CANCELLED:
                raise Conflict("the task is cancelled")
        # What leaves a task as it is is no change: a task read and PUT back writes nothing.
        locked = tasks
        changing = [
            (task, task_fields.changed(task, data))
            for task, data in zip(locked, datas, strict=True)
        ]
        tasks = [task for task, data in changing if data]
        datas = [data for _, data in changing if data]
        keys_known: dict = {}  # limit keys resolved, per owner
        before = [_audited(task) for task in tasks]
        for task, data in zip(tasks, datas, strict=True):
            limits.keys_follow_a_move(task, data)
            apply_fields(task, data)
            limits.resolve_task_keys(task, data, keys_known.setdefault(task.owner_id, {}))
        rescheduled = [(t, d) for t, d in zip(tasks, datas, strict=True) if "schedule" in d]
        _unplan_all([task for task, _ in rescheduled])
        calendars = planning.load_calendars([data["schedule"] for _, data in rescheduled])
        for task, data in rescheduled:
            task.schedule = data["schedule"]
            task.schedule_type = task.schedule["type"]
            task.next_unplanned_at = first_fire_at(task.schedule, now=now, calendars=calendars)
            if task.status in ENDED:
                task.status = Task.Status.ACTIVE
        written = timezone.now()
        for task in tasks:
            task.updated_at = written
        Task.objects.bulk_update(tasks, _written_fields(datas), batch_size=500)
        audit.record_all(
            audit.entry("update", "task", task, audit.diff(was, _audited(task, data)))
            for task, data, was in zip(tasks, datas, before, strict=True)
        )
        expectations.sync([t for t, d in zip(tasks, datas, strict=True) if "expect" in d], now=now)
        _update_runs(tasks, lambda t: {"priority": t.priority, "max_attempts": t.max_attempts})
        requested = [t for t, d in zip(tasks, datas, strict=True) if _requests_changed(d)]
        _update_runs(requested, lambda t: t.requests, claimable=True)
        # Planned one by one as a single update plans (a few cheap statements each; the
        # withdrawal and the writes above were the cost).
        for task in tasks:
            if task.status == Task.Status.ACTIVE:
                plan_now(task, now=now)
    return locked


def _audited(task: Task, data: dict | None = None) -> dict:
    """What the audit log compares of a task: its body as stored, and the executable's name as
    uploaded (a new upload is a change even under the same name: its bytes are not compared)."""
    upload = (data or {}).get("executable")
    name = task.executable_name if upload is None else f"{getattr(upload, 'name', '')} (uploaded)"
    return {**task_fields.body_of(task, shown=False), "executable": name}


def _requests_changed(data: dict) -> bool:
    return "resources" in data or "concurrency" in data or "rate_limit" in data


def _update_runs(tasks: list[Task], values, *, claimable: bool = False) -> None:
    """Write `values(task)` on each task's runs not yet started (every unclaimed run, retries
    too, when `claimable`): one UPDATE per distinct value, few in a batch."""
    groups: dict[tuple, list] = {}
    for task in tasks:
        groups.setdefault(tuple(sorted(values(task).items())), []).append(task.pk)
    for value, ids in groups.items():
        if not claimable:
            runs = Run.objects.filter(task_id__in=ids, status__in=CLAIMABLE_STATUSES, attempt=0)
            fields = dict(value)
            if "priority" in fields:
                # A backfill may run below its task (the priority it was given), never above.
                capped = Least("priority", Value(fields["priority"]))
                runs.filter(backfill=True).update(**{**fields, "priority": capped})
                runs = runs.filter(backfill=False)
            runs.update(**fields)
            continue
        runs = Run.objects.filter(task_id__in=ids, status__in=CLAIMABLE_STATUSES)
        runs.update(**dict(value))
        # A reason about the old requests no longer holds; workers and the reviewer say
        # again within a second whether the new ones wait.
        runs.exclude(wait_kind="").update(status=Run.Status.SCHEDULED, wait_kind="", wait_reason="")


def replan_exclusions(*, task: Task, now: datetime) -> None:
    """Plan again what has not started of a task whose calendars changed: unstarted runs and
    future excluded ones are withdrawn and planned anew under the calendars as they are now.
    Call inside the calendar change's transaction, with the task locked."""
    _unplan(task, excluded_from=now)
    task.save(update_fields=["next_unplanned_at", "runs_planned", "updated_at"])
    if task.status == Task.Status.ACTIVE:
        plan_now(task, now=now)


def pause_task(*, task: Task, now: datetime) -> Task:
    """Stop new occurrences; planned ones not yet started are withdrawn (resume replans them)."""
    with transaction.atomic():
        task = _lock(task)
        if task.status != Task.Status.ACTIVE:
            return task
        _unplan(task)
        task.status = Task.Status.PAUSED
        task.paused_at = now
        fields = ["status", "next_unplanned_at", "runs_planned", "paused_at", "updated_at"]
        task.save(update_fields=fields)
        audit.record(audit.entry("pause", "task", task))
    return task


def resume_task(*, task: Task, now: datetime) -> Task:
    """Continue from now. A recurring task's occurrences whose time fell inside the pause are
    recorded `skipped` (reason `paused: ...`); those due before it follow the misfire policy."""
    with transaction.atomic():
        task = _lock(task)
        if task.status != Task.Status.PAUSED:
            return task
        task.status = Task.Status.ACTIVE
        task.resumed_at = now
        task.save(update_fields=["status", "resumed_at", "updated_at"])
        plan_now(task, now=now)
        audit.record(audit.entry("resume", "task", task))
        # Paused with nothing left to plan (its last run was in flight): nothing will finish
        # after this to complete the task, so it is completed here when nothing is unfinished.
        _complete_if_done(task)
        task.refresh_from_db(fields=["status"])
    return task


def cancel_task(*, task: Task, force: bool, now: datetime) -> Task:
    """No further runs. Raises Conflict while a run is running, unless `force` cancels it too."""
    return cancel_tasks(tasks=[task], force=force, now=now)[0]


def cancel_tasks(*, tasks: list[Task], force: bool, now: datetime) -> list[Task]:
    """cancel_task for many tasks at once, in one transaction and a few statements; a Conflict
    (a run running, without `force`) cancels none."""
    if not tasks:
        return []
    with transaction.atomic():
        locked = _lock_all(tasks)
        ids = [task.pk for task in locked]
        running = list(
            Run.objects.filter(task_id__in=ids, status=Run.Status.RUNNING).order_by("pk")
        )
        if running and not force:
            raise Conflict("a run of this task is running; pass ?force=true to cancel it too")
        Run.objects.filter(task_id__in=ids, status__in=CLAIMABLE_STATUSES).update(
            status=Run.Status.CANCELLED, finished_at=now, error="task cancelled"
        )
        for run in running:
            cancel_running(run=run, now=now, reason="task cancelled")
        written = timezone.now()
        Task.objects.filter(pk__in=ids).update(
            status=Task.Status.CANCELLED, next_unplanned_at=None, updated_at=written
        )
        for task in locked:
            task.status, task.next_unplanned_at, task.updated_at = (
                Task.Status.CANCELLED,
                None,
                written,
            )
        audit.record_all(
            audit.entry("cancel", "task", task, {"force": force} if running else None)
            for task in locked
        )
    return locked


def run_now(*, task: Task, now: datetime) -> Run:
    """One extra run now; the cadence (next_unplanned_at, max_runs count) is unchanged."""
    with transaction.atomic():
        task = _lock(task)
        if task.status == Task.Status.CANCELLED:
            raise Conflict("the task is cancelled")
        run = Run.objects.create(
            task=task,
            owner_id=task.owner_id,
            scheduled_at=now,
            execute_at=now,
            priority=task.priority,
            max_attempts=task.max_attempts,
            **task.requests,
        )
        audit.record(audit.entry("run_now", "task", task, {"run": str(run.pk)}))
        notify(RUN_DUE_CHANNEL)
    return run


def skip_next(*, task: Task, now: datetime) -> Run:
    """Record the next occurrence as `skipped`: a planned one, or the next one to plan.

    A planned run is skipped by compare-and-swap: one a worker claims meanwhile is left to run
    and the occurrence after it is skipped instead. An extra run-now run is no occurrence and
    is never the one skipped.
    """
    with transaction.atomic():
        task = _lock(task)
        # A backfilled run is history replayed, not the next occurrence.
        for run in _unstarted_runs(task).filter(backfill=False).order_by("scheduled_at"):
            if not _is_occurrence(task.schedule, run.scheduled_at, _days_off(task)):
                continue
            skipped = _unstarted_runs(task).filter(pk=run.pk)
            if skipped.update(
                status=Run.Status.SKIPPED,
                finished_at=now,
                skip_kind="request",
                error=SKIPPED_ON_REQUEST,
            ):
                _skipped(task, run)
                _complete_if_done(task)
                run.refresh_from_db()
                return run
        if task.status != Task.Status.ACTIVE or task.next_unplanned_at is None:
            raise Conflict("the task has no next occurrence to skip")
        run = Run.objects.create(
            task=task,
            owner_id=task.owner_id,
            scheduled_at=task.next_unplanned_at,
            execute_at=task.next_unplanned_at,
            priority=task.priority,
            max_attempts=task.max_attempts,
            **task.requests,
            status=Run.Status.SKIPPED,
            finished_at=now,
            skip_kind="request",
            error=SKIPPED_ON_REQUEST,
        )
        _skipped(task, run)
        task.runs_planned += 1
        following = schedules.fire_times(
            task.schedule, after=task.next_unplanned_at, days_off=_days_off(task)
        )
        task.next_unplanned_at = next(iter(following), None)
        max_runs = task.schedule.get("max_runs")
        if max_runs is not None and task.runs_planned >= max_runs:
            task.next_unplanned_at = None
        task.save(update_fields=["next_unplanned_at", "runs_planned", "updated_at"])
        _complete_if_done(task)
        notify(TASK_CHANGED_CHANNEL)
    return run


def _skipped(task: Task, run: Run) -> None:
    # The outbox's `skipped`, the count of skips by reason and the audit entry, in the skipping
    # transaction.
    audit.record(
        audit.entry(
            "skip_next", "task", task, {"run": str(run.pk), "scheduled_at": run.scheduled_at}
        )
    )
    outbox.enqueue(None, events=events.skip_events([(run.id, run.task_id, 0)]))
    with connection.cursor() as cursor:
        counters.count_skipped(
            cursor, process=f"api:{os.getpid()}", runs=[(run.task_id, "request")]
        )


def _complete_if_done(task: Task) -> None:
    # Skipping the last occurrence leaves nothing to run: the task is complete, as when a
    # worker finishes its last run.
    complete_finished_tasks(task_ids=[task.pk])
