"""Creating and changing a workflow (its name, steps, notify, priority, expect and schedule).
Starting its runs is tasks/transitions/workflows.py's; on its schedule, workflow_schedules.py's."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from tasks.db import TASK_CHANGED_CHANNEL, notify
from tasks.models import Workflow
from tasks.transitions.workflow_schedules import first_run_at


def create_workflow(*, owner: Any, fields: dict[str, Any], now: datetime) -> Workflow:
    """Create a workflow from validated fields (`name`, `steps`, `notify`?, `priority`?,
    `expect`?, `schedule`?); a schedule's first occurrence at or after `now` is its
    `next_run_at`, and the schedulers are woken to sleep until it."""
    schedule = fields.get("schedule")
    workflow = Workflow.objects.create(
        owner=owner,
        name=fields["name"],
        steps=fields["steps"],
        notify=fields.get("notify", []),
        priority=fields.get("priority", 5),
        expect=fields.get("expect", {}),
        schedule=schedule,
        next_run_at=first_run_at(schedule, now=now),
    )
    if schedule is not None:
        notify(TASK_CHANGED_CHANNEL)
    return workflow


def change_workflow(*, workflow: Workflow, changes: dict[str, Any], now: datetime) -> Workflow:
    """Apply validated changes (any of `name`, `steps`, `notify`, `priority`, `expect`,
    `schedule`).

    The workflow's row is locked first, so a scheduler's pass starting one of its occurrences
    (which holds that lock) finishes before or starts after the change, never half of each. A
    change applies to the workflow runs started afterwards: the ones in flight keep the steps
    they started with (their WorkflowStep rows and tasks). A schedule sent (changed or not, as a
    task's PATCH replans it) starts again from its first occurrence at or after `now` (one
    already started is not started twice: the unique (workflow, scheduled_at) index);
    `runs_started` keeps counting toward `max_runs`, as a task's `runs_planned` does. An
    `expect` without `success_within` makes the workflow `ok` at once (no alert); one with it is
    judged by the reviewer's next pass.
    """
    with transaction.atomic():
        workflow = Workflow.objects.select_for_update().get(pk=workflow.pk)
        changed = ("name", "steps", "notify", "priority", "expect")
        fields: list[str] = [name for name in changed if name in changes]
        for name in fields:
            setattr(workflow, name, changes[name])
        if "expect" in changes and "success_within" not in changes["expect"]:
            workflow.health = "ok"
            fields.append("health")
        rescheduled = "schedule" in changes
        if rescheduled:
            workflow.schedule = changes["schedule"]
            workflow.next_run_at = first_run_at(workflow.schedule, now=now)
            fields += ["schedule", "next_run_at"]
        workflow.save(update_fields=[*fields, "updated_at"])
    if rescheduled:
        notify(TASK_CHANGED_CHANNEL)  # the schedulers' sleep follows next_run_at
    return workflow
