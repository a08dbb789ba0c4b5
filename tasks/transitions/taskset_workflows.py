"""Task sets' workflows (a set file's `workflows:` entries): the plan, the apply and the drift of
the workflows a set declares, beside its tasks (tasksets.py, taskset_plan.py), in the apply's
transaction and under its lock on the set's row.

A workflow's declared fields are compared whole, as validated: `name`, `steps` (with `after` and
`on` filled in), `notify`, `priority`, `expect` and `schedule`. A workflow of a set remembers
what the last apply declared (`entry`) and left (`applied`); a field the file did not change
since wants its applied value back (so a schedule's anchor, filled in from the apply's moment, is
not redeclared on every plan), as a task's does (taskset_plan.py). Drift is its fields against
`applied`, and a key the last apply left (TaskSet.workflow_keys) with no workflow: deleted
outside the set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tasks.db import TASK_CHANGED_CHANNEL, notify
from tasks.exceptions import Conflict
from tasks.models import TaskSet, Workflow, WorkflowRun
from tasks.transitions import workflows
from tasks.transitions.taskset_plan import as_json
from tasks.transitions.workflow_schedules import first_run_at

COMPARED = ("name", "steps", "notify", "priority", "expect", "schedule")


@dataclass
class DeclaredWorkflow:
    """One validated `workflows:` entry: its key, the entry as sent (without `key`) and the
    validated fields (`name`, `steps`, `notify`, `priority`, `expect`, `schedule`)."""

    key: str
    entry: dict
    data: dict


@dataclass
class WorkflowPlan:
    create: list[DeclaredWorkflow] = field(default_factory=list)
    # (declared, workflow, {field: {"from", "to"}})
    update: list[tuple[DeclaredWorkflow, Workflow, dict]] = field(default_factory=list)
    delete: list[Workflow] = field(default_factory=list)
    unchanged: list[tuple[DeclaredWorkflow, Workflow]] = field(default_factory=list)

    def as_json(self, created_ids: dict[str, str] | None = None) -> dict[str, Any]:
        ids = created_ids or {}
        return {
            "create": [
                {"key": d.key, "id": ids.get(d.key), "workflow": wanted(d)} for d in self.create
            ],
            "update": [
                {"key": d.key, "id": str(w.pk), "changes": changes} for d, w, changes in self.update
            ],
            "delete": [{"key": w.taskset_key, "id": str(w.pk)} for w in self.delete],
            "unchanged": len(self.unchanged),
        }

    def changes(self) -> int:
        return len(self.create) + len(self.update) + len(self.delete)


def fields_of(workflow: Workflow) -> dict[str, Any]:
    """The workflow's declared fields as JSON values (what `applied` stores)."""
    return as_json({name: getattr(workflow, name) for name in COMPARED})


def wanted(declared: DeclaredWorkflow, workflow: Workflow | None = None) -> dict[str, Any]:
    """What `declared` wants of the workflow's fields (of a new workflow when `workflow` is
    None)."""
    result = as_json(
        {
            "name": declared.data["name"],
            "steps": declared.data["steps"],
            "notify": declared.data.get("notify", []),
            "priority": declared.data.get("priority", 5),
            "expect": declared.data.get("expect", {}),
            "schedule": declared.data.get("schedule"),
        }
    )
    previous = workflow.taskset_entry if workflow is not None else None
    if previous:
        for name in COMPARED:
            if name in previous["applied"] and (
                previous["entry"].get(name) == declared.entry.get(name)
            ):
                result[name] = previous["applied"][name]
    return result


def members(taskset: TaskSet | None) -> dict[str, Workflow]:
    """The set's workflows by key."""
    if taskset is None:
        return {}
    found = Workflow.objects.filter(taskset=taskset).order_by("taskset_key")
    return {workflow.taskset_key or "": workflow for workflow in found}


