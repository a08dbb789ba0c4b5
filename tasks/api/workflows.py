"""Workflow endpoints: create, read, change, delete and list workflows; start, read, list and
cancel workflow runs (docs/api.md, "Workflows"). Validate, call one service, serialize."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import django_filters
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler_project.auth import request_owner
from tasks import occurrences, outbox, schedules
from tasks.api.serializers import (
    MAX_EXPECT_SECONDS,
    PriorityField,
    ScheduleField,
    TaskInputSerializer,
    check_calendars,
)
from tasks.api.strict import ChoiceField, StrictSerializer
from tasks.api.views import CONFLICT, ERRORS
from tasks.db import db_now
from tasks.events import WORKFLOW_EVENTS
from tasks.models import Workflow, WorkflowRun, WorkflowStep
from tasks.transitions import workflow_changes, workflows
from tasks.workflow_models import STEP_ON, WORKFLOW_HEALTH

MAX_STEPS = 5000  # a fan-out of thousands between a root and a join, in one start transaction
# A step's task runs once, now, per workflow run: no schedule, no dedup key of its own.
NOT_IN_STEP = ("schedule", "dedup_key", "file")


class StepSerializer(StrictSerializer):
    id = serializers.RegexField(r"^[A-Za-z0-9_.-]{1,100}$", max_length=100)
    after = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=MAX_STEPS
    )
    on = serializers.ChoiceField(choices=STEP_ON, required=False)
    task = serializers.DictField()


class WorkflowNotifySerializer(StrictSerializer):
    channel = serializers.CharField(max_length=64)
    events = serializers.ListField(
        child=ChoiceField(choices=WORKFLOW_EVENTS),
        allow_empty=False,
        max_length=len(WORKFLOW_EVENTS),
    )


class WorkflowExpectSerializer(StrictSerializer):
    """What a workflow's runs are expected to do (docs/workflows.md, "Expectations")."""

    success_within = serializers.FloatField(
        min_value=0.001,
        max_value=MAX_EXPECT_SECONDS,
        required=False,
        help_text="No workflow run succeeding for this long (from the workflow's creation or "
        "its last success) makes it `overdue` and queues `workflow_overdue`.",
    )

    def validate_success_within(self, value: float) -> float:
        if not math.isfinite(value):
            raise serializers.ValidationError("Must be a finite number of seconds.")
        return value


class WorkflowInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    steps = StepSerializer(many=True, max_length=MAX_STEPS, min_length=1)  # type: ignore[call-arg]
    notify = WorkflowNotifySerializer(many=True, required=False, max_length=20)  # type: ignore[call-arg]
    priority = PriorityField(
        required=False,
        help_text="Its steps' runs' priority (0-9, default 5) where a step's task sets none.",
    )
    expect = WorkflowExpectSerializer(required=False)
    schedule = ScheduleField(
        required=False,
        allow_null=True,
        help_text="Starts one workflow run per occurrence; any schedule a task takes (its "
        "`misfire` and `overlap` included). null: started on demand only.",
    )

    def validate_notify(self, value: list[dict]) -> list[dict]:
        # Each entry must name one of the owner's channels (errors per index): the outbox's
        # registered check, the notifications app's, as for a task's `notify`.
        return outbox.validate_notify(value, owner=request_owner(self.context["request"]))

    def validate_schedule(self, value: Any) -> dict | None:
        """As a task's schedule is validated (the same errors, under `schedule`)."""
        if value is None:
            return None
        try:
            schedule = schedules.normalize(value, now=self.context["now"])
        except schedules.ScheduleError as exc:
            raise serializers.ValidationError(exc.errors) from None
        return check_calendars(schedule, self.context)

    def validate_steps(self, steps: list[dict]) -> list[dict]:
        errors: dict[str, dict[str, list[str]]] = {}
        first: dict[str, int] = {}
        for i, step in enumerate(steps):
            if step["id"] in first:
                errors.setdefault(str(i), {})["id"] = [f"Duplicate step id {step['id']!r}."]
            first.setdefault(step["id"], i)
        for i, step in enumerate(steps):
            unknown = [name for name in step.get("after", []) if name not in first]
            if unknown:
                names = ", ".join(repr(n) for n in unknown)
                errors.setdefault(str(i), {})["after"] = [f"Names no step: {names}."]
            task_errors = self._task_errors(step["task"])
            if task_errors:
                errors.setdefault(str(i), {})["task"] = task_errors
        if not errors:
            for i in cycle(steps):
                errors[str(i)] = {"after": ["Forms a cycle with the steps it waits for."]}
        if errors:
            raise serializers.ValidationError(errors)
        return [
            {"id": s["id"], "after": s.get("after", []), "on": s.get("on", "success"), **s}
            for s in steps
        ]

    def _task_errors(self, body: dict) -> Any:
        present = [key for key in NOT_IN_STEP if key in body]
        if present:
            return {key: ["Not allowed in a workflow step."] for key in present}
        serializer = step_task_serializer(body, context=self.context)
        return None if serializer.is_valid() else serializer.errors


