"""Task sets, the read side: a task's fields in the form a set compares, what a declared entry
wants of them, the plan of an apply and the drift of a set. Writes: tasksets.py beside it.

A task of a set remembers what the last apply declared (`entry`, as sent) and the fields it left
(`applied`). A field the file did not change since wants its applied value back, so a schedule's
`anchor` (the phase) and a `delay` (relative to the apply) are not redeclared on every plan; a
field the file changed wants the newly validated value. Either way the plan compares the wanted
value with the task's current one, so a change made outside the set (the API, the admin) shows
as an update back to the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Model

from tasks import task_fields
from tasks.models import Task, TaskSet

# The fields a set declares and compares, by their API names: every field of a task's body
# (task_fields.BODY_FIELDS, so a field added there is compared too) but `dedup_key` (a set names
# its tasks by `key`); `status` only as active/paused.
COMPARED = tuple(name for name in task_fields.BODY_FIELDS if name != "dedup_key")
IGNORABLE = (*COMPARED, "status")


@dataclass
class Declared:
    """One validated entry of a set: its key, the body as sent (without `key` and
    `ignore_changes`), the serializer's validated data and the fields drift may keep."""

    key: str
    entry: dict
    data: dict
    ignore_changes: list[str] = field(default_factory=list)


@dataclass
class Plan:
    create: list[Declared] = field(default_factory=list)
    # (declared, task, {field: {"from", "to"}})
    update: list[tuple[Declared, Task, dict]] = field(default_factory=list)
    delete: list[Task] = field(default_factory=list)
    unchanged: list[tuple[Declared, Task]] = field(default_factory=list)

    def as_json(self, created_ids: dict[str, str] | None = None) -> dict[str, Any]:
        ids = created_ids or {}
        return {
            "create": [
                {"key": d.key, "id": ids.get(d.key), "task": wanted(d, None)} for d in self.create
            ],
            "update": [
                {"key": d.key, "id": str(task.pk), "changes": changes}
                for d, task, changes in self.update
            ],
            "delete": [{"key": task.taskset_key, "id": str(task.pk)} for task in self.delete],
            "unchanged": len(self.unchanged),
        }


def compared_fields(task: Task) -> dict[str, Any]:
    """The task's declared fields as the API shows them, as JSON values (what `applied` stores
    and what is compared with it). The schedule as stored: the deployment's default misfire
    grace, which the API fills in, is no declared value."""
    shown = task_fields.body_of(task, shown=False)
    return as_json({name: shown[name] for name in COMPARED})


def as_json(value: Any) -> Any:
    """`value` as JSON gives it back (times as ISO text, ids as strings, a row as its key)."""
    if isinstance(value, Model):
        value = value.pk
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def wanted(declared: Declared, task: Task | None) -> dict[str, Any]:
    """What `declared` wants of the task's fields (of a new task when `task` is None)."""
    # No key row resolved: a plan (a dry run too) reads and writes nothing.
    result = compared_fields(task_fields.unsaved_task(declared.data))
    previous = task.taskset_entry if task is not None else None
    if previous:
        for name in COMPARED:
            if name in previous["applied"] and (
                previous["entry"].get(name) == declared.entry.get(name)
            ):
                result[name] = previous["applied"][name]
    return result


def changes_for(declared: Declared, task: Task) -> dict[str, dict[str, Any]]:
    """The fields an apply changes on `task`, each `{"from": now, "to": declared}`; the fields
    in `ignore_changes` are the task's to keep."""
    want = wanted(declared, task)
    have = compared_fields(task)
    changes = {
        name: {"from": have[name], "to": want[name]}
        for name in COMPARED
        if have[name] != want[name] and name not in declared.ignore_changes
    }
    if task.status == Task.Status.PAUSED and "status" not in declared.ignore_changes:
        changes["status"] = {"from": task.status, "to": Task.Status.ACTIVE}
    return changes


def members(taskset: TaskSet | None) -> dict[str, Task]:
    """The set's live tasks (cancelled ones no longer hold their keys) by key."""
    if taskset is None:
        return {}
    tasks = Task.objects.filter(taskset=taskset).exclude(status=Task.Status.CANCELLED)
    return {task.taskset_key or "": task for task in tasks.order_by("taskset_key")}


def plan(taskset: TaskSet | None, declared: list[Declared]) -> Plan:
    """What applying `declared` to the set does: creates in file order, updates, deletes by key."""
    current = members(taskset)
    result = Plan()
    for item in declared:
        task = current.pop(item.key, None)
        if task is None:
            result.create.append(item)
            continue
        changes = changes_for(item, task)
        if changes:
            result.update.append((item, task, changes))
        else:
            result.unchanged.append((item, task))
    result.delete = list(current.values())
    return result


def drift(taskset: TaskSet) -> list[dict[str, Any]]:
    """The set's tasks whose fields differ from what the last apply left, by key: each field
    `{"declared", "actual"}` (`ignored` when the entry's `ignore_changes` keeps it), and tasks
    deleted outside the set (`deleted: true`) whose key no live task holds: a task the set
    itself removes leaves it."""
    live = members(taskset)
    found: list[dict[str, Any]] = []
    for key, task in live.items():
        applied = (task.taskset_entry or {}).get("applied", {})
        ignored = (task.taskset_entry or {}).get("ignore_changes", [])
        have = compared_fields(task)
        fields: dict[str, dict[str, Any]] = {
            name: {"declared": applied[name], "actual": have[name], "ignored": name in ignored}
            for name in COMPARED
            if name in applied and applied[name] != have[name]
        }
        if task.status == Task.Status.PAUSED:
            fields["status"] = {
                "declared": Task.Status.ACTIVE,
                "actual": task.status,
                "ignored": "status" in ignored,
            }
        if fields:
            found.append({"key": key, "id": str(task.pk), "deleted": False, "fields": fields})
    gone = (
        Task.objects.filter(taskset=taskset, status=Task.Status.CANCELLED)
        .exclude(taskset_key__in=list(live))
        .order_by("taskset_key", "-updated_at")
        .distinct("taskset_key")
    )
    for task in gone:
        found.append({"key": task.taskset_key, "id": str(task.pk), "deleted": True, "fields": {}})
    found.sort(key=lambda item: item["key"])
    return found