def plan(taskset: TaskSet | None, declared: list[DeclaredWorkflow]) -> WorkflowPlan:
    """What applying `declared` does to the set's workflows: creates in file order, updates,
    deletes by key."""
    current = members(taskset)
    result = WorkflowPlan()
    for item in declared:
        workflow = current.pop(item.key, None)
        if workflow is None:
            result.create.append(item)
            continue
        want, have = wanted(item, workflow), fields_of(workflow)
        changes = {
            name: {"from": have[name], "to": want[name]}
            for name in COMPARED
            if have[name] != want[name]
        }
        if changes:
            result.update.append((item, workflow, changes))
        else:
            result.unchanged.append((item, workflow))
    result.delete = list(current.values())
    return result


def _entry(declared: DeclaredWorkflow, workflow: Workflow | None = None) -> dict[str, Any]:
    return {"entry": declared.entry, "applied": wanted(declared, workflow)}


def apply(
    *, taskset: TaskSet, owner: Any, planned: WorkflowPlan, force: bool, now: datetime
) -> dict[str, str]:
    """Carry out `planned` inside the caller's transaction (which holds the set's row lock);
    returns the ids of the workflows created by key.

    A removed workflow's running workflow runs are cancelled first, as its DELETE does; without
    `force` a running one is a Conflict, which rolls the whole apply back (as a task's running
    run does)."""
    running = WorkflowRun.objects.filter(
        workflow__in=planned.delete, status=WorkflowRun.Status.RUNNING
    )
    if running.exists() and not force:
        keys = sorted(
            {run.workflow.taskset_key or "" for run in running.select_related("workflow")}
        )
        raise Conflict(
            f"workflows {', '.join(keys)} have running workflow runs; "
            "apply with force=true to cancel them"
        )
    for workflow_run in running.order_by("pk"):
        workflows.cancel_workflow_run(workflow_run=workflow_run, now=now)
    Workflow.objects.filter(pk__in=[w.pk for w in planned.delete]).delete()
    created: dict[str, str] = {}
    rescheduled = False
    for item in planned.create:
        fields = wanted(item)
        workflow = Workflow.objects.create(
            owner=owner,
            taskset=taskset,
            taskset_key=item.key,
            taskset_entry=_entry(item),
            next_run_at=first_run_at(fields["schedule"], now=now),
            **fields,
        )
        created[item.key] = str(workflow.pk)
        rescheduled = rescheduled or fields["schedule"] is not None
    for item, workflow, changes in planned.update:
        fields = wanted(item, workflow)
        if "schedule" in changes:  # starts again from its first occurrence from now
            fields["next_run_at"] = first_run_at(fields["schedule"], now=now)
            rescheduled = True
        Workflow.objects.filter(pk=workflow.pk).update(
            **fields, taskset_entry=_entry(item, workflow), updated_at=now
        )
    for item, workflow in planned.unchanged:  # the entry as now written, same values
        Workflow.objects.filter(pk=workflow.pk).update(taskset_entry=_entry(item, workflow))
    if rescheduled:
        notify(TASK_CHANGED_CHANNEL)  # the schedulers' sleep follows next_run_at
    left = {key: str(w.pk) for key, w in members(taskset).items()}
    TaskSet.objects.filter(pk=taskset.pk).update(workflow_keys=left)
    return created


def drift(taskset: TaskSet) -> list[dict[str, Any]]:
    """The set's workflows whose fields differ from what the last apply left, by key (each
    field `{"declared", "actual", "ignored": false}`), and the ones deleted outside the set
    (`deleted: true`, `fields` empty)."""
    live = members(taskset)
    found: list[dict[str, Any]] = []
    for key, workflow in live.items():
        applied = (workflow.taskset_entry or {}).get("applied", {})
        have = fields_of(workflow)
        fields = {
            name: {"declared": applied[name], "actual": have[name], "ignored": False}
            for name in COMPARED
            if name in applied and applied[name] != have[name]
        }
        if fields:
            found.append({"key": key, "id": str(workflow.pk), "deleted": False, "fields": fields})
    for key, workflow_id in sorted((taskset.workflow_keys or {}).items()):
        if key not in live:
            found.append({"key": key, "id": workflow_id, "deleted": True, "fields": {}})
    found.sort(key=lambda item: item["key"])
    return found