class WorkflowChangeSerializer(WorkflowInputSerializer):
    """PATCH: any of the fields a create takes, each validated as a create validates it."""

    name = serializers.CharField(max_length=200, required=False)
    steps = StepSerializer(  # type: ignore[call-arg]
        many=True, max_length=MAX_STEPS, min_length=1, required=False
    )


def step_task_serializer(body: dict, *, context: Mapping[str, Any]) -> TaskInputSerializer:
    return TaskInputSerializer(data=body, context={**context, "multipart": False})


def step_body(workflow: Workflow, step: dict) -> dict:
    """A step's task body as a workflow run starts it: named `<workflow>/<step>`, at the
    workflow's priority unless the step's task sets its own."""
    return {"name": f"{workflow.name}/{step['id']}", "priority": workflow.priority, **step["task"]}


def step_bodies(workflow: Workflow, now: datetime) -> tuple[list[dict], str]:
    """The validated task bodies of the workflow's steps, as its owner's tasks, in its order;
    or why they are refused (`steps[i] (id): errors`, a channel deleted since, say). What a
    scheduled start and the admin's Run now start a workflow run with."""
    context = {"now": now, "request": SimpleNamespace(user=workflow.owner)}
    bodies, refused = [], []
    for index, step in enumerate(workflow.steps):
        serializer = step_task_serializer(step_body(workflow, step), context=context)
        if serializer.is_valid():
            bodies.append(serializer.validated_data)
        else:
            refused.append(f"steps[{index}] ({step['id']}): {serializer.errors}")
    return bodies, "; ".join(refused)


def cycle(steps: list[dict]) -> list[int]:
    """The indexes of the steps on or behind a cycle (Kahn's algorithm: what never becomes
    free), in the workflow's order; [] when the steps form a DAG."""
    waiting = {s["id"]: set(s.get("after", [])) for s in steps}
    free = [name for name, after in waiting.items() if not after]
    while free:
        done = free.pop()
        for name, after in waiting.items():
            if done in after:
                after.discard(done)
                if not after:
                    free.append(name)
    return [i for i, s in enumerate(steps) if waiting[s["id"]]]


class WorkflowOutputSerializer(serializers.Serializer):
    """The schema of a workflow as every read answers it (workflow_json)."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    steps = StepSerializer(many=True)
    schedule = serializers.JSONField(allow_null=True, help_text="Normalized, as a task's.")
    next_run_at = serializers.DateTimeField(
        allow_null=True, help_text="Its schedule's next occurrence not started yet."
    )
    notify = WorkflowNotifySerializer(many=True)
    priority = serializers.IntegerField(help_text="Its steps' runs' default priority.")
    expect = WorkflowExpectSerializer()
    health = serializers.ChoiceField(
        choices=WORKFLOW_HEALTH,
        help_text="`overdue` while its `expect.success_within` is not met (the reviewer's "
        "judgement), else `ok`.",
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class WorkflowStepOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    status = serializers.CharField(allow_null=True, help_text="Its run's status.")
    run = serializers.UUIDField(allow_null=True)
    output = serializers.JSONField(required=False, help_text="Once it ended with an output.")
    reason = serializers.CharField(required=False, help_text="Why it was skipped.")


class WorkflowRunOutputSerializer(serializers.Serializer):
    """The schema of a workflow run as every read answers it (workflow_run_json)."""

    id = serializers.UUIDField()
    workflow = serializers.UUIDField()
    status = serializers.ChoiceField(choices=WorkflowRun.Status.choices)
    scheduled_at = serializers.DateTimeField(
        allow_null=True, help_text="The occurrence of its schedule; null when started on demand."
    )
    reason = serializers.CharField(required=False, help_text="Why it was skipped.")
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    steps = WorkflowStepOutputSerializer(many=True)


def workflow_json(workflow: Workflow) -> dict:
    return {
        "id": str(workflow.pk),
        "name": workflow.name,
        "steps": workflow.steps,
        "schedule": None
        if workflow.schedule is None
        else occurrences.shown_schedule(workflow.schedule),
        "next_run_at": workflow.next_run_at,
        "notify": workflow.notify,
        "priority": workflow.priority,
        "expect": workflow.expect,
        "health": workflow.health,
        "created_at": workflow.created_at,
        "updated_at": workflow.updated_at,
    }


def step_output(text: str) -> Any:
    """A step's output as the steps after it receive it (tasks/sql/workflows.sql)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def workflow_run_json(workflow_run: WorkflowRun) -> dict:
    # The steps it was started with, in the workflow's order then (bulk-created in it): a
    # PATCH of the workflow's steps since changes none of them.
    rows = WorkflowStep.objects.filter(workflow_run=workflow_run).select_related("run")
    steps = []
    for row in rows.order_by("id"):
        run = row.run
        item: dict[str, Any] = {
            "id": row.step_id,
            "status": run.status if run else None,
            "run": str(run.pk) if run else None,
        }
        if run is not None and run.output:
            item["output"] = step_output(run.output)
        if run is not None and run.status == "skipped":
            item["reason"] = run.error
        steps.append(item)
    found: dict[str, Any] = {
        "id": str(workflow_run.pk),
        "workflow": str(workflow_run.workflow_id),
        "status": workflow_run.status,
        "scheduled_at": workflow_run.scheduled_at,
        "started_at": workflow_run.started_at,
        "finished_at": workflow_run.finished_at,
        "steps": steps,
    }
    if workflow_run.reason:
        found["reason"] = workflow_run.reason
    return found


