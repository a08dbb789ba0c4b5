"""Applying a task set: create what is new, update what changed, cancel what is gone, in one
transaction, through the same transitions a single task's create, update and delete use.

Applies of one set serialise on the set's row (SELECT ... FOR UPDATE, taken before the set's
tasks are read): a second apply waits for the first to commit, then plans against its result,
so the set ends as exactly one of the files, never a mix.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F

from tasks import audit, task_fields
from tasks.models import Task, TaskSet
from tasks.transitions import creation, lifecycle, taskset_workflows
from tasks.transitions.taskset_plan import Declared, Plan, as_json, compared_fields, plan
from tasks.transitions.taskset_workflows import DeclaredWorkflow


def _named(owner: Any, name: str, team: Any) -> Any:
    """The query of the set `name`: the team's (any member applies it), or the owner's own."""
    if team is not None:
        return TaskSet.objects.filter(team=team, name=name)
    return TaskSet.objects.filter(owner=owner, team__isnull=True, name=name)


def find_taskset(*, owner: Any, name: str, team: Any = None) -> TaskSet | None:
    return _named(owner, name, team).first()


def _lock_taskset(owner: Any, name: str, team: Any) -> TaskSet:
    locked = _named(owner, name, team).select_for_update()
    found = locked.first()
    if found is not None:
        return found
    # Two first applies of a new set race on the unique key: the loser's insert waits for the
    # winner's commit and then does nothing, and its lock then waits for the winner too.
    TaskSet.objects.bulk_create([TaskSet(owner=owner, name=name, team=team)], ignore_conflicts=True)
    return locked.get()


def _update_data(changes: dict[str, dict[str, Any]], declared: Declared) -> dict[str, Any]:
    """The changed fields as update_task takes them (validated data, retry policy split)."""
    data: dict[str, Any] = {}
    for name, change in changes.items():
        if name == "status":
            continue
        if name in declared.data and as_json(declared.data[name]) == change["to"]:
            data[name] = declared.data[name]  # the validated value
        else:
            data |= task_fields.stored(name, change["to"])
    if "kind" in data:  # the payload was validated for the declared kind
        data["payload"] = declared.data["payload"]
    return data


def _entry(declared: Declared, applied: dict[str, Any]) -> dict[str, Any]:
    return {"entry": declared.entry, "applied": applied, "ignore_changes": declared.ignore_changes}


def _remember(tasks: list[tuple[Task, Declared]]) -> None:
    """Record on each task what this apply declared and what it left."""
    # Tasks of the set under their keys already: the entry is what changes.
    fresh = Task.objects.in_bulk([task.pk for task, _ in tasks])
    remembered = []
    for task, declared in tasks:
        row = fresh[task.pk]
        row.taskset_entry = _entry(declared, compared_fields(row))
        remembered.append(row)
    Task.objects.bulk_update(remembered, ["taskset_entry"], batch_size=500)


def _remove(tasks: list[Task], *, force: bool, now: datetime) -> None:
    """Cancel the tasks the set no longer declares; they leave the set (so they are no drift)."""
    lifecycle.cancel_tasks(tasks=tasks, force=force, now=now)
    Task.objects.filter(pk__in=[task.pk for task in tasks]).update(taskset=None)


def apply_taskset(
    *,
    owner: Any,
    name: str,
    declared: list[Declared],
    force: bool,
    now: datetime,
    team: Any = None,
    workflows: list[DeclaredWorkflow] | None = None,
) -> tuple[TaskSet, dict[str, Any]]:
    """Make the owner's set `name` exactly `declared` (its tasks) and `workflows`; returns the
    set and the plan carried out (with the ids of the tasks and workflows created).

    All or nothing: a Conflict from any task (a one-time task's run in flight, a run running
    where a removal needs `force`) or workflow (a removed one's running workflow run, without
    `force`) rolls the whole apply back.
    """
    with transaction.atomic():
        taskset = _lock_taskset(owner, name, team)
        carried_out = plan(taskset, declared)
        workflow_plan = taskset_workflows.plan(taskset, workflows or [])
        # The batch create: a few statements for all new tasks and their due runs.
        new = creation.create_tasks(
            owner=owner, items=[item.data for item in carried_out.create], now=now
        )
        created: dict[str, str] = {}
        for task, item in zip(new, carried_out.create, strict=True):
            task.taskset, task.taskset_key = taskset, item.key
            task.taskset_entry = _entry(item, compared_fields(task))
            created[item.key] = str(task.pk)
        Task.objects.bulk_update(new, ["taskset", "taskset_key", "taskset_entry"])
        # Every changed task in one batch update, then the resumes the file asks for.
        updates = [
            (task, _update_data(changes, item)) for item, task, changes in carried_out.update
        ]
        lifecycle.update_tasks(changes=[(task, data) for task, data in updates if data], now=now)
        for _, task, changes in carried_out.update:
            if "status" in changes:
                lifecycle.resume_task(task=task, now=now)
        _remember([(task, item) for item, task, _ in carried_out.update])
        for item, task in carried_out.unchanged:  # the entry as now written, same values
            applied = (task.taskset_entry or {}).get("applied") or compared_fields(task)
            task.taskset_entry = _entry(item, applied)
        unchanged = [task for _, task in carried_out.unchanged]
        Task.objects.bulk_update(unchanged, ["taskset_entry"], batch_size=500)
        _remove(carried_out.delete, force=force, now=now)
        created_workflows = taskset_workflows.apply(
            taskset=taskset, owner=owner, planned=workflow_plan, force=force, now=now
        )
        TaskSet.objects.filter(pk=taskset.pk).update(version=F("version") + 1, updated_at=now)
        taskset.refresh_from_db()
        counts: dict[str, Any] = {
            "version": taskset.version,
            "created": len(carried_out.create),
            "updated": len(carried_out.update),
            "cancelled": len(carried_out.delete),
        }
        if workflow_plan.changes():
            counts["workflows"] = {
                "created": len(workflow_plan.create),
                "updated": len(workflow_plan.update),
                "deleted": len(workflow_plan.delete),
            }
        audit.record(audit.entry("taskset_apply", "taskset", taskset, counts))
    return taskset, {
        "name": name,
        "version": taskset.version,
        **carried_out.as_json(created),
        "workflows": workflow_plan.as_json(created_workflows),
    }


def delete_taskset(
    *, owner: Any, name: str, force: bool, dry_run: bool, now: datetime, team: Any = None
) -> dict[str, Any] | None:
    """Cancel every task of the set, delete its workflows and remove the set; None when it does
    not exist. With `dry_run`, the plan alone. Serialised with applies on the set's row."""
    with transaction.atomic():
        query = _named(owner, name, team)
        taskset = query.first() if dry_run else query.select_for_update().first()
        if taskset is None:
            return None
        removal = plan(taskset, [])
        workflow_removal = taskset_workflows.plan(taskset, [])
        if not dry_run:
            _remove(removal.delete, force=force, now=now)
            taskset_workflows.apply(
                taskset=taskset, owner=owner, planned=workflow_removal, force=force, now=now
            )
            Task.objects.filter(taskset=taskset).update(taskset=None)
            counts = {"cancelled": len(removal.delete)}
            audit.record(audit.entry("delete", "taskset", taskset, counts))
            taskset.delete()
    return {
        "name": name,
        "version": taskset.version,
        **removal.as_json(),
        "workflows": workflow_removal.as_json(),
    }


def dry_run_taskset(
    *,
    owner: Any,
    name: str,
    declared: list[Declared],
    team: Any = None,
    workflows: list[DeclaredWorkflow] | None = None,
) -> dict[str, Any]:
    """The plan an apply would carry out now, changing nothing."""
    taskset = find_taskset(owner=owner, name=name, team=team)
    planned: Plan = plan(taskset, declared)
    workflow_plan = taskset_workflows.plan(taskset, workflows or [])
    version = taskset.version if taskset else 0
    return {
        "name": name,
        "version": version,
        **planned.as_json(),
        "workflows": workflow_plan.as_json(),
    }
