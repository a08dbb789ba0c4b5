"""Workflow (a named DAG of steps), WorkflowRun (one execution of it) and WorkflowStep (a step's
run in a workflow run). Imported by tasks/models.py, so Django finds them in the tasks app."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from tasks.ids import uuid7

WORKFLOW_RUN_STATUSES = ("running", "succeeded", "failed", "cancelled", "skipped")
STEP_ON = ("success", "failure", "always")
WORKFLOW_HEALTH = ("ok", "overdue")


class Workflow(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    name = models.CharField(max_length=200)
    # [{"id", "after": [...], "on": ..., "task": {<a task body without schedule>}}], validated
    # by the API (tasks/api/workflows.py): ids unique, `after` naming steps, no cycle.
    steps = models.JSONField()
    # A schedule as a task's (tasks/schedules.py normalize), or None: started only on demand.
    # The scheduler starts one workflow run per occurrence (tasks/transitions/
    # workflow_schedules.py): `next_run_at` is the first occurrence not started yet (None: no
    # schedule, or it ended), `runs_started` how many occurrences were (max_runs counts them).
    schedule = models.JSONField(null=True, blank=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    runs_started = models.IntegerField(default=0, db_default=0)
    # [{"channel", "events"}] as a task's `notify`, with the events of a workflow run
    # (tasks.events.WORKFLOW_EVENTS): queued when a workflow run ends (docs/workflows.md).
    notify = models.JSONField(default=list, blank=True, db_default=[])
    # The priority of its steps' runs (0-9, as a task's) where a step's task sets none.
    priority = models.SmallIntegerField(default=5, db_default=5)
    # `{"success_within": seconds}` or {}: judged by the reviewer (tasks/sql/expect.sql,
    # `workflow_overdue`): `health` is `overdue` while no workflow run succeeded within that
    # long of the lapse's start, `overdue_from` (the workflow's creation or its last success's
    # end); the lapse alerted last, so each lapse queues `workflow_overdue` once.
    expect = models.JSONField(default=dict, blank=True, db_default={})
    health = models.CharField(max_length=8, default="ok", db_default="ok")
    overdue_from = models.DateTimeField(null=True, blank=True)
    # The task set that declares it (a set file's `workflows:` entry) and its key there;
    # `taskset_entry` holds what the last apply declared and left (`{"entry", "applied"}`):
    # drift is the workflow's fields against `applied` (tasks/transitions/taskset_workflows.py).
    taskset = models.ForeignKey(
        "tasks.TaskSet", null=True, blank=True, on_delete=models.SET_NULL, related_name="workflows"
    )
    taskset_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    taskset_entry = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # A key names one workflow of its set.
            models.UniqueConstraint(
                fields=["taskset", "taskset_key"],
                condition=Q(taskset__isnull=False),
                name="workflow_unique_taskset_key",
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=0, priority__lte=9), name="workflow_priority_range"
            ),
            models.CheckConstraint(
                condition=Q(health__in=WORKFLOW_HEALTH), name="workflow_health_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="workflow_owner_created_idx"),
            # The scheduler's search for workflows with an occurrence due.
            models.Index(
                fields=["next_run_at"],
                condition=Q(next_run_at__isnull=False),
                name="workflow_next_run_idx",
            ),
            # The reviewer's `workflow_overdue` pass: the workflows that expect a success, or
            # were overdue (to clear one whose expectation was removed).
            models.Index(
                fields=["id"],
                condition=Q(expect__has_key="success_within") | Q(health="overdue"),
                name="workflow_expect_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class WorkflowRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        # An occurrence of its schedule not started (misfire, overlap, exclusion): `reason`.
        SKIPPED = "skipped"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    workflow = models.ForeignKey(
        Workflow, on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    # The occurrence of the workflow's schedule it was started for; None when started on demand.
    scheduled_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True, default="", db_default="")  # why it was skipped

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=WORKFLOW_RUN_STATUSES), name="workflow_run_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(status="running", finished_at__isnull=True)
                | ~Q(status="running") & Q(finished_at__isnull=False),
                name="workflow_run_finished_iff_ended",
            ),
            # One workflow run per occurrence, however many schedulers plan it.
            models.UniqueConstraint(
                fields=["workflow", "scheduled_at"],
                condition=Q(scheduled_at__isnull=False),
                name="workflow_run_unique_occurrence",
            ),
        ]
        indexes = [
            models.Index(fields=["workflow", "-started_at"], name="workflow_run_workflow_idx"),
            # The reviewer's search for workflow runs a crash left unfinished.
            models.Index(
                fields=["started_at"],
                condition=Q(status="running"),
                name="workflow_run_running_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id}@{self.started_at.isoformat()}"


class WorkflowStep(models.Model):
    """A step of a workflow run and its run: created once per (workflow run, step id), with the
    step's `after` and `on` copied, so the release (tasks/sql/workflows.sql) reads no JSON."""

    id = models.BigAutoField(primary_key=True)
    workflow_run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="steps", db_index=False
    )
    step_id = models.CharField(max_length=100)
    # The run outlives pruning only as NULL: a pruned step's outcome is gone with its run.
    run = models.OneToOneField(
        "tasks.Run", on_delete=models.SET_NULL, null=True, related_name="workflow_step"
    )
    after = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    # The steps that name it in `after`, and how many of its own `after` steps have not ended:
    # a step's end counts down its next steps' `waiting` once (`ended`, set with it), so a
    # join with 1,000 upstream steps is not read in full at each one's end.
    downstream = ArrayField(
        models.CharField(max_length=100), default=list, blank=True, db_default=[]
    )
    waiting = models.IntegerField(default=0, db_default=0)
    ended = models.BooleanField(default=False, db_default=False)
    run_on = models.CharField(max_length=8, default="success")  # the step's `on`

    class Meta:
        constraints = [
            # A step's run is made once per workflow run.
            models.UniqueConstraint(
                fields=["workflow_run", "step_id"], name="workflow_step_unique_run_step"
            ),
            models.CheckConstraint(
                condition=Q(run_on__in=STEP_ON), name="workflow_step_run_on_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_run_id}/{self.step_id}"