def owned_workflows(request: Request) -> QuerySet[Workflow]:
    return Workflow.objects.filter(owner=request_owner(request))


class WorkflowFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")
    health = django_filters.ChoiceFilter(choices=[(word, word) for word in WORKFLOW_HEALTH])
    scheduled = django_filters.BooleanFilter(
        field_name="schedule", lookup_expr="isnull", exclude=True, help_text="Has a schedule."
    )
    taskset = django_filters.CharFilter(field_name="taskset__name", help_text="One task set's.")

    class Meta:
        model = Workflow
        fields = ["name", "health", "scheduled", "taskset"]


@extend_schema_view(
    get=extend_schema(
        summary="List your workflows",
        description="The caller's workflows, newest first, filtered as asked.",
    )
)
class WorkflowListCreateView(generics.ListAPIView):
    """GET (newest first, filtered) and POST /workflows."""

    serializer_class = WorkflowOutputSerializer
    filterset_class = WorkflowFilter
    ordering_fields = ["created_at", "name"]

    def get_queryset(self) -> QuerySet[Workflow]:
        return owned_workflows(self.request).order_by("-created_at", "-id")

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response([workflow_json(w) for w in page or []])

    @extend_schema(
        summary="Create a workflow",
        description="A named DAG of steps, each a task body run after the steps its `after` "
        "names when its `on` holds (docs/workflows.md), with an optional `schedule` that starts "
        "one workflow run per occurrence. A cycle, an `after` naming no step, a duplicate id or "
        "an invalid step body answers 400 naming the step by its index.",
        request=WorkflowInputSerializer,
        responses={201: WorkflowOutputSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        serializer = WorkflowInputSerializer(
            data=request.data, context={"now": db_now(), "request": request}
        )
        serializer.is_valid(raise_exception=True)
        workflow = workflow_changes.create_workflow(
            owner=request_owner(request), fields=serializer.validated_data, now=db_now()
        )
        return Response(workflow_json(workflow), status=status.HTTP_201_CREATED)


class WorkflowDetailView(APIView):
    """GET, PATCH and DELETE /workflows/{id}. DELETE cancels its running workflow runs first."""

    @extend_schema(
        summary="Get a workflow",
        description="The workflow with its steps, `after` and `on` filled in.",
        responses={200: WorkflowOutputSerializer, **ERRORS},
    )
    def get(self, request: Request, pk: Any) -> Response:
        return Response(workflow_json(get_object_or_404(owned_workflows(request), pk=pk)))

    @extend_schema(
        summary="Change a workflow",
        description="Any of `name`, `steps`, `notify`, `priority`, `expect` and `schedule`, each "
        "validated as a create validates it. A change applies to the workflow runs started "
        "afterwards: one in flight keeps the steps it started with. A changed schedule starts "
        "from its first occurrence from now on.",
        request=WorkflowChangeSerializer,
        responses={200: WorkflowOutputSerializer, **ERRORS},
    )
    def patch(self, request: Request, pk: Any) -> Response:
        workflow = get_object_or_404(owned_workflows(request), pk=pk)
        now = db_now()
        serializer = WorkflowChangeSerializer(
            data=request.data, context={"now": now, "request": request}
        )
        serializer.is_valid(raise_exception=True)
        workflow = workflow_changes.change_workflow(
            workflow=workflow, changes=serializer.validated_data, now=now
        )
        return Response(workflow_json(workflow))

    @extend_schema(
        summary="Delete a workflow",
        description="Its running workflow runs are cancelled first; its steps' tasks and runs "
        "stay, as every task's do.",
        responses={204: None, **ERRORS},
    )
    def delete(self, request: Request, pk: Any) -> Response:
        workflow = get_object_or_404(owned_workflows(request), pk=pk)
        now = db_now()
        for workflow_run in workflow.runs.filter(status=WorkflowRun.Status.RUNNING):
            workflows.cancel_workflow_run(workflow_run=workflow_run, now=now)
        workflow.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class WorkflowRunStartView(APIView):
    """POST /workflows/{id}/run: 201 and the workflow run."""

    @extend_schema(
        summary="Start a workflow run",
        description="One task and run per step, made in one transaction; the steps with "
        "`after` wait (`waiting for upstream steps ...`) until their upstream steps end.",
        request=None,
        responses={201: WorkflowRunOutputSerializer, **ERRORS},
    )
    def post(self, request: Request, pk: Any) -> Response:
        workflow = get_object_or_404(owned_workflows(request), pk=pk)
        now = db_now()
        context = {"now": now, "request": request}
        bodies = []
        for step in workflow.steps:
            serializer = step_task_serializer(step_body(workflow, step), context=context)
            serializer.is_valid(raise_exception=True)  # valid at create; a deleted channel...
            bodies.append(serializer.validated_data)
        workflow_run = workflows.start_workflow_run(workflow=workflow, step_bodies=bodies, now=now)
        return Response(workflow_run_json(workflow_run), status=status.HTTP_201_CREATED)


@extend_schema_view(
    get=extend_schema(
        summary="List a workflow's runs", description="Its workflow runs, newest first."
    )
)
class WorkflowRunListView(generics.ListAPIView):
    """GET /workflows/{id}/runs, newest first."""

    serializer_class = WorkflowRunOutputSerializer
    queryset = WorkflowRun.objects.none()  # the schema's model; list() reads the workflow's

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        workflow = get_object_or_404(owned_workflows(request), pk=kwargs["pk"])
        queryset = workflow.runs.select_related("workflow").order_by("-started_at", "-id")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response([workflow_run_json(r) for r in page or []])


def owned_workflow_run(request: Request, pk: Any) -> WorkflowRun:
    runs = WorkflowRun.objects.filter(owner=request_owner(request)).select_related("workflow")
    return get_object_or_404(runs, pk=pk)


class WorkflowRunDetailView(APIView):
    """GET /workflow-runs/{id}."""

    @extend_schema(
        summary="Get a workflow run",
        description="Its status and each step's: status, run, output, and why it was skipped.",
        responses={200: WorkflowRunOutputSerializer, **ERRORS},
    )
    def get(self, request: Request, pk: Any) -> Response:
        return Response(workflow_run_json(owned_workflow_run(request, pk)))


class WorkflowRunCancelView(APIView):
    """POST /workflow-runs/{id}/cancel: 200 and the workflow run (an ended one as it is)."""

    @extend_schema(
        summary="Cancel a workflow run",
        description="It ends `cancelled`: its waiting and scheduled steps are cancelled, its "
        "running ones stopped; an ended workflow run is answered as it is.",
        request=None,
        responses={200: WorkflowRunOutputSerializer, **ERRORS},
    )
    def post(self, request: Request, pk: Any) -> Response:
        workflow_run = owned_workflow_run(request, pk)
        workflows.cancel_workflow_run(workflow_run=workflow_run, now=db_now())
        return Response(workflow_run_json(owned_workflow_run(request, pk)))


class WorkflowRunRetryView(APIView):
    """POST /workflow-runs/{id}/retry: 200 and the workflow run; 409 unless failed or
    cancelled."""

    @extend_schema(
        summary="Retry a workflow run",
        description="Runs its failed, cancelled and skipped steps again (fresh attempts); its "
        "succeeded steps keep their outputs and do not run again. 409 unless it is `failed` "
        "or `cancelled`.",
        request=None,
        responses={200: WorkflowRunOutputSerializer, **ERRORS, **CONFLICT},
    )
    def post(self, request: Request, pk: Any) -> Response:
        workflow_run = owned_workflow_run(request, pk)
        workflows.retry_workflow_run(workflow_run=workflow_run, now=db_now())
        return Response(workflow_run_json(owned_workflow_run(request, pk)))
